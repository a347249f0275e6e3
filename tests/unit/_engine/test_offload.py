"""Decision.OFFLOAD: equal gradients, exact bytes moved off the device, the mechanism per device.

CPU eager runs the stand-in host tier (the CUDA bookkeeping without streams): the forward's buffer
is released, a separate copy is held, a new buffer comes back for backward. XLA:CPU keeps offloaded
values on the device (it cannot compile the placement annotation); the annotations are checked in
the lowered HLO instead. CUDA tests are marked and skip without a GPU.
"""

from __future__ import annotations

import gc
import re
import warnings

import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef

import xla_ckpt
from helpers import assert_same, grads_of, seed_all
from xla_ckpt import Decision, policies
from xla_ckpt._engine import offload as _offload
from xla_ckpt._engine import recompute as _recompute
from xla_ckpt.models import Block, GPTConfig

aten = torch.ops.aten
SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE
B, T, C, NH = 2, 8, 16, 2
F32 = 4
# What dots_saveable keeps of this block (backward reads them), in bytes: qkv addmm (B*T x 3C), the
# two attention bmms (B*NH x T x T and B*NH x T x C/NH), the attention projection addmm (B*T x C) and
# the MLP up addmm (B*T x 4C). The MLP down addmm only feeds the residual add: never read, dropped.
DOTS_KEPT = F32 * (B * T * 3 * C + B * NH * T * T + B * T * C + B * T * C + B * T * 4 * C)
BLOCK_INPUT = F32 * B * T * C

OFFLOAD_POLICIES = {
    "offload(dots)": policies.offload("dots_saveable"),
    "offload(everything)": policies.offload("everything_saveable"),
    "names": policies.save_and_offload_only_these_names(names_which_can_be_saved=["qkv"],
                                                        names_which_can_be_offloaded=["mlp_up", "attn_out"]),
    "any_of": policies.any_of(policies.offload("dots_saveable"), policies.save_ops(aten.gelu)),
}


def _block(device, dropout=0.1):
    torch.manual_seed(0)
    return Block(GPTConfig(d_model=C, n_head=NH, seq_len=T, dropout=dropout)).to(device)


def _input(device):
    return torch.randn(B, T, C, generator=torch.Generator().manual_seed(3)).to(device).requires_grad_()


def _seeded(fn, device):
    def run(*a):
        seed_all(device)
        return fn(*a)

    return run


def _grads(device, policy, dropout=0.1):
    blk = _block(device, dropout)
    x = _input(device)
    params = list(blk.parameters())
    fn = blk if policy is None else (lambda x: xla_ckpt.checkpoint(blk, x, policy=policy))
    return grads_of(_seeded(fn, device), [x], params)


# -------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", list(OFFLOAD_POLICIES))
def test_gpt_block_gradients_equal_cpu(name):
    assert_same(_grads(torch.device("cpu"), None), _grads(torch.device("cpu"), OFFLOAD_POLICIES[name]))


@pytest.mark.xla
def test_gpt_block_gradients_equal_xla(xla_device, monkeypatch):
    """XLA:CPU: offloaded values stay on the device (said once), gradients equal, nothing reported as moved."""
    ref = _grads(xla_device, None, dropout=0.0)
    with pytest.warns(UserWarning, match="XLA:CPU"):
        got = _grads(xla_device, policies.offload("dots_saveable"), dropout=0.0)
    assert_same(ref, got)
    blk, x = _block(xla_device, 0.0), _input(xla_device)
    with xla_ckpt.saved_activations() as report:
        xla_ckpt.checkpoint(blk, x, policy=policies.offload("dots_saveable"))
    assert (report.nbytes, report.host_nbytes) == (BLOCK_INPUT + DOTS_KEPT, 0), str(report)


# -------------------------------------------------------------------------- bytes and release


