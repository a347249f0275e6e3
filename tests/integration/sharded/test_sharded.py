"""Sharded training recipes, each in its own subprocess (SPMD mode and device count are fixed once the
runtime starts; each torch.distributed run gets its own port). The README recipes are these probes."""

from __future__ import annotations

from helpers import free_port, run_probe

import copy
import os
import pickle

import pytest

# fp32 grads of the sharded run vs one unsharded eager process: a few ulps of the largest value
# (4.8e-7 measured); all-reduce/reduce-scatter order differs from a single process's sums.
SHARDED_ATOL = 1e-5


@pytest.mark.slow  # three SPMD processes with 4 virtual devices, each compiling
@pytest.mark.xla
def test_fsdpv2_spmd_policies(xla_device, tmp_path):
    r = {p: run_probe("fsdpv2_probe.py", p, tmp_path / p) for p in ("none", "nothing_saveable", "dots_saveable")}
    for p, res in r.items():
        assert res["devices"] == 4 and res["n_grads"] == 12, res
        assert res["max_abs_diff"] <= SHARDED_ATOL, (p, res)
        assert res["weight_copies"] == [], (p, res)  # no full-weight copy held between forward and backward
        assert res["all_gathers"] > 0  # the weights really are sharded and gathered
    # Recomputation survived the SPMD compiler: extra dots (one recomputed matmul per block) and more gathers.
    assert r["nothing_saveable"]["dots"] == r["none"]["dots"] + 3, r
    assert r["dots_saveable"]["dots"] == r["none"]["dots"], r
    assert r["nothing_saveable"]["all_gathers"] > r["none"]["all_gathers"]
    assert r["none"]["saved_bytes"] > r["dots_saveable"]["saved_bytes"] > r["nothing_saveable"]["saved_bytes"]


