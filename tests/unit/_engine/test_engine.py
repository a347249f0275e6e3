"""The checkpoint engine: same gradients for every registered policy, and proof the policy acted."""

from __future__ import annotations

from helpers import PROBES_DIR

import json
import os
import subprocess
import sys

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import seed_all
from helpers import OpCounter, assert_same, example_policy, grads_of, torch_dots, torch_sac_context
from xla_ckpt import Decision, policies
from xla_ckpt._engine.xla_steps import XlaBackward
from xla_ckpt._record.opcall import OpCall
from xla_ckpt._record import replay_state as _replay_state
from xla_ckpt._hooks import saved as _saved
from xla_ckpt.models import Block, GPTConfig

aten = torch.ops.aten
PROBES = PROBES_DIR
B, D, H = 6, 8, 16
F32 = 4


POLICIES = policies.names()


def test_every_policy_is_exercised():
    for name in POLICIES:
        assert callable(example_policy(name)), name


class MLPStack(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(D, H), nn.GELU(), nn.Linear(H, D)) for _ in range(n))

    def forward(self, x, policy=None):
        for b in self.blocks:
            x = xla_ckpt.checkpoint(b, x, policy=policy) if policy is not None else b(x)
        return x


def _build(kind, device):
    torch.manual_seed(0)
    if kind == "block":
        return Block(GPTConfig(d_model=16, n_head=2, seq_len=4, dropout=0.2)).to(device)
    return MLPStack().to(device)


def _case(kind, device, policy):
    """(function under test, reference function, inputs, params) for one scenario."""
    model = _build("block" if kind == "block" else "mlp", device)
    params = list(model.parameters())
    g = torch.Generator().manual_seed(5)
    if kind == "block":
        x = torch.randn(2, 4, 16, generator=g).to(device).requires_grad_()
        return (lambda x: xla_ckpt.checkpoint(model, x, policy=policy)), model, [x], params
    x = torch.randn(B, D, generator=g).to(device)
    blk = model.blocks[0]
    if kind == "mlp":
        x.requires_grad_()
        return (lambda x: model(x, policy=policy)), model, [x], params
    if kind == "frozen_input":  # inputs need no grad, parameters do
        return (lambda x: model(x, policy=policy)), model, [x], params
    if kind == "kwargs":
        def f(x, *, scale, mode):
            return blk(x) * scale if mode == "scale" else blk(x)

        x.requires_grad_()
        return (lambda x: xla_ckpt.checkpoint(f, x, scale=0.5, mode="scale", policy=policy),
                lambda x: f(x, scale=0.5, mode="scale"), [x], params)
    if kind == "tuple":
        def structured(x):
            h = blk(x)
            return {"h": h, "pair": (F.gelu(h), h.sum())}

        x.requires_grad_()
        return (lambda x: xla_ckpt.checkpoint(structured, x, policy=policy)), structured, [x], params
    if kind == "nested":
        def inner(h):
            return model.blocks[1](h)

        def outer(x):
            h = blk(x)
            return xla_ckpt.checkpoint(inner, h, policy="nothing_saveable") + h

        x.requires_grad_()
        return (lambda x: xla_ckpt.checkpoint(outer, x, policy=policy)), outer, [x], params
    raise AssertionError(kind)


KINDS = ["mlp", "block", "kwargs", "tuple", "frozen_input", "nested"]


def _no_state_left():
    assert _saved.state.region is None and _saved.state.recompute is None and not _saved.state.ledgers
    assert torch._C._len_torch_dispatch_stack() == 0
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None


# Every (policy, kind) on CPU in the fast tier; on XLA (a compile per case) each policy once, with the
# kinds in turn, so every policy and every kind meets XLA there; the full grid on XLA in `make test-all`.
GRID = [pytest.param(name, kind, id=f"{name}-{kind}",
                     marks=() if kind == KINDS[i % len(KINDS)] else pytest.mark.slow_on_xla)
        for i, name in enumerate(POLICIES) for kind in KINDS]


@pytest.mark.parametrize("name, kind", GRID)
def test_gradients_equal(device, name, kind):
    fn, ref_fn, inputs, params = _case(kind, device, example_policy(name))

    def seeded(f):
        def run(*a):
            seed_all(device)
            return f(*a)

        return run

    ref = grads_of(seeded(ref_fn), inputs, params)
    got = grads_of(seeded(fn), inputs, params)
    assert_same(ref, got)
    _no_state_left()


