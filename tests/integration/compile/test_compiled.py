"""Under torch.compile the same policies lower to torch's selective-checkpoint marks.

What the compiled graph saves is read from the partitioner itself: a spy around the min-cut
partition function sees the joint graph (with the policy's marks) and the backward graph, whose
placeholders minus the tangents are exactly what the forward keeps for backward.

Compiles are slow on this machine's two cores, so every compiled artifact is built once per module
(fixtures) and the per-policy tests use a backend built like torch_tpu's (AOTAutograd + the stock
min-cut partitioner, the graphs run as FX code: no code generation). Inductor itself compiles the
four GPT variants of the memory-order test.
"""

from __future__ import annotations

from helpers import ROOT_DIR

import collections
import functools
import warnings
from typing import Any

import pytest
import torch
from torch import nn

import xla_ckpt
from xla_ckpt import policies
from xla_ckpt._base import compat as _compat
from xla_ckpt._compile import lowering as _lowering
from xla_ckpt._policy.plan import plans
from xla_ckpt.models import GPT, GPTConfig

from helpers import assert_same, example_policy, loss_grads
from switches import liveness_off, lowered_regions

# CI's newest-torch tier runs this file's slow tests too: the compiled path changes most between torch versions.
pytestmark = pytest.mark.newest

aten = torch.ops.aten
CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32)
BATCH = 2
MUST_SAVE = torch.utils.checkpoint.CheckpointPolicy.MUST_SAVE
RECOMPUTES = (torch.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE, torch.utils.checkpoint.CheckpointPolicy.MUST_RECOMPUTE)
# Dynamo traces nn.Dropout(p=0.0) as aten.clone (torch 2.9 and 2.13); eager runs no op for it.
DROPOUT_CLONE = "Dropout"
# Compiled kernels (inductor) reassociate sums: gradients agree to fp32 rounding, not bit for bit.
INDUCTOR_TOL = {"rtol": 1e-4, "atol": 1e-5}


ALIASES = (aten.detach.default, aten.alias.default)  # the same value under another node
NAME_POLICIES = {"save_only_these_names", "save_any_names_but_these", "save_and_offload_only_these_names"}


class _Spy:
    """Wraps a partition function; keeps, per graph, the policy marks and what the forward saves."""

    def __init__(self, partition: Any) -> None:
        self.partition = partition
        self.graphs: list[dict[str, Any]] = []
        self.backward_marks: list[dict[str, Any]] = []

    def __call__(self, joint: torch.fx.GraphModule, joint_inputs: Any, **kw: Any) -> Any:
        # The marks as the policy left them (the partitioner adds boundary saves of its own).
        marks = {n.name: n.meta.get("recompute") for n in joint.graph.nodes}
        fw, bw = self.partition(joint, joint_inputs, **kw)
        # Values the partitioner itself promotes to saved: outputs of one region read by a later one
        # (torch's cleanup_recompute_tags; CSE can share the causal mask between blocks).
        boundary = {n.name for n in joint.graph.nodes if any(
            u.meta.get("ac_graph_id", -1) > n.meta.get("ac_graph_id", -1) >= 0 for u in n.users)}
        saved = [n for n in bw.graph.nodes if n.op == "placeholder" and "tangents" not in n.name]
        # Backward may save a detach() of a forward value (softmax's output): that is the value saved.
        nodes = {n.name: n for n in joint.graph.nodes}
        names = []
        for n in saved:
            src = nodes.get(n.name)
            while src is not None and src.target in ALIASES:
                src = src.args[0]
            names.append(src.name if src is not None else n.name)
        info = _joint_info(joint, kw["num_fwd_outputs"], marks, set(names))
        # The region each marked node belongs to (torch numbers regions; its partitioner compares them).
        region_ids = [n.meta.get("ac_graph_id") for n in joint.graph.nodes if marks.get(n.name) is not None]
        self.graphs.append({"marks": marks, "saved": names, "bw": bw, **info, "region_ids": region_ids,
                            "saved_bytes": sum(_nbytes(n) for n in saved), "boundary": boundary})
        return fw, bw