# Every preset under FSDPv2, by hand (each decoder layer and the root wrapped) and through the HF
# Trainer recipe (fsdp="full_shard", xla_fsdp_v2) beside HF's own xla_fsdp_grad_ckpt; fsdp_xla included
# (the wrapper refuses a root whose forward is not a bound method: "must define a `forward` method").
# One process for all (~80 s of CPU here).
@pytest.mark.slow
@pytest.mark.xla
def test_every_preset_under_fsdpv2_by_hand_and_in_the_trainer(xla_device, tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    r = run_probe("fsdpv2_presets_probe.py", tmp_path / "dump")
    assert r.pop("devices") == 4
    r.pop("cpu_s")
    for name, res in r.items():
        assert res["mismatch"] is None, (name, res)  # loss(es) and grads / trained parameters equal none's
    for preset in ("none", "megatron_selective", "full", "fsdp_xla", "hf_grad_ckpt"):
        res = r[f"trainer:{preset}"]
        assert len(res["losses"]) == 3 and res["moved"] == res["n_params"], res  # three steps that trained
    for preset in ("megatron_selective", "full", "fsdp_xla"):
        # the checkpointing survived FSDPv2 and the SPMD partitioner: a lower per-device compiled peak
        assert r[f"hand:{preset}"]["peak"] < r["hand:none"]["peak"], r
        assert r[f"trainer:{preset}"]["peak"] < 0.85 * r["trainer:none"]["peak"], r


# apply(scan=True) under FSDPv2 (4 virtual devices), tiny HF Llama, megatron_selective. torch_xla's scan needs
# jax and torchax under SPMD (shard_as). In this environment (the project's deps, no jax): the named error at
# apply time. In the one `make test-all` layers on it with them (.venv-jax, XLA_CKPT_JAX_PYTHON): loss and every
# grad equal the unscanned FSDPv2 run (the usual recipe, each layer wrapped), every stacked weight sharded.
# FSDPv2 around each scanned layer is refused at call time, before anything ran. ~10-60 s a run.
def _check_scan_under_fsdpv2(r: dict) -> None:
    assert r["devices"] == 4
    if r["scan"] == "ran":
        assert r["mismatch"] is None and r["max_grad_diff"] <= SHARDED_ATOL, r  # loss and every grad, none None
        assert r["whiles"]["scan"] >= 2 and r["whiles"]["unscanned"] == 0, r  # the scan ran, forward and back
        assert r["sharded_params"]["scan"] == r["n_params"] and r["shardings"]["scan"] > 0, r
        assert "has a backward hook (SpmdFullyShardedDataParallel" in r["per_layer"]["error"], r
        assert r["per_layer"]["at"] == "call" and r["per_layer"]["grads_none"], r
    else:
        for run in (r["scan"], r["per_layer"]):
            assert run["at"] == "apply" and not run["wrapped"], run  # refused before the model changed
            assert "SPMD is on (torch_xla.runtime.use_spmd()) and jax and torchax cannot be imported" in run["error"]


@pytest.mark.slow
@pytest.mark.xla
def test_scan_under_fsdpv2_equals_unscanned_or_names_the_missing_jax(xla_device):
    pytest.importorskip("transformers")
    _check_scan_under_fsdpv2(run_probe("fsdpv2_scan_probe.py"))


@pytest.mark.slow
@pytest.mark.xla
@pytest.mark.skipif(not os.environ.get("XLA_CKPT_JAX_PYTHON"),
                    reason="XLA_CKPT_JAX_PYTHON unset: the Python with jax and torchax (make test-all sets it)")
def test_scan_under_fsdpv2_with_jax_equals_unscanned(xla_device):
    pytest.importorskip("transformers")
    r = run_probe("fsdpv2_scan_probe.py", python=os.environ["XLA_CKPT_JAX_PYTHON"])
    assert r["scan"] == "ran", r  # that environment has jax and torchax: the scan must run
    _check_scan_under_fsdpv2(r)


# The fast tier's sharded run: FSDP2 with 2 gloo ranks under dots_saveable (torch only, seconds); the
# other policies and SPMD in `make test-all`.
@pytest.mark.parametrize("policy", [pytest.param("none", marks=pytest.mark.slow), "dots_saveable",
                                    pytest.param("nothing_saveable", marks=pytest.mark.slow)])
def test_torch_fsdp2_gloo(policy):
    r = run_probe("fsdp2_probe.py", policy, free_port())
    assert r["n_grads"] == 12 and r["max_abs_diff"] <= SHARDED_ATOL, r
    # Reshard-after-forward freed the unsharded weights our linear saved; backward refilled them.
    assert r["unsharded_freed_after_forward"], r
    assert r["weight_copies"] == [], r
    batch_rows, d, h, blocks = 8, 32, 64, 3  # per rank
    expected = {
        # per block: input, pre-GELU, GELU output (our linear keeps the weight itself)
        "none": blocks * 4 * batch_rows * (d + 2 * h),
        # block inputs + each block's first matmul output; the last block's last matmul output is
        # never read by backward (the other blocks' are the next block's input)
        "dots_saveable": blocks * 4 * batch_rows * (d + h),
        "nothing_saveable": blocks * 4 * batch_rows * d,  # block inputs only
    }[policy]
    assert r["saved_bytes"] == expected, r


# Tensor parallel blocks that annotate an activation inside the region: xs.mark_sharding bypasses the
# dispatcher, so a recorded-program replay that dropped the annotation would let the partitioner recompute
# h replicated (per-device peak 1.57x no checkpointing's, 123 values of h's full shape in the HLO).
def _annotated(tmp_path, variants):
    r = run_probe("annotate_probe.py", tmp_path / "dump", *variants)
    assert r["devices"] == 4, r
    results = r["results"]
    none = results["none"]
    assert none["full_shape_values"] == 0, r  # without checkpointing h only ever exists sharded
    for variant, res in results.items():
        assert res["max_abs_diff"] <= SHARDED_ATOL, (variant, res)
        assert res["peak"] <= none["peak"], (variant, res, none)
        assert res["full_shape_values"] == 0, (variant, res)  # no annotated activation recomputed replicated
    return results


@pytest.mark.xla
def test_sharding_annotations_inside_blocks_survive_the_recompute(xla_device, tmp_path):
    res = _annotated(tmp_path, ["none", "nothing_saveable"])
    assert res["nothing_saveable"]["dots"] == res["none"]["dots"] + 3  # one recomputed matmul per block
    assert res["nothing_saveable"]["peak"] < 0.85 * res["none"]["peak"], res  # 5.37 MB against 6.95 MB


@pytest.mark.xla
@pytest.mark.slow
def test_sharding_annotations_inside_blocks_under_every_policy(xla_device, tmp_path):
    import xla_ckpt

    names = xla_ckpt.policies.names()
    res = _annotated(tmp_path, ["none", *names, *(f"general:{n}" for n in ("nothing_saveable", "dots_saveable"))])
    assert res["general:nothing_saveable"]["peak"] == res["nothing_saveable"]["peak"], res


# The FSDP wrappers (torch_xla FSDPv2 and XLA FSDP) refuse a module whose forward has no ``__func__``:
# fsdp_xla's weights_by_reference must leave the root's forward a bound method.
@pytest.mark.parametrize("preset", ["none", "megatron_selective", "full", "fsdp_xla"])
def test_root_forward_stays_the_bound_method_fsdp_wrappers_accept(preset):
    import inspect

    import torch
    from torch import nn

    import xla_ckpt
    from xla_ckpt.models import llama_hf

    def build():
        torch.manual_seed(0)
        return llama_hf(vocab_size=64, d_model=32, n_layer=2, n_head=4, seq_len=8)

    model, ref = build(), build()
    sig, keys = inspect.signature(model.forward), list(model.state_dict())
    xla_ckpt.apply(model, preset)
    xla_ckpt.apply(model, preset)  # a second apply adds nothing
    fwd = model.forward
    assert inspect.ismethod(fwd) and fwd.__self__ is model and fwd.__func__ is type(model).forward, fwd
    assert fwd.__func__ is not nn.Module.forward  # torch_xla's FSDP check, verbatim in both wrappers
    assert inspect.signature(fwd) == sig and "input_ids" in inspect.signature(fwd).parameters
    assert list(model.state_dict()) == keys
    assert len(model._forward_pre_hooks) == len(model._forward_hooks) == (preset == "fsdp_xla")
    idx = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    for m in (model, copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        with xla_ckpt.saved_activations() as report:
            loss = m(idx, labels=idx).loss
        loss.backward()
        # weights by reference did something: no parameter-derived copy kept (stock Linear's on CPU otherwise)
        kinds = {e.kind for e in report.entries}
        assert ("parameter copy" in kinds) == (preset != "fsdp_xla"), kinds
    ref(idx, labels=idx).loss.backward()
    for p, r in zip(model.parameters(), ref.parameters(), strict=True):
        assert p.grad is not None
        torch.testing.assert_close(p.grad, r.grad)


def test_by_reference_hooks_close_after_a_forward_that_raised():
    import torch

    import xla_ckpt
    from xla_ckpt._hooks import saved
    from xla_ckpt.models import llama_hf

    model = llama_hf(vocab_size=64, d_model=32, n_layer=2, n_head=4, seq_len=8)
    xla_ckpt.apply(model, "fsdp_xla")
    with pytest.raises(IndexError):
        model(torch.full((1, 4), 99))  # token id out of the embedding's range
    assert saved.state.by_reference == 0
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None  # no saved-tensor hooks left