def _mlp_kept(policy, device="cpu"):
    model = _build("mlp", device)
    x = torch.randn(B, D, device=device, requires_grad=True)
    with xla_ckpt.saved_activations() as report:
        y = model(x, policy=policy)
    return report, y


@pytest.mark.parametrize(
    "name, expected",
    [
        # Two blocks; block 1's input is block 0's output (one buffer). x: B*D, addmm1 out h: B*H.
        # A block's last addmm output is never read by its backward: dropped after forward.
        ("nothing_saveable", 2 * B * D),  # each block keeps its input only
        ("dots_saveable", 2 * B * D + 2 * B * H),  # + the first addmm's output of each block
        ("dots_with_no_batch_dims_saveable", 2 * B * D + 2 * B * H),
        ("recompute_ops", 2 * B * D + 2 * B * H),  # gelu (and mm, unused here) recomputed
        ("everything_saveable", 2 * B * D + 4 * B * H),  # + the GELU outputs: what autograd keeps
    ],
)
def test_exact_saved_bytes(device, name, expected):
    report, _ = _mlp_kept(example_policy(name), device)
    assert report.nbytes == F32 * expected, str(report)


def test_backward_op_counts():
    """Recompute reruns exactly the ops the policy did not save (counted by a dispatch mode)."""
    def backward_counts(policy):
        _, y = _mlp_kept(policy)
        with OpCounter() as c:
            y.sum().backward()
        return c

    base = backward_counts(None)
    # Only what backward reads is recomputed: a block's last addmm output is never read, so
    # full recompute reruns the first addmm and the gelu of each block (not the last addmm).
    for name, extra_addmm, extra_gelu in [
        ("everything_saveable", 0, 0),
        ("dots_saveable", 0, 2),
        ("nothing_saveable", 2, 2),
        ("save_only_these_names", 2, 2),  # no tags in this model: like nothing_saveable
    ]:
        c = backward_counts(example_policy(name))
        assert c.count(aten.addmm) - base.count(aten.addmm) == extra_addmm, name
        assert c.count(aten.gelu) - base.count(aten.gelu) == extra_gelu, name


def test_tags_drive_name_policies(device):
    model = _build("block", device)
    x = torch.randn(2, 4, 16, device=device, requires_grad=True)
    with xla_ckpt.saved_activations() as report:
        xla_ckpt.checkpoint(model, x, policy=policies.save_only_these_names("qkv", "mlp_up"))
    random = [e for e in report.entries if e.grad_fn == "aten.bernoulli"]
    kept = {e.tag: e.nbytes for e in report.entries if e.grad_fn != "region input" and e not in random}
    assert kept == {"qkv": F32 * 2 * 4 * 48, "mlp_up": F32 * 2 * 4 * 64}
    # The policy decides the same on XLA as on CPU: the three dropout masks of this block (dropout 0.2)
    # are redrawn in backward on both (the forward's seed makes the XLA redraw exact).
    assert sum(e.nbytes for e in random) == 0
    assert report.nbytes == F32 * (2 * 4 * 16 + 2 * 4 * 48 + 2 * 4 * 64)


def test_name_policy_on_an_untagged_region_says_so(monkeypatch):
    """A name policy where no op is tagged (an untagged model, such as Hugging Face's) keeps nothing
    by name: one warning per function and policy, naming both; none when a tag exists or for op policies."""

    model = _build("mlp", "cpu")  # no tags
    x = torch.randn(B, D, requires_grad=True)
    for pol in (policies.save_only_these_names("qkv"), policies.offload(policies.any_of(
            "dots_saveable", policies.save_and_offload_only_these_names(names_which_can_be_saved=["qkv"])))):
        with pytest.warns(UserWarning, match=r"selects values by tag name, but no op of this region was tagged") as w:
            xla_ckpt.checkpoint(model, x, policy=pol).sum().backward()
        assert len(w) == 1 and repr(pol) in str(w[0].message) and "'MLPStack" in str(w[0].message), str(w[0].message)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per function and policy
            xla_ckpt.checkpoint(model, x, policy=pol).sum().backward()
    blk = _build("block", "cpu")  # tags qkv and mlp_up
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xla_ckpt.checkpoint(blk, torch.randn(2, 4, 16, requires_grad=True),
                            policy=policies.save_only_these_names("qkv")).sum().backward()
        xla_ckpt.checkpoint(model, x, policy="dots_saveable").sum().backward()