def _nbytes(n: torch.fx.Node) -> int:
    v = n.meta.get("val")
    return sum(t.numel() * t.element_size() for t in (v if isinstance(v, (tuple, list)) else [v])
               if isinstance(t, torch.Tensor))


def _joint_info(joint: torch.fx.GraphModule, num_fwd_outputs: int, marks: dict[str, Any], saved: set[str]) -> dict[str, Any]:
    """Per node: (op, shape) of the value, and whether backward reads it (through views)."""
    # Forward nodes: what the forward outputs are computed from; every other node is backward's.
    out = next(n for n in joint.graph.nodes if n.op == "output")
    forward: set[str] = set()
    todo = [a for a in out.args[0][:num_fwd_outputs] if isinstance(a, torch.fx.Node)]
    while todo:
        n = todo.pop()
        if n.name not in forward:
            forward.add(n.name)
            todo.extend(n.all_input_nodes)
    forward |= {name for name, m in marks.items() if m is not None}  # every op the regions ran (mean, rstd too)
    backward = {n.name for n in joint.graph.nodes if n.name not in forward and n.op != "output"}

    def value(n: torch.fx.Node) -> tuple[Any, tuple[int, ...]]:
        src = n.args[0] if n.target is __import__("operator").getitem else n
        op = getattr(src.target, "overloadpacket", src.target)
        v = n.meta.get("val")
        return op, tuple(v.shape) if isinstance(v, torch.Tensor) else ()

    # Backward needs a forward value if a backward node reads it, or if a value recomputed for
    # backward (marked recompute by the policy, and not saved after all) is computed from it.
    needed: set[str] = set()
    for n in reversed(list(joint.graph.nodes)):
        if n.name in backward:
            continue
        if any(u.name in backward or (u.name in needed and (u.target in ALIASES or (
                marks.get(u.name) in RECOMPUTES and u.name not in saved))) for u in n.users):
            needed.add(n.name)

    return {"value": {n.name: value(n) for n in joint.graph.nodes if n.op == "call_function"},
            "bw_reads": needed}


def _tpu_like_backend(spy: _Spy) -> Any:
    """A backend built like torch_tpu's: aot_autograd + min-cut partitioner; graphs run as FX code."""
    from torch._dynamo.backends.common import aot_autograd
    from functorch.compile import make_boxed_func

    def compiler(gm: torch.fx.GraphModule, _: Any) -> Any:
        return make_boxed_func(gm)

    def bw_compiler(gm: torch.fx.GraphModule, _: Any) -> Any:
        # What torch_tpu's mark_activation_checkpoints pass collects before inserting its barriers:
        # backward nodes marked for recompute, and the leaves of those chains.
        marked = [n for n in gm.graph.nodes if n.meta.get("recompute") in RECOMPUTES]
        leaves = [n for n in marked if not any(u in marked for u in n.users)]
        spy.backward_marks.append({"marked": [n.name for n in marked], "leaves": [n.name for n in leaves]})
        return make_boxed_func(gm)

    return aot_autograd(fw_compiler=compiler, bw_compiler=bw_compiler, partition_fn=spy)


