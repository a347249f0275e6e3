"""Wrapper tensor subclasses (DTensor, torchao's NF4 and float8 tensors) through a region, on eager.

A wrapper subclass holds no memory of its own (``_make_wrapper_subclass``): its storage's
``data_ptr()`` raises. Before this, any region (and ``saved_activations()`` even without one) that saw
one raised that error; a region input backward never read came back as a plain tensor in the replay
(fn's ``isinstance(x, DTensor)`` took the other branch: a false ``CheckpointError``); a wrapper built in
Python inside the region (``DTensor.from_local(h)``) counted as an outside tensor, so the ops making
its inner tensors were not replayed (a false ``CheckpointError`` from the outside-value check).

``Pair`` of tests/wrapper_tensor.py stands for them (the fuzz draws it too: ``fuzz_user_kinds``); DTensor
itself runs on one rank (gloo, world size 1) under torch's tensor-parallel plans.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from wrapper_tensor import Pair, from_pair, parts, to_pair

POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable", xla_ckpt.policies.memory_budget(0.5)]


def _leaves(ts: list[Any]) -> list[Any]:
    return [x for t in ts for x in parts(t)]


def _run(fn: Callable[..., torch.Tensor], make: Callable[[], list[torch.Tensor]], policy: Any) -> tuple[list, Any]:
    """Outputs and grads (each wrapped tensor's parts), and what was kept, of ``fn`` plain or checkpointed."""
    inputs = make()
    with xla_ckpt.saved_activations() as kept:
        y = fn(*inputs) if policy is None else xla_ckpt.checkpoint(fn, *inputs, policy=policy)
        (y * y).sum().backward()
    grads = [t.grad for t in inputs]
    assert all(g is not None for g in grads), "a None grad"
    return _leaves([y.detach()] + grads), kept


def _same(ref: list, got: list) -> None:
    assert len(ref) == len(got)
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"tensor {i}: {m}")