def test_peer_torch_sac_bytes():
    """Same decisions as torch SAC: our ledger equals what torch's checkpoint keeps (measured publicly)."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    model = _build("mlp", "cpu")
    x = torch.randn(B, D, requires_grad=True)
    cached: list[torch.Tensor] = []
    h, inputs = x, []
    for blk in model.blocks:
        inputs.append(h)  # torch's checkpoint keeps each block's inputs for the recompute
        h = torch_checkpoint(blk, h, use_reentrant=False, context_fn=torch_sac_context(torch_dots, cached))
    assert cached, "torch SAC saved nothing: the peer check would be vacuous"
    kept = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in inputs + cached}
    report, _ = _mlp_kept(policies.from_torch(torch_dots))
    # torch SAC keeps every saved output; we drop those backward never reads (each block's last
    # addmm output, B*D floats; block 0's is block 1's input, kept as such): same decisions, less kept.
    unread = B * D * F32
    assert report.nbytes == sum(kept.values()) - unread
    h.sum().backward()  # and torch's own recompute still runs with the observer in its context


def test_in_place_inside_fn(device):
    blk = _build("mlp", device).blocks[0]

    def f(x):
        h = blk[0](x)
        h.relu_()  # mutates the saved addmm output: the engine replays it instead
        return blk[2](h)

    x = torch.randn(B, D, device=device, requires_grad=True)
    params = list(blk.parameters())
    ref = grads_of(f, [x], params)
    got = grads_of(lambda x: xla_ckpt.checkpoint(f, x, policy="dots_saveable"), [x], params)
    assert_same(ref, got)


def test_saved_output_mutated_later_is_an_error():
    blk = _build("mlp", "cpu").blocks[0]
    x = torch.randn(B, D, requires_grad=True)

    def f(x):
        h = blk[0](x)
        return h, blk[2](F.gelu(h))

    h, y = xla_ckpt.checkpoint(f, x, policy="dots_saveable")
    with torch.no_grad():
        h.mul_(2)  # the caller changes a tensor the policy saved
    with pytest.raises(xla_ckpt.CheckpointError, match=r"aten\.addmm.*modified in place"):
        y.sum().backward()
    _no_state_left()


def test_recompute_mismatch_is_an_error():
    blk = _build("mlp", "cpu").blocks[0]
    calls = []

    def f(x):
        calls.append(1)
        h = blk(x)
        return h.tanh() if len(calls) == 1 else h.sigmoid()

    x = torch.randn(B, D, requires_grad=True)
    y = xla_ckpt.checkpoint(f, x, policy="dots_saveable")
    with pytest.raises(xla_ckpt.CheckpointError, match=r"forward ran aten\.tanh.*recompute ran aten\.sigmoid"):
        y.sum().backward()
    _no_state_left()


def test_recompute_graph_is_freed():
    """Ops that save their own output (softmax, exp) must not make the recompute graph leak."""
    import gc
    import weakref

    lin = nn.Linear(D, D)
    refs = []

    def f(x):
        y = torch.softmax(lin(x), -1).exp()
        refs.append(weakref.ref(y))  # one per forward and one per recompute
        return y

    for _ in range(3):
        x = torch.randn(B, D, requires_grad=True)
        xla_ckpt.checkpoint(f, x, policy="nothing_saveable").sum().backward()
    gc.collect()
    assert len(refs) == 6 and all(r() is None for r in refs), [r() is None for r in refs]


def test_backward_twice_is_a_clear_error():
    _, y = _mlp_kept(policies.dots_saveable)
    y.sum().backward(retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_retain_graph_allows_second_backward():
    model = _build("mlp", "cpu")
    x = torch.randn(B, D, requires_grad=True)
    y = model(x, policy="nothing_saveable")
    y.sum().backward(retain_graph=True)
    first = x.grad.clone()
    y.sum().backward()
    torch.testing.assert_close(x.grad, 2 * first)


def test_no_grad_runs_plainly():
    model = _build("mlp", "cpu")
    with torch.no_grad(), OpCounter() as c:
        y = model(torch.randn(B, D), policy="nothing_saveable")
    assert y.grad_fn is None and c.count(aten.addmm) == 4


def test_unknown_policy_lists_names():
    with pytest.raises(ValueError, match="nor a policy \\(.*dots_saveable.*nothing_saveable.*Did you mean .dots_saveable."):
        xla_ckpt.checkpoint(nn.Identity(), torch.randn(2, requires_grad=True), policy="dots_saveabel")
    _no_state_left()


def test_policy_returning_non_decision():
    blk = _build("mlp", "cpu").blocks[0]
    with pytest.raises(TypeError, match=r"returned 'save' for aten\..* in module '0'"):
        xla_ckpt.checkpoint(blk, torch.randn(B, D, requires_grad=True), policy=lambda call: "save")
    _no_state_left()


def test_opcall_fields():
    seen = []

    def spy(call):
        seen.append(call)
        return Decision.RECOMPUTE

    blk = _build("mlp", "cpu").blocks[0]
    xla_ckpt.checkpoint(blk, torch.randn(B, D, requires_grad=True), policy=spy)
    addmm = [c for c in seen if c.op is aten.addmm.default]
    assert [c.module for c in addmm] == ["0", "2"]
    assert addmm[0].flops == 2 * B * D * H and addmm[0].nbytes == F32 * B * H
    gelu = next(c for c in seen if c.op.overloadpacket is aten.gelu)
    assert gelu.flops == 0 and gelu.module == "1" and gelu.tag is None


def test_packet_matches_all_overloads():
    p = policies.save_ops(aten.add)
    call = OpCall(aten.add.Tensor, (), {}, None)
    assert p(call) is Decision.SAVE
    with pytest.raises(TypeError, match="not by string"):
        policies.save_ops("aten.mm")


@pytest.mark.xla
def test_fence_is_exact_and_cheap(xla_device, monkeypatch):
    """Fenced and unfenced recomputation give bitwise-equal gradients; the fence costs < 1% FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).to(xla_device)
        x = torch.randn(32, 64).to(xla_device).requires_grad_()
        return grads_of(lambda x: xla_ckpt.checkpoint(model, x, policy="dots_saveable"), [x],
                        list(model.parameters()))

    elements = []
    original = _replay_state.Fence.apply
    monkeypatch.setattr(_replay_state.Fence, "apply", lambda self, t: (elements.append(t.numel()), original(self, t))[1])
    with FlopCounterMode(display=False) as counter:
        fenced = run()
    # One elementwise add per fenced element, against the step's matmul FLOPs.
    assert 0 < sum(elements) <= 0.01 * counter.get_total_flops(), (sum(elements), counter.get_total_flops())
    monkeypatch.setattr(XlaBackward, "capture_grad", lambda self, g: None)  # no gradient: no fence
    unfenced = run()
    for a, b in zip(fenced[0] + fenced[1], unfenced[0] + unfenced[1], strict=True):
        assert torch.equal(a.cpu(), b.cpu())