def _gpt(policy: Any, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    model = GPT(CFG)
    if policy is not None:
        for block in model.layers:
            xla_ckpt.checkpointed(block, policy=policy)
    return model


def _batch() -> torch.Tensor:
    return torch.randint(0, CFG.vocab_size, (BATCH, CFG.seq_len), generator=torch.Generator().manual_seed(1))


def _grads(model: nn.Module, fn: Any) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    idx = _batch()
    return loss_grads(lambda: fn(idx, idx), list(model.parameters()))


class _Recording:
    """A policy that logs what the eager engine asks it (a wrapper, so the policy is unchanged)."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.log = policy, []

    def __call__(self, call: xla_ckpt.OpCall) -> xla_ckpt.Decision:
        d = self.policy(call)
        self.log.append((call.op.overloadpacket, call.module, call.tag, d))
        return d


def _eager(name: str) -> dict[str, Any]:
    rec = _Recording(example_policy(name))
    model = _gpt(rec)
    idx = _batch()
    # Every SAVE output the policy chose, before the eager engine's liveness drops the unread ones
    # (the partitioner's own dropping is checked above through bw_reads).
    with xla_ckpt.saved_activations() as report, liveness_off():
        loss = model(idx, idx)
    loss.backward()
    # What the regions kept by the policy's SAVE (named by op); not their inputs, not outside values.
    # (OFFLOAD values count too: under compile they are MUST_SAVE, kept on the device.)
    saved = [(e.grad_fn, e.shape) for e in report.entries
             if e.grad_fn.startswith("aten.") and e.kind in ("activation", "offloaded")]
    return {"decisions": rec.log, "saved": saved, "saved_bytes": report.nbytes}


@functools.cache
def _compiled_run(name: str) -> dict[str, Any]:
    torch._dynamo.reset()
    spy = _Spy(functools.partial(_min_cut(), compiler="inductor"))
    model = _gpt(example_policy(name))
    ref_model = _gpt(None)
    ref = _grads(ref_model, ref_model)
    with lowered_regions() as regions, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _grads(model, torch.compile(model, fullgraph=True, backend=_tpu_like_backend(spy)))
    n_blocks = CFG.n_layer
    decided = [d for r in regions[-n_blocks:] for d in r.decided]
    return {"spy": spy, "ref": ref, "got": got, "decided": decided}


def _min_cut() -> Any:
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return min_cut_rematerialization_partition


def _packet_name(op: Any) -> str:
    return str(getattr(op, "overloadpacket", op))


# Planning policies (memory_budget) are planned on the joint graph: tests/integration/compile/test_compiled_budget.py.
PER_OP = [n for n in policies.names() if not plans(example_policy(n))]
# The fast tier compiles one of each kind (dots, names, a combinator, offload, torch's policy); the two
# extremes are compiled in the fast tier by test_eager_block_keeps_no_more_than_the_compiled_partition and
# tests/integration/compile/test_compiled_hooks.py. `make test-all` compiles every per-op policy here. Each
# compile is about 5 s on 2 idle cores.
FAST_PER_OP = {"dots_saveable", "save_only_these_names", "any_of", "offload", "from_torch"}


def _tiered(names: list[str], fast: set[str]) -> list:
    return [n if n in fast else pytest.param(n, marks=pytest.mark.slow) for n in names]


@pytest.mark.parametrize("name", _tiered(PER_OP, FAST_PER_OP))
def test_compiled_saves_what_eager_saves(name: str) -> None:
    """One graph; the policy's decisions equal eager's; the partition saves exactly the SAVE outputs
    that backward reads; gradients equal the un-checkpointed model."""
    if name in NAME_POLICIES and not _compat.SAC_GIVES_OP_OUTPUT:
        pytest.skip(f"tags under compile need torch >= 2.13 (this is {torch.__version__}); see test_old_torch_says_so")
    run = _compiled_run(name)
    assert_same(run["ref"], run["got"])
    spy = run["spy"]
    assert len(spy.graphs) == 1, "the checkpointed GPT must compile to one graph"
    g = spy.graphs[0]
    # Every marked node carries its region's number, one per block (torch >= 2.13 hands it to the
    # context_fn's forward mode: our wrapper must pass it on, or the partitioner compares None).
    assert all(isinstance(i, int) for i in g["region_ids"]), set(map(type, g["region_ids"]))
    assert len(set(g["region_ids"])) == CFG.n_layer
    eager = _eager(name)

    # Decisions: the same ops, modules, tags and answers as the eager engine asked.
    compiled = [(d.call.op.overloadpacket, d.call.module, d.call.tag, d.decision) for d in run["decided"]
                if not (d.call.op.overloadpacket is aten.clone and d.call.module.endswith("drop"))]
    expected = eager["decisions"]
    if not _compat.SAC_GIVES_OP_OUTPUT:  # tags are invisible under compile before torch 2.13
        expected = [(op, module, None, d) for op, module, _, d in expected]
    assert compiled == expected

    # Saved: every value the partition keeps from inside the regions was marked MUST_SAVE by the
    # policy, and every MUST_SAVE value backward reads is kept (the others are dropped: a gain).
    # (On torch 2.9 a detach() torch SAC skips inherits the previous op's mark: an alias, not a value.)
    marked = [n for n, m in g["marks"].items() if m is MUST_SAVE and g["value"].get(n, (None, ()))[1] != ()
              and g["value"][n][0] is not aten.detach]
    assert not [n for n in g["saved"] if g["marks"].get(n) in RECOMPUTES and n not in g["boundary"]], \
        "a value the policy recomputes was saved"
    saved_marked = sorted(n for n in g["saved"] if g["marks"].get(n) is MUST_SAVE)
    assert saved_marked == sorted(n for n in marked if n in g["bw_reads"])
    # ... and the marked values are the eager engine's SAVE outputs, by op and shape. Two things of
    # torch's own differ: Dynamo's dropout clones (which eager never runs), and on torch 2.13 the
    # causal mask that AOTAutograd traces once for both blocks (fewer copies, never other values).
    marked_values = collections.Counter((_packet_name(g["value"][n][0]), g["value"][n][1]) for n in marked)
    dropout = collections.Counter(("aten.clone", tuple(d.call._sized_out.shape)) for d in run["decided"]
                                  if d.decision.keeps and d.call.op.overloadpacket is aten.clone
                                  and d.call.module.endswith("drop"))
    eager_saved = collections.Counter(eager["saved"])
    assert marked_values - dropout <= eager_saved
    assert set(marked_values - dropout) == set(eager_saved)


def _compiled_block_bytes(block: nn.Module, x: torch.Tensor) -> int:
    """Bytes the compiled partition keeps for backward on one block: its saved values, the block's
    parameters excepted (read in place by backward, as the eager engine reads them)."""
    torch._dynamo.reset()
    spy = _Spy(functools.partial(_min_cut(), compiler="inductor"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(block, fullgraph=True, backend=_tpu_like_backend(spy))(x).sum().backward()
    assert len(spy.graphs) == 1
    shapes = {tuple(p.shape) for p in block.parameters()}
    assert tuple(x.shape) not in shapes  # the block input is told from the parameters by its shape
    kept = 0
    for n in spy.graphs[0]["bw"].graph.nodes:
        v = n.meta.get("val")
        if n.op != "placeholder" or "tangents" in n.name or not isinstance(v, torch.Tensor):
            continue
        if not (n.name.startswith("primals") and tuple(v.shape) in shapes):
            kept += v.numel() * v.element_size()
    return kept


@pytest.mark.parametrize("name", _tiered(PER_OP, {"dots_saveable", "everything_saveable", "nothing_saveable"}))
def test_eager_block_keeps_no_more_than_the_compiled_partition(name: str) -> None:
    """The liveness target: per block, the eager engine keeps at most what torch's min-cut
    partitioner keeps for the same decisions (the region input included, host bytes of OFFLOAD
    included: under compile they stay on the device as MUST_SAVE).

    CPU only: the partitioner sees eager's ATen ops. On XLA the ops differ (torch_xla lowers
    layer_norm to native_batch_norm + addcmul, and autograd saves both), so there is no "same
    decisions"; tests/unit/_record/test_liveness.py bounds XLA by the un-checkpointed run instead.
    """
    if name in NAME_POLICIES and not _compat.SAC_GIVES_OP_OUTPUT:
        pytest.skip(f"tags under compile need torch >= 2.13 (this is {torch.__version__}): not the same decisions")
    from xla_ckpt.models import Block

    torch.manual_seed(0)
    block = Block(CFG)
    xla_ckpt.checkpointed(block, policy=example_policy(name))
    x = torch.randn(BATCH, CFG.seq_len, CFG.d_model, requires_grad=True)
    compiled = _compiled_block_bytes(block, x)
    with xla_ckpt.saved_activations() as report:
        y = block(x)
    kinds = report.by_kind()
    y.sum().backward()
    ours = kinds.get("activation", 0) + kinds.get("offloaded", 0)
    assert set(kinds) <= {"activation", "offloaded"}, kinds
    assert 0 < ours <= compiled, (ours, compiled)


def test_marks_reach_a_tpu_like_backend() -> None:
    """torch_tpu's backend (aot_autograd + min-cut) sees the recompute marks in its backward graph."""
    run = _compiled_run("dots_saveable")
    spy = run["spy"]
    marks = spy.graphs[0]["marks"]
    (bw,) = spy.backward_marks
    assert bw["leaves"], "no recompute chain reached the backward graph: nothing to fence"
    # Every recomputed node is one the policy marked recompute (as named in the joint graph).
    assert all(marks.get(n) in RECOMPUTES for n in bw["marked"] if n in marks)
    recomputed_ops = {str(n.target) for n in spy.graphs[0]["bw"].graph.nodes if n.name in bw["marked"]}
    assert "aten.native_layer_norm.default" in recomputed_ops  # dots_saveable recomputes the norms
    assert not any(op.startswith(("aten.addmm", "aten.bmm")) for op in recomputed_ops), recomputed_ops