def _inputs(x_pair: bool, w_pair: bool) -> Callable[[], list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    a, b, w, v = (torch.randn(4, 8, generator=gen), torch.randn(4, 8, generator=gen),
                  torch.randn(8, 8, generator=gen), torch.randn(8, 8, generator=gen))

    def make() -> list[torch.Tensor]:
        x = Pair(a.clone(), b.clone()) if x_pair else a.clone()
        weight = Pair(w.clone(), v.clone()) if w_pair else w.clone()
        return [x.requires_grad_(), weight.requires_grad_()]

    return make


def _tanh(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ w).sin()


def _views_inplace(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = (x @ w).t().contiguous().t()
    side = h[:, 2:6].relu()
    h = h * 1.0
    h[:, :2].mul_(2.0)
    return torch.cat([h, side.exp()], -1).softmax(-1)


def _norm_gelu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.layer_norm(x @ w, (8,))) @ w


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize("fn", [_tanh, _views_inplace, _norm_gelu], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("x_pair,w_pair", [(True, False), (False, True), (True, True)], ids=["x", "w", "both"])
def test_wrapper_inputs_and_weights(fn, policy, x_pair, w_pair):
    make = _inputs(x_pair, w_pair)
    ref, ref_kept = _run(fn, make, None)
    got, got_kept = _run(fn, make, policy)
    _same(ref, got)
    if isinstance(policy, str):  # per-op policies decide on wrappers as on plain tensors: the same buffers kept
        plain = _run(fn, _inputs(False, False), policy)[1]  # (a byte budget may not: a wrapper's bytes are its parts')
        assert [(e.shape, e.grad_fn) for e in got_kept.entries] == [(e.shape, e.grad_fn) for e in plain.entries]
    if policy == "nothing_saveable":
        assert got_kept.nbytes < ref_kept.nbytes  # the region keeps its inputs only


def test_saved_bytes_count_the_wrapped_tensors():
    """A wrapper's bytes are its parts' (a Pair of two 4x8 float32 tensors: 256), parameters excluded."""
    x = Pair(torch.randn(4, 8), torch.randn(4, 8)).requires_grad_()
    w = torch.randn(8, 8).requires_grad_()
    with xla_ckpt.saved_activations() as kept:
        xla_ckpt.checkpoint(_tanh, x, w, policy="nothing_saveable")
    assert kept.nbytes == 2 * 4 * 8 * 4 + 8 * 8 * 4  # the region keeps its inputs only


def test_unread_input_is_rebuilt_as_its_type():
    """everything_saveable: backward reads nothing of x, yet fn's replay branches on its type."""
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x * 1.5 if isinstance(x, Pair) else F.layer_norm(x, (8,))
        return torch.tanh(h @ w)

    make = _inputs(True, False)
    _same(_run(fn, make, None)[0], _run(fn, make, "everything_saveable")[0])


def _built_inside(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A wrapper made by a constructor (no op) from region values, and unwrapped again."""
    p = to_pair(torch.tanh(x @ w))
    q = torch.sigmoid(p) * p + p.sin()
    return from_pair(q) @ w


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_wrapper_built_inside_the_region(policy):
    make = _inputs(False, False)
    ref, ref_kept = _run(_built_inside, make, None)
    got, got_kept = _run(_built_inside, make, policy)
    _same(ref, got)
    assert got_kept.nbytes <= ref_kept.nbytes
    if policy == "nothing_saveable":
        assert got_kept.nbytes < ref_kept.nbytes


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_wrapper_of_a_region_value_and_a_parameter(policy):
    """Partly outside (a parameter wrapped with a region value): checked by value, still exact."""
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x @ w)
        p = Pair(h, w[:4] * 1.0)  # no grad through the constructor: through h's use below
        return (torch.sigmoid(p).a + h).exp()

    make = _inputs(False, False)
    _same(_run(fn, make, None)[0], _run(fn, make, policy)[0])


# -- DTensor on one rank --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mesh():
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    from torch.distributed.device_mesh import init_device_mesh

    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    if started:
        dist.destroy_process_group()


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if not isinstance(h, torch.Tensor) or type(h) is torch.Tensor:
            h = F.gelu(h)
        else:  # a DTensor activation (use_local_output=False): computed locally, as TP code does
            from torch.distributed.tensor import DTensor

            h = DTensor.from_local(F.gelu(h.to_local()), h.device_mesh, h.placements)
        return x + self.down(h)


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize("local_output", [True, False], ids=["local", "dtensor"])
def test_dtensor_tensor_parallel_mlp(mesh, policy, local_output):
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    def run(pol: Any) -> tuple[list, int]:
        torch.manual_seed(0)
        m = parallelize_module(_MLP(), mesh, {"up": ColwiseParallel(use_local_output=local_output),
                                              "down": RowwiseParallel(use_local_output=local_output)})
        if pol is not None:
            xla_ckpt.checkpointed(m, policy=pol)
        x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1), requires_grad=True)
        with xla_ckpt.saved_activations() as kept:
            y = m(x if local_output else DTensor.from_local(x, mesh, [Replicate()]))
            y = y.full_tensor() if isinstance(y, DTensor) else y
            (y * y).sum().backward()
        grads = [x.grad] + [p.grad for p in m.parameters()]
        assert all(g is not None for g in grads), "a None grad"
        return [y.detach()] + [g.full_tensor() if isinstance(g, DTensor) else g for g in grads], kept.nbytes

    ref, ref_bytes = run(None)
    got, got_bytes = run(policy)
    _same(ref, got)
    assert got_bytes <= ref_bytes
    if policy == "nothing_saveable":
        assert got_bytes < ref_bytes


# -- torchao's NF4 weights (QLoRA) ----------------------------------------------------------------

def test_qlora_over_torchao_nf4_weights():
    """A frozen NF4 base weight (torchao) plus LoRA adapters: the plain run with the ledger open failed
    before, and so did every policy. The newest-torch tier installs torchao (the ``ao`` extra)."""
    nf4 = pytest.importorskip("torchao.quantization.quantize_.workflows.nf4.nf4_tensor",
                              reason="torchao (the ao extra, newest-torch venv only)")
    base = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))

    class QLoRA(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(nf4.to_nf4(base.clone(), 64, 64), requires_grad=False)
            self.a = nn.Parameter(0.1 * torch.randn(4, 64, generator=torch.Generator().manual_seed(1)))
            self.b = nn.Parameter(0.1 * torch.randn(64, 4, generator=torch.Generator().manual_seed(2)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = nf4.linear_nf4(x, self.w) + F.linear(F.linear(x, self.a), self.b)
            return F.gelu(h) * torch.sigmoid(h)

    def run(policy: Any) -> tuple[list, int]:
        m = QLoRA()
        x = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(3), requires_grad=True)
        with xla_ckpt.saved_activations() as kept:
            y = m(x) if policy is None else xla_ckpt.checkpoint(m, x, policy=policy)
            y.pow(2).sum().backward()
        grads = [x.grad, m.a.grad, m.b.grad]
        assert all(g is not None for g in grads) and m.w.grad is None
        return [y.detach()] + grads, kept.nbytes

    ref, ref_bytes = run(None)
    for policy in POLICIES:
        got, got_bytes = run(policy)
        _same(ref, got)
        assert got_bytes <= ref_bytes, policy
    assert run("nothing_saveable")[1] < ref_bytes
