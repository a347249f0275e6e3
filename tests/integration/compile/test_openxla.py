"""``torch.compile(backend="openxla")`` over a model the library wrapped: works with nothing else from the user.

torch's checkpoint looks up ``torch.xla`` (a device module torch_xla 2.9 does not register); the
library supplies a stand-in for the duration of each compile (``_base/compile_scope.py``). Each test compiles
on XLA:CPU (seconds per graph on two cores), so the fast tier keeps one small GPT; the rest is slow.
"""

from __future__ import annotations

from helpers import ROOT_DIR
from switches import planned_regions

import pytest
import torch

import xla_ckpt
from xla_ckpt._base import compile_scope as _compile_scope
from xla_ckpt.models import GPT, GPTConfig

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32)


def _gpt(dev: torch.device) -> GPT:
    torch.manual_seed(0)
    return GPT(CFG).to(dev)


def _idx(dev: torch.device) -> torch.Tensor:
    return torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=torch.Generator().manual_seed(1)).to(dev)


def _step(model: torch.nn.Module, idx: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    import torch_xla

    model.zero_grad(set_to_none=True)
    loss = model(idx, idx)
    loss.backward()
    torch_xla.sync()
    return loss.detach().cpu(), [p.grad.cpu() if p.grad is not None else None for p in model.parameters()]


def _lazy_none(dev: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    return _step(_gpt(dev), _idx(dev))


def _compiled(dev: torch.device, config: object) -> tuple[tuple[torch.Tensor, list[torch.Tensor]], dict]:
    import torch._dynamo.utils as dynamo_utils

    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    model = _gpt(dev)
    xla_ckpt.apply(model, config)
    compiled = torch.compile(model, backend="openxla")
    out = _step(compiled, _idx(dev))
    return out, {"graphs": dynamo_utils.counters["stats"]["unique_graphs"],
                 "breaks": sum(dynamo_utils.counters["graph_break"].values())}


def _assert_equal_grads(ref: tuple, got: tuple) -> None:
    torch.testing.assert_close(got[0], ref[0])
    for i, (r, g) in enumerate(zip(ref[1], got[1], strict=True)):
        assert g is not None, f"parameter {i} has no grad"
        torch.testing.assert_close(g, r)


@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
def test_openxla_compiles_a_wrapped_gpt_in_one_graph_and_leaves_no_torch_xla(xla_device):
    ref = _lazy_none(xla_device)
    got, stats = _compiled(xla_device, "megatron_selective")
    _assert_equal_grads(ref, got)
    assert stats == {"graphs": 1, "breaks": 0}
    # The stand-in device module lived for the compile only.
    assert not hasattr(torch, "xla")
    assert _compile_scope.active() == []


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
@pytest.mark.filterwarnings("ignore:Decision.OFFLOAD")
@pytest.mark.parametrize("config", ["none", "full", "dots", "names", "fsdp_xla",
                                    {"checkpoint": [{"blocks": True, "budget": 0.3}]}],
                         ids=["none", "full", "dots", "names", "fsdp_xla", "budget"])
def test_openxla_every_preset_and_a_budget(xla_device, config):
    ref = _lazy_none(xla_device)
    got, stats = _compiled(xla_device, config)
    _assert_equal_grads(ref, got)
    assert stats == {"graphs": 1, "breaks": 0}
    assert not hasattr(torch, "xla")


@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
def test_openxla_budget_region_with_no_other_recompute_mark_is_planned(xla_device):
    """openxla's default partitioner calls the min-cut (where a budget region is planned) only for a graph
    with a node marked for recompute; a region whose ops are all provisionally saved was never planned
    (the openxla fuzz: every budget region of its small programs). Planned: a plan, equal grads."""
    import warnings

    import torch_xla

    def fn(x, w):
        return (x @ w).sin().cos() @ w

    from xla_ckpt._base import warn as _warn

    def step(policy):
        torch._dynamo.reset()
        _warn._seen.discard(("compiled", "budget-unplanned"))  # said once per process
        gen = torch.Generator().manual_seed(0)
        w = torch.randn(64, 64, generator=gen).to(xla_device).requires_grad_()
        x = torch.randn(64, 64, generator=gen).to(xla_device).requires_grad_()
        body = fn if policy is None else (lambda x, w: xla_ckpt.checkpoint(fn, x, w, policy=policy))
        with planned_regions() as plans, warnings.catch_warnings():
            # A planned region is not "unmarked": AOTAutograd's first trace (metadata) registered it too.
            warnings.filterwarnings("error", message=".*partitioner xla_ckpt does not reach")
            out = torch.compile(body, backend="openxla")(x, w)
            out.sum().backward()
        torch_xla.sync()
        return (out, x.grad, w.grad), plans

    ref, _ = step(None)
    budget = xla_ckpt.policies.memory_budget(0.3)  # built outside the compiled function
    got, plans = step(budget)
    for r, g in zip(ref, got, strict=True):
        torch.testing.assert_close(g.cpu(), r.cpu())
    assert len(plans) == 1 and plans[0].positions == 4, plans
    assert plans[0].cost.nbytes < plans[0].baseline.nbytes, plans[0]  # it recomputes: the plan did something


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
def test_openxla_scan_layers_runs_as_compiled_regions(xla_device):
    import torch._dynamo.utils as dynamo_utils
    import torch_xla
    from torch import nn

    from xla_ckpt.models import Block

    torch.manual_seed(0)
    layers = nn.ModuleList(Block(CFG) for _ in range(3)).to(xla_device)
    x = torch.randn(2, CFG.seq_len, CFG.d_model).to(xla_device)

    def plain(x):
        for layer in layers:
            x = layer(x)
        return x.square().sum()

    def grads(f):
        layers.zero_grad(set_to_none=True)
        f(x).backward()
        torch_xla.sync()
        return [p.grad.cpu() for p in layers.parameters()]

    ref = grads(plain)
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    got = grads(torch.compile(lambda x: xla_ckpt.scan_layers(layers, x, policy="dots_saveable").square().sum(),
                              backend="openxla"))
    for r, g in zip(ref, got, strict=True):
        torch.testing.assert_close(g, r)
    assert dynamo_utils.counters["stats"]["unique_graphs"] == 1
    assert not dynamo_utils.counters["graph_break"]


# --------------------------------------------------------------------------- compiled peaks (one process each)

PROBE_SIZE = ["--layers", "4", "--d-model", "128", "--heads", "4", "--seq", "128", "--batch", "4", "--vocab", "256"]


# Probes are deterministic (same program, same exact peak bytes): the GPT cases share their baselines
# (lazy:none and compiled none of PROBE_SIZE) instead of compiling them once per case.
_PROBES: dict[tuple[str, ...], dict] = {}


def _probe(tmp_path, variant: str, *flags: str) -> dict:
    """bench/openxla_probe.py in a fresh process (XLA_FLAGS is read once per process), once per session
    for each (variant, flags)."""
    key = (variant, *flags)
    if key not in _PROBES:
        _PROBES[key] = _run_probe(tmp_path, variant, *flags)
    return _PROBES[key]


def _run_probe(tmp_path, variant: str, *flags: str) -> dict:
    import json
    import os
    import subprocess
    import sys

    root = ROOT_DIR
    # One folder per probe: the probe reads every program in its folder, so a fenced and an unfenced run of
    # one preset must not share one.
    dump = tmp_path / "_".join((variant, *flags)).replace(":", "_").replace(" ", "_").replace("-", "")
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run([sys.executable, os.path.join(root, "bench", "openxla_probe.py"), variant, str(dump), *flags],
                          capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


# The HF Llama with its default config (use_cache=True), tiny sizes (xla_ckpt.hf_models.build's defaults).
LLAMA = ["--model", "llama", "--layers", "2", "--d-model", "32", "--heads", "4", "--seq", "16", "--batch", "2",
         "--vocab", "128"]


@pytest.mark.slow
@pytest.mark.xla  # a torch_xla subprocess: no xla_device fixture to mark it
@pytest.mark.parametrize("size,preset", [(PROBE_SIZE, "megatron_selective"), (PROBE_SIZE, "full"),
                                         (LLAMA, "megatron_selective")], ids=["gpt-megatron", "gpt-full", "llama-megatron"])
def test_openxla_fenced_backward_peak_is_within_the_lazy_engines(tmp_path, size, preset):
    """The compiled step's peak (max over its XLA programs), as a fraction of compiled ``none``, is at most the
    lazy engine's fraction of lazy ``none`` for the same policy, and below the unfenced partition's (what the
    fence buys). Same gradients (checksum) as lazy.

    (In bytes, compiled ``none`` itself peaks above lazy ``none``: default GPT 276.6 vs 237.6 MiB, forward and
    backward being two programs; so the comparison is of what each path saves against its own baseline.)
    """
    lazy_none = _probe(tmp_path, "lazy:none", *size)
    lazy = _probe(tmp_path, f"lazy:{preset}", *size)
    none = _probe(tmp_path, "none", *size)
    fenced = _probe(tmp_path, preset, *size)
    unfenced = _probe(tmp_path, preset, "--no-fence", *size)
    assert fenced["breaks"] == 0
    assert fenced["peak"] / none["peak"] <= lazy["peak"] / lazy_none["peak"], (fenced, none, lazy, lazy_none)
    assert fenced["peak"] < unfenced["peak"]
    assert fenced["grad_abs_sum"] == pytest.approx(lazy["grad_abs_sum"], rel=1e-5)


@pytest.mark.slow
@pytest.mark.xla  # torch_xla subprocesses
def test_openxla_budget_peak_on_the_default_gpt(tmp_path):
    """``budget = 0.3`` on the default GPT (bench/compiled.py's) under openxla: planned on the joint graph
    (``_compile.budget``), compiled peak at most 0.55x of compiled ``none`` (1.00x if the
    region ran unmarked), one graph, no break, every grad equal lazy ``none``'s."""
    grads = {v: str(tmp_path / f"{v.replace(':', '_')}.pt") for v in ("lazy:none", "budget:0.3")}
    lazy = _probe(tmp_path, "lazy:none", "--grads", grads["lazy:none"])
    none = _probe(tmp_path, "none")
    budget = _probe(tmp_path, "budget:0.3", "--grads", grads["budget:0.3"])
    assert budget["graphs"] == 1 and budget["breaks"] == 0, budget
    assert budget["peak"] <= 0.55 * none["peak"], (budget["peak"], none["peak"])
    torch.testing.assert_close(torch.load(grads["budget:0.3"]), torch.load(grads["lazy:none"]))
    assert lazy["loss"] == pytest.approx(budget["loss"], rel=1e-6)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_openxla_hf_llama_default_config_one_graph_equal_grads(xla_device):
    """An HF Llama (default config: use_cache=True), megatron_selective, compiled with openxla: one graph over
    two steps, loss and every grad equal the lazy, unwrapped model's."""
    import torch._dynamo.utils as dynamo_utils
    import torch_xla

    from xla_ckpt import hf_models

    def steps(preset, compiled):
        model = hf_models.to_device(hf_models.build("llama"), xla_device)
        if preset:
            xla_ckpt.apply(model, preset)
        batch = hf_models.batch("llama", model, device=xla_device)
        run = torch.compile(model, backend="openxla") if compiled else model
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            loss = run(**batch).loss
            loss.backward()
            torch_xla.sync()
        return [loss.detach().cpu()] + [p.grad.cpu() if p.grad is not None else None for p in model.parameters()]

    ref = steps(None, False)
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    got = steps("megatron_selective", True)
    torch.testing.assert_close(got[0], ref[0])
    for r, g in zip(ref[1:], got[1:], strict=True):
        assert g is not None
        torch.testing.assert_close(g, r)
    assert not dynamo_utils.counters["graph_break"]
    assert dynamo_utils.counters["stats"]["unique_graphs"] == 1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_openxla_dropout_in_the_regions_gives_equal_grads(xla_device):
    """Random ops inside a region are saved on XLA under compile (the partitioner would otherwise functionalise
    their RNG into run_and_save_rng_state, which the openxla bridge cannot run): with dropout 0.2 the compiled
    preset's loss and grads equal compiled ``none``'s for the same XLA seed."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    from dataclasses import replace

    cfg = replace(CFG, dropout=0.2)
    idx = _idx(xla_device)

    def step(preset):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = GPT(cfg).to(xla_device)
        if preset is not None:
            xla_ckpt.apply(model, preset)
        xm.set_rng_state(123, xla_device)
        loss = torch.compile(model, backend="openxla")(idx, idx)
        loss.backward()
        torch_xla.sync()
        return [loss.detach().cpu()] + [p.grad.cpu() for p in model.parameters()]

    ref = step(None)
    for preset in ("megatron_selective", "full", {"checkpoint": [{"blocks": True, "budget": 0.3}]}):
        for r, g in zip(ref, step(preset), strict=True):
            torch.testing.assert_close(g, r)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_openxla_graph_break_inside_a_region_runs_it_in_the_lazy_engine(xla_device):
    """A graph break inside a checkpointed region makes Dynamo call torch's checkpoint eagerly, which on XLA
    raises ``AttributeError: module 'torch' has no attribute 'xla'``; the region runs in the lazy engine.
    A block compiled alone (the rest of the step stays compiled) and the GPT (Dynamo skips its loop frame):
    loss, input grad and every parameter grad equal the lazy, unwrapped model's."""
    import torch._dynamo.utils as dynamo_utils
    import torch_xla

    from xla_ckpt import models
    from xla_ckpt.models import Block

    def breaking(self, x):
        torch._dynamo.graph_break()
        return models.MLP.forward(self, x)

    def run(model, preset, compiled, args, loss_of):
        torch._dynamo.reset()
        dynamo_utils.counters.clear()
        if preset:
            xla_ckpt.apply(model, preset) if isinstance(model, GPT) else xla_ckpt.checkpointed(model, policy=preset)
        for mlp in (m for m in model.modules() if isinstance(m, models.MLP)):
            mlp.forward = breaking.__get__(mlp)
        f = torch.compile(loss_of, backend="openxla") if compiled else loss_of
        args = [a.clone().requires_grad_() if a.is_floating_point() else a for a in args]
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            loss = f(model, *args)
            loss.backward()
            torch_xla.sync()
        return [loss.detach().cpu()] + [a.grad.cpu() for a in args if a.requires_grad] + \
            [p.grad.cpu() if p.grad is not None else None for p in model.parameters()]

    x = torch.randn(2, CFG.seq_len, CFG.d_model, generator=torch.Generator().manual_seed(2)).to(xla_device)

    def block():
        torch.manual_seed(0)
        return Block(CFG).to(xla_device)

    cases = [(block, [x], lambda m, x: (2 * m(x)).square().mean(), "dots_with_no_batch_dims_saveable"),
             (lambda: _gpt(xla_device), [_idx(xla_device)], lambda m, i: m(i, i), "megatron_selective")]
    for build, args, loss_of, preset in cases:
        ref = run(build(), None, False, args, loss_of)
        got = run(build(), preset, True, args, loss_of)
        for r, g in zip(ref, got, strict=True):
            assert g is not None
            torch.testing.assert_close(g, r)
        assert sum(dynamo_utils.counters["graph_break"].values()) > 0  # the region did break the graph