@pytest.mark.skipif(_compat.SAC_GIVES_OP_OUTPUT, reason="torch >= 2.13 gives policies out and tags under compile")
def test_old_torch_says_so() -> None:
    """Before torch 2.13 the lowering warns (once per process) that out and tags are unavailable."""
    with pytest.warns(UserWarning, match=r"OpCall.out=None.*no xla_ckpt.tag names"):
        _lowering.warn_old_torch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _lowering.warn_old_torch()  # the second time: silent


def test_apply_names_match_eager() -> None:
    """apply() registers fully qualified names: compiled policies see the same ``layers.0.attn.qkv``."""
    seen: dict[str, list[str]] = {"eager": [], "compiled": []}
    mode = ["eager"]

    def by_module(call: xla_ckpt.OpCall) -> xla_ckpt.Decision:
        seen[mode[0]].append(call.module)
        return xla_ckpt.Decision.SAVE if call.module.endswith("mlp.up") else xla_ckpt.Decision.RECOMPUTE

    torch.manual_seed(0)
    model = GPT(CFG)
    xla_ckpt.apply(model, {"checkpoint": [{"classes": ["Block"], "policy": "dots_saveable"}]})
    for block in model.layers:  # the names apply() registered stay; the policy becomes the spy
        xla_ckpt.checkpointed(xla_ckpt.uncheckpointed(block), policy=by_module)
    idx = _batch()
    model(idx, idx).backward()
    mode[0] = "compiled"
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(model, fullgraph=True, backend="aot_eager")(idx, idx).backward()
    assert "layers.1.mlp.up" in seen["eager"]
    drop = {m for m in seen["compiled"] if m.endswith("drop")}  # Dynamo's dropout clones
    # Dynamo asks twice per op (its own trace and AOTAutograd's): the same names each time.
    assert set(seen["compiled"]) - drop == set(seen["eager"])


