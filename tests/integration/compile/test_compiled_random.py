"""Random ops in a region under torch.compile: the same numbers as the eager engine, or an error.

torch's ``tag_activation_checkpoint`` runs its checkpoint with ``preserve_rng_state=False`` (for
tracing). Under ``backend="eager"`` nothing is traced: torch's selective checkpoint runs at step time,
and its recompute draws fresh numbers: a wrong gradient (3.3 here), which the library refuses.
AOTAutograd backends replay the forward's RNG and must give the unwrapped model's gradient exactly.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt


def _model(wrap: bool, policy: str, p: float) -> tuple[nn.Module, nn.Module, callable]:
    torch.manual_seed(0)
    lin1, lin2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def block(x: torch.Tensor) -> torch.Tensor:
        return lin2(F.dropout(torch.relu(lin1(x)), p, training=True))

    def model(x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            x = xla_ckpt.checkpoint(block, x, policy=policy) if wrap else block(x)
        return x.sum()

    return lin1, lin2, model


def _step(wrap: bool, backend, policy: str = "nothing_saveable", p: float = 0.5) -> list[torch.Tensor]:
    lin1, lin2, model = _model(wrap, policy, p)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(3), requires_grad=True)
    fn = model if backend is None else torch.compile(model, backend=backend)
    torch.manual_seed(1)
    fn(x).backward()
    grads = [lin1.weight.grad, lin1.bias.grad, lin2.weight.grad, lin2.bias.grad, x.grad]
    assert all(g is not None for g in grads)
    return grads


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_aot_backend_replays_the_forward_rng(policy: str) -> None:
    ref = _step(False, None)
    for got, want in zip(_step(True, "aot_eager", policy), ref, strict=True):
        torch.testing.assert_close(got, want)


def test_eager_backend_refuses_a_random_op_instead_of_a_wrong_gradient() -> None:
    with pytest.raises(xla_ckpt.CheckpointError, match=r"random op aten\.bernoulli.*backend='eager'.*aot_eager"):
        _step(True, "eager")


def test_eager_backend_without_random_ops_is_exact() -> None:
    ref = _step(False, None, p=0.0)
    for got, want in zip(_step(True, "eager", p=0.0), ref, strict=True):
        torch.testing.assert_close(got, want)


# --------------------------------------------------------------------------- random per call

aten = torch.ops.aten
_X = torch.randn(4, 8, 16)
_Q = torch.randn(2, 4, 8, 16)
_CALLS = [
    (aten._scaled_dot_product_flash_attention_for_cpu.default, (_Q, _Q, _Q), {}),  # dropout_p defaulted
    (aten._scaled_dot_product_flash_attention_for_cpu.default, (_Q, _Q, _Q, 0.0, True), {"scale": 0.3}),
    (aten.native_dropout.default, (_X, 0.5, False), {}),
    (aten.native_dropout.default, (_X, 0.5, True), {}),
    (aten.native_dropout.default, (_X, 0.0, True), {}),  # draws: its mask is bernoulli_(1.0)
    (aten.native_dropout.default, (_X, 0.5, None), {}),  # train=None is train
    (aten.dropout.default, (_X, 0.0, True), {}),
    (aten.dropout.default, (_X, 0.5, False), {}),
    (aten.dropout.default, (_X, 0.5, True), {}),
    (aten.alpha_dropout.default, (_X, 0.5, False), {}),
    (aten.rrelu_with_noise.default, (_X, torch.zeros_like(_X), 0.1, 0.3, False), {}),
    (aten.rrelu_with_noise.default, (_X, torch.zeros_like(_X), 0.1, 0.3, True), {}),
    (aten.bernoulli.p, (_X, 0.0), {}),  # draws a uniform per element whatever p
    (aten.uniform_.default, (_X.clone(),), {}),
    (aten.mm.default, (_X[0], _X[0].T), {}),
]


@pytest.mark.parametrize("op,args,kwargs", _CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(_CALLS)])
def test_draws_is_whether_the_call_advances_the_generator(op, args, kwargs) -> None:
    from xla_ckpt._record.record import draws, op_info

    before = torch.get_rng_state()
    op(*args, **kwargs)
    advanced = not torch.equal(before, torch.get_rng_state())
    assert draws(op_info(op), args, kwargs) == advanced


def test_eager_engine_replays_no_rng_for_attention_without_dropout(monkeypatch) -> None:
    """SDPA at dropout_p=0 is recomputed as a plain op: no RNG record, the same gradients."""
    from xla_ckpt._record.replay_state import Draw

    recorded = []
    real = Draw.record
    monkeypatch.setattr(Draw, "record", staticmethod(lambda *a: recorded.append(a) or real(*a)))

    def attn(q: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, q.sin(), q.cos(), dropout_p=0.0).tanh()

    q = torch.randn(2, 2, 8, 16, requires_grad=True)
    ref = q.detach().clone().requires_grad_()
    attn(ref).sum().backward()
    xla_ckpt.checkpoint(attn, q, policy="nothing_saveable").sum().backward()
    torch.testing.assert_close(q.grad, ref.grad)
    assert recorded == []
    xla_ckpt.checkpoint(lambda t: F.dropout(attn(t), 0.5, training=True), q, policy="nothing_saveable")
    assert len(recorded) == 1  # dropout at p=0.5 still is a random op


# --------------------------------------------------------------------------- errors leave nothing installed


def _installed() -> tuple[int, bool]:
    """Dispatch modes on the stack, and whether a saved-tensor hook is installed."""
    return torch._C._len_torch_dispatch_stack(), torch._C._autograd._top_saved_tensors_default_hooks(True) is not None


def _not_a_decision(call):
    return "save" if call.op in (aten.mm.default, aten.addmm.default) else xla_ckpt.Decision.RECOMPUTE


@pytest.mark.parametrize("backend,policy,p,error", [
    ("eager", "nothing_saveable", 0.5, r"random op aten\.bernoulli"),  # the named error, at step time
    ("eager", _not_a_decision, 0.0, r"returned 'save'"),  # a policy's error at step time
    ("aot_eager", _not_a_decision, 0.0, r"returned 'save'"),  # a policy's error while AOTAutograd traces
])
def test_an_error_inside_torch_checkpoint_leaves_no_mode_or_hook(backend, policy, p, error) -> None:
    assert _installed() == (0, False)
    with pytest.raises(Exception) as info:
        _step(True, backend, policy, p)
    kept = info.value  # a notebook's last exception: its traceback keeps torch's checkpoint frames alive
    assert kept.__traceback__ is not None
    chain = [kept, kept.__cause__, kept.__context__]
    assert any(e is not None and re.search(error, str(e)) for e in chain), chain
    assert _installed() == (0, False)
    torch.manual_seed(0)
    lin = nn.Linear(16, 32)  # aten.uniform_: raised "random op ... in module '(the region root)'" before
    x = torch.randn(3, 16, requires_grad=True)
    F.dropout(lin(x), 0.5).sum().backward()
    assert x.grad is not None and lin.weight.grad is not None
    del kept


def test_a_nested_region_error_is_raised_by_the_outer_region() -> None:
    lin = nn.Linear(16, 16)

    def inner(x: torch.Tensor) -> torch.Tensor:
        return lin(x).relu()

    def outer(x: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(inner, x.sin(), policy=_not_a_decision).cos()

    def model(x: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(outer, x, policy="nothing_saveable").sum()

    with pytest.raises(Exception) as info:
        torch.compile(model, backend="eager")(torch.randn(4, 16, requires_grad=True)).backward()
    kept = info.value
    assert "returned 'save'" in str(kept)
    assert _installed() == (0, False)
    del kept


def test_a_policy_built_inside_the_compiled_function_is_a_named_error() -> None:
    """Dynamo sets such an object's fields only when the frame runs, after AOTAutograd traced the region:
    this was a bare ``AttributeError: 'save_ops' object has no attribute 'ops'``. The same policy built
    outside compiles and gives the eager gradients."""
    from xla_ckpt import policies

    aten = torch.ops.aten
    w = torch.randn(8, 8, requires_grad=True)

    def region(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x @ w).relu() @ w

    def inline(x: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(region, x, policy=policies.any_of(policies.save_ops(aten.mm))).sum()

    x = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(Exception) as info:
        torch.compile(inline, backend="aot_eager")(x).backward()
    kept = info.value
    chain = [kept, kept.__cause__, kept.__context__]
    errors = [e for e in chain if isinstance(e, xla_ckpt.CheckpointError)]
    assert errors and re.search(r"policy any_of\(\.\.\.\).*built inside the compiled function.*outside",
                                str(errors[0])), chain
    assert _installed() == (0, False)
    del kept, errors, chain

    outside = policies.any_of(policies.save_ops(aten.mm))

    def built_outside(x: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(region, x, policy=outside).sum()

    grads = []
    for fn in (lambda x: region(x).sum(), torch.compile(built_outside, backend="aot_eager")):
        x.grad = w.grad = None
        fn(x).backward()
        assert x.grad is not None and w.grad is not None
        grads.append((x.grad, w.grad))
    torch.testing.assert_close(grads[1], grads[0])


# --------------------------------------------------------------------------- HF Llama under compile


def _llama_counting(preset: str | None, backend: str):
    transformers = pytest.importorskip("transformers")  # noqa: F841
    from xla_ckpt import hf_models

    model = hf_models.build("llama", n_layer=1)
    if preset is not None:
        xla_ckpt.apply(model, preset)
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    fn = model if backend is None else torch.compile(model, backend=counting if backend == "eager" else backend)
    batch = hf_models.batch("llama", model)
    torch.manual_seed(5)
    out = fn(**batch)
    out.loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    return out.loss.detach(), grads, graphs


@pytest.fixture(scope="module")
def _llama_plain():
    return _llama_counting(None, None)


def _presets() -> list:
    """Every preset; the fast tier compiles those that differ most (the selective one, the names one, and
    fsdp_xla's patched linear and weights by reference), `make test-all` all of them."""
    from xla_ckpt._base.presets import preset_names

    fast = {"megatron_selective", "names", "fsdp_xla"}
    return [n if n in fast else pytest.param(n, marks=pytest.mark.slow) for n in preset_names()]


@pytest.mark.parametrize("preset", _presets())
def test_hf_llama_every_preset_one_graph_and_the_plain_grads_under_eager_backend(preset, _llama_plain) -> None:
    """Default-config Llama (SDPA, dropout_p=0.0): no random op, so no error, no graph break, exact grads."""
    loss, grads, graphs = _llama_counting(preset, "eager")
    assert len(graphs) == 1
    torch.testing.assert_close(loss, _llama_plain[0])
    for got, want in zip(grads, _llama_plain[1], strict=True):
        torch.testing.assert_close(got, want)
    assert _installed() == (0, False)


def test_hf_llama_dynamo_explain_after_apply() -> None:
    pytest.importorskip("transformers")
    from xla_ckpt import hf_models

    model = hf_models.build("llama", n_layer=1)
    xla_ckpt.apply(model, "megatron_selective")
    explained = torch._dynamo.explain(model)(**hf_models.batch("llama", model))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    assert _installed() == (0, False)


# --------------------------------------------------------------------------- random ops the backward does not need


def _unneeded_noise(wrap: bool, policy: str) -> list[torch.Tensor]:
    """A region whose random ops the backward never reads: torch 2.9's RNG pass raised a KeyError on them."""
    torch._dynamo.reset()
    b = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))  # no grad: b * noise needs none
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)

    def block(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        noisy = b * torch.randn_like(b) + (torch.rand_like(b) > 0.5)
        return x.sin() + noisy + F.rrelu(b, training=True)

    def model(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(block, x, b, policy=policy) if wrap else block(x, b)

    torch.manual_seed(1)
    out = torch.compile(model, backend="aot_eager")(x, b)
    out.sum().backward()
    return [out.detach(), x.grad, torch.get_rng_state()]


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_random_ops_the_backward_does_not_need_run_as_in_the_plain_compile(policy: str) -> None:
    ref = _unneeded_noise(False, policy)
    for got, want in zip(_unneeded_noise(True, policy), ref, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def _written_statistics(wrap: bool) -> list[torch.Tensor]:
    """BatchNorm in training after a recomputed read of its input: torch >= 2.13 asks after the op, and
    its write to the running statistics (``running_mean_out``) was taken for a write to its input."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(8)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)

    def block(x: torch.Tensor) -> torch.Tensor:
        return x.sin() + bn(x)

    def model(x: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(block, x, policy="nothing_saveable") if wrap else block(x)

    out = torch.compile(model, backend="aot_eager")(x * 1.0)
    out.sum().backward()
    return [out.detach(), x.grad, bn.weight.grad, bn.running_mean, bn.running_var]


def test_a_functional_ops_out_write_is_to_its_argument_not_its_input() -> None:
    ref = _written_statistics(False)
    for got, want in zip(_written_statistics(True), ref, strict=True):
        torch.testing.assert_close(got, want)


# --------------------------------------------------------------------------- a region Dynamo gives up on


def _dead_draw(wrap: bool, compiled: bool) -> list[torch.Tensor]:
    """A dead random op, then a module whose hook appends to a list: inside torch's checkpoint that is a
    side effect Dynamo cannot trace (a graph break), so the region runs in the eager engine and draws as
    the uncompiled program does. torch's plain compile drops the dead draw (its graph's dead code):
    the fuzz compares such a region with the eager run (``check_compiled``'s "as eager")."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    lin = nn.Linear(8, 8)
    log: list[torch.Tensor] = []
    lin.register_forward_hook(lambda m, args, out: log.append(out.detach().sum()))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)

    def block(x: torch.Tensor) -> torch.Tensor:
        _ = x * (torch.rand_like(x) > 0.5)  # dead
        return lin(x)

    def model(x: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(block, x, policy="nothing_saveable") if wrap else block(x)

    fn = torch.compile(model, backend="aot_eager") if compiled else model
    torch.manual_seed(1)
    out = fn(x)
    out.sum().backward()
    return [out.detach(), x.grad, lin.weight.grad, *log, torch.get_rng_state()]


def test_a_region_dynamo_gives_up_on_draws_as_the_uncompiled_program() -> None:
    ref = _dead_draw(False, False)
    got = _dead_draw(True, True)
    assert len(got) == len(ref)
    for g, want in zip(got, ref, strict=True):
        torch.testing.assert_close(g, want, rtol=0, atol=0)


# --------------------------------------------------------------------------- a forward-only graph


def _no_grad_inputs(wrap: bool) -> list[torch.Tensor]:
    """Nothing the region returns needs a gradient: AOTAutograd traces a forward-only graph, which torch
    2.15 runs through its forward-loss-backward remat pass, refusing a random op marked for recompute."""
    torch._dynamo.reset()
    b = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))

    def block(b: torch.Tensor) -> torch.Tensor:
        return F.rrelu(F.dropout(b, 0.5, training=True), training=True).sin()

    def model(b: torch.Tensor) -> torch.Tensor:
        return xla_ckpt.checkpoint(block, b, policy="nothing_saveable") if wrap else block(b)

    torch.manual_seed(1)
    out = torch.compile(model, backend="aot_eager")(b)
    return [out, torch.get_rng_state()]


def test_random_ops_in_a_forward_only_graph_run_as_in_the_plain_compile() -> None:
    ref = _no_grad_inputs(False)
    for got, want in zip(_no_grad_inputs(True), ref, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