MLP_PROBE = ("--blocks", "4", "--d", "64", "--h", "256", "--batch", "8192", "--no-bias")
GPT_PROBE = ("--gpt", "--blocks", "4", "--d", "128", "--h", "128", "--batch", "8")


def _probe(variant, tmp_path, args=MLP_PROBE):
    out = subprocess.run(
        # MLP_PROBE: activations dominate, bias-free Linear 64->256->64, batch 8192 (params 0.5 MiB).
        [sys.executable, os.path.join(PROBES, "xla_peak_probe.py"), variant, str(tmp_path / variant), *args],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # subprocess probes (tests/probes/xla_peak_probe.py), one per variant
@pytest.mark.xla
def test_compiled_peak_on_xla_cpu(xla_device, tmp_path):
    """One graph for forward+backward, default XLA_FLAGS: the recomputation survives the compiler."""
    r = {v: _probe(v, tmp_path) for v in ["none", "torch_xla", "nothing_saveable", "dots_saveable"]}
    for v in r:
        torch.testing.assert_close(torch.tensor(r[v]["grads"]), torch.tensor(r["none"]["grads"]))
    none = r["none"]["peak"]
    assert r["nothing_saveable"]["peak"] <= 0.6 * none, r
    assert r["dots_saveable"]["peak"] <= 0.75 * none, r
    assert r["nothing_saveable"]["dots"] > r["none"]["dots"]  # recomputed matmuls kept
    assert r["dots_saveable"]["dots"] == r["none"]["dots"]  # saved matmuls not recomputed
    for ours in ("nothing_saveable", "dots_saveable"):
        assert r[ours]["peak"] < r["torch_xla"]["peak"], r


@pytest.mark.slow  # subprocess probes (tests/probes/xla_peak_probe.py), one per variant
@pytest.mark.xla
def test_compiled_peak_gpt_blocks(xla_device, tmp_path):
    """Attention blocks (softmax saves its output): recompute must lower the peak here too.

    Regression: when recompute graphs leaked, their tensors became outputs of the step graph and
    nothing_saveable compiled to more than twice the no-checkpointing peak.
    """
    r = {v: _probe(v, tmp_path, GPT_PROBE)
         for v in ["none", "torch_xla", "nothing_saveable", "dots_with_no_batch_dims_saveable"]}
    for v in r:
        torch.testing.assert_close(torch.tensor(r[v]["grads"]), torch.tensor(r["none"]["grads"]))
    none = r["none"]["peak"]
    assert r["nothing_saveable"]["peak"] <= 0.6 * none, r
    assert r["dots_with_no_batch_dims_saveable"]["peak"] <= 0.75 * none, r
    for ours in ("nothing_saveable", "dots_with_no_batch_dims_saveable"):
        assert r[ours]["peak"] < r["torch_xla"]["peak"], r


@pytest.mark.slow  # subprocess probes (tests/probes/xla_peak_probe.py)
@pytest.mark.xla
@pytest.mark.parametrize("policy", ["everything_saveable", "dots_with_no_batch_dims_saveable"])
def test_direct_replay_compiles_to_the_general_replays_peak(xla_device, tmp_path, policy):
    """The recorded program (``_engine.direct``) fences what it hands to backward as the general replay
    does: the same compiled peak. Regression: saved values handed out unfenced let XLA schedule
    their uses before the gradient (memory_budget(0.9) on the default GPT: 228 MiB against 196)."""
    direct = _probe(policy, tmp_path / "direct", GPT_PROBE)
    general = _probe(policy, tmp_path / "general", GPT_PROBE + ("--general-replay",))
    torch.testing.assert_close(torch.tensor(direct["grads"]), torch.tensor(general["grads"]))
    assert direct["peak"] == general["peak"], (direct["peak"], general["peak"])


def test_einsum_is_swapped_only_inside_regions_and_always_put_back(xla_device):
    """On XLA a region runs torch.einsum as its composite (a policy sees the bmm); outside, and after
    an exception, torch.einsum is torch's own again."""
    original = torch.einsum
    seen = []

    def fn(a, b):
        seen.append(torch.einsum is original)
        return torch.einsum("bij,bjk->bik", a, b).sin()

    a = torch.randn(2, 3, 4).to(xla_device).requires_grad_()
    b = torch.randn(2, 4, 5).to(xla_device)
    with OpCounter() as ops:
        xla_ckpt.checkpoint(fn, a, b, policy="dots_saveable").sum().backward()
    # The forward (and the general replay, where it runs fn again) saw the composite's bmm.
    assert seen and not any(seen) and ops.count(aten.bmm) >= 1
    assert torch.einsum is original and torch.functional.einsum is original

    def bad(a, b):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        xla_ckpt.checkpoint(bad, a, b)
    assert torch.einsum is original and torch.functional.einsum is original

    # A caller's own einsum (another library's patch) is what the region falls back to, and is put back.
    calls = []

    def theirs(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    def cpu_einsum(a, b):
        return a + torch.einsum("ij,jk->ik", torch.ones(2, 2), torch.ones(2, 2)).sum().to(a.device)

    try:
        torch.einsum = torch.functional.einsum = theirs
        xla_ckpt.checkpoint(cpu_einsum, a, b).sum().backward()
        assert torch.einsum is theirs and torch.functional.einsum is theirs and "ij,jk->ik" in calls
    finally:
        torch.einsum = torch.functional.einsum = original