def test_checkpoint_called_directly_compiles() -> None:
    """``xla_ckpt.checkpoint(block, x)`` inside a compiled function: one graph, eager's names, equal grads."""
    from xla_ckpt.models import Block

    torch.manual_seed(0)
    block = Block(CFG)
    x = torch.randn(BATCH, CFG.seq_len, CFG.d_model, requires_grad=True)
    params = list(block.parameters())

    def f(x):
        return xla_ckpt.checkpoint(block, x, policy="dots_saveable").square().sum()

    ref = loss_grads(lambda: f(x), [x, *params])
    spy = _Spy(functools.partial(_min_cut(), compiler="inductor"))
    torch._dynamo.reset()
    with lowered_regions() as regions, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(f, fullgraph=True, backend=_tpu_like_backend(spy))
        got = loss_grads(lambda: compiled(x), [x, *params])
    assert_same(ref, got)
    assert len(spy.graphs) == 1
    modules = {d.call.module for d in regions[-1].decided}
    assert {"attn.qkv", "mlp.up", "ln1"} <= modules, modules


# --------------------------------------------------------------------------- inductor

VARIANTS = {"none": None, "dots": "dots.toml", "megatron_selective": "megatron_selective.toml", "full": "full.toml"}


class _InductorRuns(dict):
    """The GPT under each preset, compiled by inductor on first use (each compile generates and builds
    C++ kernels: tens of seconds), then kept for the module: what its partitioner saved."""

    def __missing__(self, name: str) -> dict[str, Any]:
        self[name] = _inductor_run(VARIANTS[name])
        return self[name]


