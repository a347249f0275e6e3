"""torch DistributedDataParallel (gloo, 2 CPU ranks, each its own batch) around models ``xla_ckpt.apply``
checkpointed: losses, every grad on every rank, the trained parameters and buffers, and the RNG state equal the
same DDP run without the library, bitwise (CPU eager), under every DDP variant the probe runs.

One probe process trains every (model, variant, preset) in sequence (``tests/probes/ddp_probe.py``: a spawn of two
ranks costs seconds, the runs milliseconds); the tests below each judge one run from what the ranks saved.
"""

from __future__ import annotations

import importlib.util
import math
import os

import pytest
import torch

from helpers import PROBES_DIR
from helpers import free_port, run_probe

pytestmark = pytest.mark.slow  # a subprocess probe spawning two gloo ranks (~10 s)

_spec = importlib.util.spec_from_file_location("ddp_probe", os.path.join(PROBES_DIR, "ddp_probe.py"))
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)

MODELS = ("gpt", "bn")  # xla_ckpt.models.GPT with dropout; BNNet: BatchNorm1d (buffers) and Dropout per block
CHECKPOINTED = ("megatron_selective", "full")
RUNS = [(m, v) for m in MODELS for v in probe.VARIANTS if not (v == "rank_unused" and m != "bn")]
EXACT = dict(rtol=0, atol=0)  # CPU eager: the library's claim is bitwise (docs/correctness.md)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each rank saved, ``[rank0, rank1]``, each ``{(model, variant, preset): record}``."""
    out = tmp_path_factory.mktemp("ddp")
    meta = run_probe("ddp_probe.py", out, free_port())
    assert meta["world"] == 2, meta
    return [torch.load(out / f"rank{r}.pt") for r in range(meta["world"])]


def _spare(name: str) -> bool:
    return name.endswith(".spare")  # the parameter the find_unused variant's forward never reads


def _same(got, ref, what: str) -> None:
    torch.testing.assert_close(got, ref, **EXACT, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("preset", CHECKPOINTED)
@pytest.mark.parametrize("model,variant", RUNS, ids=[f"{m}-{v}" for m, v in RUNS])
def test_ddp_checkpointed_equals_plain_ddp(ranks, model, variant, preset):
    for rank, res in enumerate(ranks):
        got, ref = res[(model, variant, preset)], res[(model, variant, "none")]
        where = f"{model}/{variant}/{preset} rank {rank}"
        expected = [""] if variant == "whole_model_region" else ["layers.0", "layers.1"]
        assert [n.removeprefix("module.") for n in got["wrapped"]] == expected, (where, got["wrapped"])
        # the policy did something (also asserted inside the rank): fewer bytes kept by every forward
        assert all(c < p for c, p in zip(got["saved_bytes"], ref["saved_bytes"], strict=True)), (where, got["saved_bytes"],
                                                                                    ref["saved_bytes"])
        assert len(got["loss"]) == len(ref["loss"]) == 2 * probe.VARIANTS[variant][2], where
        for i, (g, r) in enumerate(zip(got["loss"], ref["loss"], strict=True)):
            _same(g, r, f"{where}: loss of micro-batch {i}")
        for i, (g, r) in enumerate(zip(got["rng"], ref["rng"], strict=True)):
            _same(g, r, f"{where}: CPU RNG state after micro-batch {i}")
        for step, (gs, rs) in enumerate(zip(got["grads"], ref["grads"], strict=True)):
            assert list(gs) == list(rs), where
            for name, r in rs.items():
                if r is None:  # only a parameter no rank's forward reads has no grad, in both runs
                    assert variant == "find_unused" and _spare(name), f"{where}: plain DDP left {name}.grad None"
                    assert gs[name] is None, f"{where}: step {step}: {name} has a grad, plain DDP's is None"
                    continue
                assert gs[name] is not None, f"{where}: step {step}: {name}.grad is None"
                _same(gs[name], r, f"{where}: step {step}: grad of {name}")
        for kind in ("params", "buffers"):
            assert list(got[kind]) == list(ref[kind]), where
            for name, r in ref[kind].items():
                _same(got[kind][name], r, f"{where}: {name} after 2 SGD steps")


@pytest.mark.parametrize("model,variant", RUNS, ids=[f"{m}-{v}" for m, v in RUNS])
def test_the_plain_ddp_reference_really_synced(ranks, model, variant):
    """The reference is DDP's work: the ranks' losses differ (their own batches), their grads and parameters
    agree after the all-reduce; the RNG streams differ (seeded per rank)."""
    r0, r1 = (res[(model, variant, "none")] for res in ranks)
    assert all(not torch.equal(a, b) for a, b in zip(r0["loss"], r1["loss"], strict=True)), (model, variant)
    assert all(math.isfinite(float(x)) for x in r0["loss"] + r1["loss"]), (model, variant)
    for step, (g0, g1) in enumerate(zip(r0["grads"], r1["grads"], strict=True)):
        for name, g in g0.items():
            if g is None:
                assert g1[name] is None and variant == "find_unused" and _spare(name), (model, variant, name)
                continue
            _same(g1[name], g, f"{model}/{variant} step {step}: {name}.grad, rank 1 vs rank 0")
    for name, p in r0["params"].items():
        _same(r1["params"][name], p, f"{model}/{variant}: {name}, rank 1 vs rank 0")
    assert not torch.equal(r0["rng"][-1], r1["rng"][-1])