def test_offloaded_bytes_are_exact_cpu():
    """Everything dots_saveable keeps moves to the host tier; only the block input stays on the device."""
    cpu = torch.device("cpu")
    with xla_ckpt.saved_activations() as saved:
        xla_ckpt.checkpoint(_block(cpu, 0.0), _input(cpu), policy="dots_saveable")
    with xla_ckpt.saved_activations() as moved:
        xla_ckpt.checkpoint(_block(cpu, 0.0), _input(cpu), policy=policies.offload("dots_saveable"))
    assert (saved.nbytes, saved.host_nbytes) == (BLOCK_INPUT + DOTS_KEPT, 0)
    assert (moved.nbytes, moved.host_nbytes) == (BLOCK_INPUT, DOTS_KEPT), str(moved)
    key = lambda e: (e.grad_fn, e.shape, e.nbytes, e.tag or "", e.module)  # noqa: E731
    assert sorted(map(key, (e for e in moved.entries if e.kind == "offloaded"))) == sorted(
        map(key, (e for e in saved.entries if e.grad_fn != "region input")))
    assert moved.by_kind() == {"activation": BLOCK_INPUT, "offloaded": DOTS_KEPT}


def test_names_policy_splits_device_and_host_bytes():
    cpu = torch.device("cpu")
    with xla_ckpt.saved_activations() as report:
        xla_ckpt.checkpoint(_block(cpu, 0.0), _input(cpu), policy=OFFLOAD_POLICIES["names"])
    kept = {(e.tag, e.kind): e.nbytes for e in report.entries if e.grad_fn != "region input"}
    assert kept == {("qkv", "activation"): F32 * B * T * 3 * C, ("mlp_up", "offloaded"): F32 * B * T * 4 * C,
                    ("attn_out", "offloaded"): F32 * B * NH * T * (C // NH)}


class _Watch:
    """Wraps a policy; keeps a weak reference to the storage of every output it answered OFFLOAD / SAVE for."""

    def __init__(self, policy):
        self.policy, self.refs = policy, []

    def __call__(self, call):
        d = self.policy(call)
        if d.keeps:
            self.refs.append(StorageWeakRef(call.out.untyped_storage()))
        return d


@pytest.mark.parametrize("policy, released", [(policies.offload("dots_saveable"), True), ("dots_saveable", False)])
def test_forward_buffers_are_released(policy, released):
    """After forward no offloaded forward buffer is alive (the host tier holds its own copies); SAVE keeps them."""
    cpu = torch.device("cpu")
    watch = _Watch(policies.resolve(policy))
    blk, x = _block(cpu, 0.0), _input(cpu)
    y = xla_ckpt.checkpoint(blk, x, policy=watch)
    gc.collect()
    alive = sum(not r.expired() for r in watch.refs)
    assert alive == (0 if released else 5), alive  # dots_saveable keeps five matmul outputs (DOTS_KEPT)
    y.sum().backward()


def test_the_value_must_come_back(monkeypatch):
    """Break the way back once: the comparison fails (the gradients do read the host copy)."""
    cpu = torch.device("cpu")
    policy = policies.offload("dots_saveable")
    ref = _grads(cpu, None)
    assert_same(ref, _grads(cpu, policy))
    monkeypatch.setattr(_offload._StandIn, "back", lambda self, host, device: (torch.zeros_like(host), None))
    with pytest.raises(AssertionError):
        assert_same(ref, _grads(cpu, policy))


def test_second_backward_fetches_again():
    """retain_graph: the replay took the device copy; the host copy brings it back a second time."""
    cpu = torch.device("cpu")
    blk, x = _block(cpu, dropout=0.0), _input(cpu)
    y = xla_ckpt.checkpoint(blk, x, policy=policies.offload("dots_saveable"))
    (g1,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
    (g2,) = torch.autograd.grad(y.sum(), x)
    (ref,) = torch.autograd.grad(blk(x).sum(), x)
    torch.testing.assert_close(g1, ref)
    torch.testing.assert_close(g2, ref)


def test_prefetch_runs_one_region_ahead(monkeypatch):
    """When a region's replay starts, its copies and the previous region's come back; the next replay waits on none."""
    log = []
    back, recompute = _offload._StandIn.back, _recompute.recompute

    def logged_back(self, host, device):
        log.append("back")
        return back(self, host, device)

    def logged_recompute(state):
        log.append("replay")
        return recompute(state)

    monkeypatch.setattr(_offload._StandIn, "back", logged_back)
    monkeypatch.setattr(_recompute, "recompute", logged_recompute)
    cpu = torch.device("cpu")
    blocks, x = [_block(cpu, 0.0), _block(cpu, 0.0)], _input(cpu)
    h = x
    for blk in blocks:
        h = xla_ckpt.checkpoint(blk, h, policy=policies.offload("dots_saveable"))
    h.sum().backward()
    assert log == ["replay"] + ["back"] * 10 + ["replay"], log  # 5 values per block


# -------------------------------------------------------------------------- what must stay an error or SAVE


def test_offloaded_value_modified_after_forward_is_an_error():
    w = torch.randn(4, 4, requires_grad=True)
    held = []

    def f(x):
        h = x @ w
        held.append(h)  # fn leaks its intermediate; the caller writes to it after forward
        return torch.sin(h * 2)  # sin saves h * 2 (recomputed from the offloaded h); mul by 2 saves nothing

    y = xla_ckpt.checkpoint(f, torch.randn(4, 4), policy=policies.offload(policies.save_ops(aten.mm)))
    held[0].mul_(2)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"aten\.mm\.default.*offloaded was modified in place"):
        y.sum().backward()


def test_region_output_stays_on_device():
    """A value the caller holds (a region output) is not moved: it would free nothing. Still version-checked."""
    w = torch.randn(4, 4, requires_grad=True)

    def f(x):
        h = x @ w
        return h, torch.sin(h * 2)

    with xla_ckpt.saved_activations() as report:
        h, y = xla_ckpt.checkpoint(f, torch.randn(4, 4), policy=policies.offload(policies.save_ops(aten.mm)))
    assert report.host_nbytes == 0 and [e.kind for e in report.entries if e.grad_fn == "aten.mm"] == ["activation"]
    h.add_(1)
    with pytest.raises(xla_ckpt.CheckpointError, match="saved was modified in place"):
        y.sum().backward()


def test_verify_compares_offloaded_values():
    cpu = torch.device("cpu")
    blk, x = _block(cpu, 0.0), _input(cpu)
    y = xla_ckpt.checkpoint(blk, x, policy=policies.offload("everything_saveable"), verify=True)
    y.sum().backward()
    assert x.grad is not None


# -------------------------------------------------------------------------- policies


class _Const:
    def __init__(self, d):
        self.d = d

    def __call__(self, call):
        return self.d


@pytest.mark.parametrize("answers, any_, all_", [
    ((SAVE, OFFLOAD), SAVE, OFFLOAD),
    ((OFFLOAD, RECOMPUTE), OFFLOAD, RECOMPUTE),
    ((OFFLOAD, OFFLOAD), OFFLOAD, OFFLOAD),
    ((SAVE, RECOMPUTE), SAVE, RECOMPUTE),
    ((SAVE, SAVE), SAVE, SAVE),
    ((RECOMPUTE, OFFLOAD, SAVE), SAVE, RECOMPUTE),
])
def test_combinators_order_save_offload_recompute(answers, any_, all_):
    call = xla_ckpt.OpCall(aten.mm.default, (), {}, None)
    ps = [_Const(d) for d in answers]
    assert policies.any_of(*ps)(call) is any_
    assert policies.all_of(*ps)(call) is all_


def test_combinators_reject_a_wrong_answer():
    call = xla_ckpt.OpCall(aten.mm.default, (), {}, None, module="mlp")
    for combinator in (policies.any_of, policies.all_of, policies.offload):
        args = (_Const(True),) if combinator is policies.offload else (_Const(OFFLOAD), _Const(True))
        with pytest.raises(TypeError, match=r"returned True for aten\.mm\.default in module 'mlp'.*Decision\.OFFLOAD"):
            combinator(*args)(call)


def test_offload_policy_and_names_policy():
    mm = xla_ckpt.OpCall(aten.mm.default, (), {}, None)
    assert policies.offload("everything_saveable")(mm) is OFFLOAD
    assert policies.offload("nothing_saveable")(mm) is RECOMPUTE
    p = policies.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"])
    from dataclasses import replace

    assert [p(replace(mm, tag=t)) for t in ("a", "b", "c", None)] == [SAVE, OFFLOAD, RECOMPUTE, RECOMPUTE]
    with pytest.raises(ValueError, match=r"\['a'\] in both"):
        policies.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"])
    with pytest.raises(TypeError, match="must be a list of tag names, got 'ab'"):
        policies.save_and_offload_only_these_names(names_which_can_be_saved="ab")
    assert {"offload", "save_and_offload_only_these_names"} <= set(policies.names())


class _OffloadAll:
    """A planning policy (``_policy.plan``) that answers OFFLOAD for every position it decides."""

    def plan(self, view):
        return [OFFLOAD] * len(view.free)

    def __call__(self, call):  # pragma: no cover - planners are asked through plan()
        return SAVE


def test_a_plan_may_offload():
    cpu = torch.device("cpu")
    assert_same(_grads(cpu, None), _grads(cpu, _OffloadAll()))
    with xla_ckpt.saved_activations() as every:
        xla_ckpt.checkpoint(_block(cpu, 0.0), _input(cpu), policy="everything_saveable")
    with xla_ckpt.saved_activations() as planned:
        xla_ckpt.checkpoint(_block(cpu, 0.0), _input(cpu), policy=_OffloadAll())
    assert (planned.nbytes, planned.host_nbytes) == (BLOCK_INPUT, every.nbytes - BLOCK_INPUT), str(planned)
    with pytest.raises(TypeError, match="plans a whole region"):
        policies.offload(policies.memory_budget(0.3))


def test_compiled_marks_offload_as_must_save(monkeypatch):
    from torch.utils.checkpoint import CheckpointPolicy

    from xla_ckpt._compile import lowering as _compiled

    with pytest.warns(UserWarning, match="no offload mark"):
        assert _compiled.mark_of(OFFLOAD) is CheckpointPolicy.MUST_SAVE
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        assert _compiled.mark_of(OFFLOAD) is CheckpointPolicy.MUST_SAVE
    assert _compiled.mark_of(RECOMPUTE) is CheckpointPolicy.PREFER_RECOMPUTE


@pytest.mark.xla
def test_scan_layers_keeps_offload_on_device(xla_device, monkeypatch):
    """scan_layers lowers to torch's partitioner marks: OFFLOAD is MUST_SAVE there, said once, gradients equal."""
    from scan_layers import gpt_layers, layer_grads, unrolled

    layers = gpt_layers(2, xla_device)
    x = torch.randn(2, 16, 32).to(xla_device).requires_grad_()
    ref = layer_grads(layers, x, unrolled(layers))
    with pytest.warns(UserWarning, match="no offload mark"):
        got = layer_grads(layers, x, lambda h: xla_ckpt.scan_layers(layers, h, policy=policies.offload("dots_saveable")))
    assert_same(ref, got)


# -------------------------------------------------------------------------- configs

TOML = """
[[checkpoint]]
blocks = true
policy = { name = "offload", policy = %s }
"""


@pytest.mark.parametrize("inner, expected", [
    ('"dots_saveable"', "offload(dots_saveable)"),
    ('{ name = "save_only_these_names", names = ["qkv"] }', "offload(save_only_these_names('qkv'))"),
])
def test_config_offload_nested_policy(tmp_path, inner, expected):
    path = tmp_path / "c.toml"
    path.write_text(TOML % inner)
    assert repr(xla_ckpt.load_config(path).checkpoint[0].policy.build()) == expected


def test_config_yaml_names_policy(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("checkpoint:\n  - blocks: true\n    policy:\n      name: save_and_offload_only_these_names\n"
                    "      names_which_can_be_saved: [qkv]\n      names_which_can_be_offloaded: [mlp_up]\n")
    p = xla_ckpt.load_config(path).checkpoint[0].policy.build()
    assert (p.names_which_can_be_saved, p.names_which_can_be_offloaded) == (("qkv",), ("mlp_up",))


@pytest.mark.parametrize("inner, key, what", [
    ('"nope"', "checkpoint[0].policy.policy", "unknown policy 'nope'"),
    ('{ names = ["qkv"] }', "checkpoint[0].policy.policy.name", "missing"),
    ('{ name = "save_ops", ops = ["aten.nope"] }', "checkpoint[0].policy.policy", "unknown op 'aten.nope'"),
    ("3", "checkpoint[0].policy.policy", "expected a policy name or a table with 'name', got 3"),
])
def test_config_errors_name_the_dotted_key(tmp_path, inner, key, what):
    path = tmp_path / "c.toml"
    path.write_text(TOML % inner)
    with pytest.raises(xla_ckpt.ConfigError, match=re.escape(f"{key}: ") + ".*" + re.escape(what)):
        xla_ckpt.load_config(path)


def test_config_names_policy_error(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[checkpoint]]\nblocks = true\npolicy = { name = "save_and_offload_only_these_names", '
                    'names_which_can_be_saved = ["a"], names_which_can_be_offloaded = ["a"] }\n')
    with pytest.raises(xla_ckpt.ConfigError, match=r"checkpoint\[0\]\.policy: .*\['a'\] in both"):
        xla_ckpt.load_config(path)


# -------------------------------------------------------------------------- XLA annotations


@pytest.mark.xla
def test_xla_placement_annotations_in_lowered_hlo(xla_device):
    """Each offloaded value is annotated to the host after forward and back to the device in backward.

    Lowered, never run: XLA:CPU cannot compile the annotation (torch_xla 2.9: "Unknown custom-call API
    version enum value: 0"); TPU/GPU honour it. The graph is dropped unexecuted, then a sync proves
    nothing of it was left pending.
    """
    import torch_xla

    blk, x = _block(xla_device, 0.0), _input(xla_device)
    y = grads = report = None
    try:
        with _offload.annotate_on_xla_cpu(), xla_ckpt.saved_activations() as report:
            y = xla_ckpt.checkpoint(blk, x, policy=policies.offload("dots_saveable"))
        assert (report.nbytes, report.host_nbytes) == (BLOCK_INPUT, DOTS_KEPT), str(report)
        y.sum().backward()
        grads = [x.grad] + [p.grad for p in blk.parameters()]
        assert all(g is not None for g in grads)
        hlo = torch_xla._XLAC._get_xla_tensors_hlo(grads)
        n = len([e for e in report.entries if e.kind == "offloaded"])
        assert n == 5
        assert hlo.count('custom_call_target="annotate_device_placement"') == 2 * n
        assert hlo.count('_xla_buffer_placement="pinned_host"') == n
        assert hlo.count('_xla_buffer_placement="device"') == n
    finally:  # drop the unrunnable graph even when an assertion failed (later XLA tests sync)
        del y, grads, report
        x.grad = None
        for p in blk.parameters():
            p.grad = None
        gc.collect()
    torch_xla.sync()  # would fail to compile if an annotated tensor were still alive


# -------------------------------------------------------------------------- CUDA (skipped without a GPU)


@pytest.mark.cuda
def test_cuda_gradients_equal_and_host_copies_pinned(monkeypatch):
    cuda = torch.device("cuda")
    assert_same(_grads(cuda, None), _grads(cuda, policies.offload("dots_saveable")))
    pinned = []
    out = _offload._Cuda.out

    def spy(self, t):
        host = out(self, t)
        pinned.append(host.is_pinned())
        return host

    monkeypatch.setattr(_offload._Cuda, "out", spy)
    with xla_ckpt.saved_activations() as report:
        y = xla_ckpt.checkpoint(_block(cuda, 0.0), _input(cuda), policy=policies.offload("dots_saveable"))
    host = [e for e in report.entries if e.kind == "offloaded"]
    assert report.host_nbytes == DOTS_KEPT and all(e.device.type == "cpu" for e in host)
    assert pinned == [True] * 5 and len(_offload._STREAMS) >= 1
    y.sum().backward()


@pytest.mark.cuda
def test_cuda_device_memory_drops_by_the_offloaded_bytes():
    """Allocated device bytes after forward: SAVE minus OFFLOAD = exactly what moved (sizes are 512-byte multiples)."""
    cuda = torch.device("cuda")

    def allocated_after_forward(policy):
        blk, x = _block(cuda, 0.0), _input(cuda)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        y = xla_ckpt.checkpoint(blk, x, policy=policy)
        torch.cuda.synchronize()
        used = torch.cuda.memory_allocated() - before
        y.sum().backward()
        return used

    assert allocated_after_forward("dots_saveable") - allocated_after_forward(policies.offload("dots_saveable")) == DOTS_KEPT