@pytest.fixture(scope="module")
def inductor_runs() -> dict[str, dict[str, Any]]:
    return _InductorRuns()


def _inductor_run(preset: str | None) -> dict[str, Any]:
    import os

    import torch._inductor.compile_fx as compile_fx

    here = os.path.join(ROOT_DIR, "policies")
    original = compile_fx.min_cut_rematerialization_partition
    # A warm on-disk cache would skip the partitioner (and the spy): compile for real.
    no_cache = (torch._inductor.config.patch(fx_graph_cache=False),
                torch._functorch.config.patch(enable_autograd_cache=False))
    try:
        for patch in no_cache:
            patch.__enter__()
        torch._dynamo.reset()
        spy = _Spy(original)
        compile_fx.min_cut_rematerialization_partition = spy  # inductor looks it up per compile
        torch.manual_seed(0)
        model = GPT(CFG)
        if preset is not None:
            xla_ckpt.apply(model, os.path.join(here, preset))
        ref_model = GPT(CFG)
        ref_model.load_state_dict(model.state_dict())
        ref = _grads(ref_model, ref_model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _grads(model, torch.compile(model, fullgraph=True, backend="inductor"))
        return {"spy": spy, "ref": ref, "got": got}
    finally:
        compile_fx.min_cut_rematerialization_partition = original
        for patch in reversed(no_cache):
            patch.__exit__(None, None, None)


# Inductor generates and builds C++ kernels: a minute or more per preset on 2 cores, so all of it is
# `make test-all`. The fast tier compiles through Dynamo, AOTAutograd and the min-cut partitioner with
# the torch_tpu-like backend above (every FAST_PER_OP policy), where the marks and the partition are made.
@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
def test_inductor_one_graph_equal_gradients(inductor_runs: dict[str, Any], name: str) -> None:
    run = inductor_runs[name]
    assert len(run["spy"].graphs) == 1, "fullgraph compile must give one graph (tags included)"
    assert_same(run["ref"], run["got"], **INDUCTOR_TOL)


@pytest.mark.slow  # four inductor compiles
def test_inductor_retained_bytes_order(inductor_runs: dict[str, Any]) -> None:
    """What the compiled forward keeps for backward: none > dots > megatron_selective > full."""
    kept = {name: inductor_runs[name]["spy"].graphs[0]["saved_bytes"] for name in VARIANTS}
    assert kept["none"] > kept["dots"] > kept["megatron_selective"] > kept["full"], kept
