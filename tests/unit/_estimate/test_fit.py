"""``estimate_layers`` (exact scaling from shallow models) and ``fit`` (per-chip accounting, the verdict)."""

from __future__ import annotations

from helpers import ROOT_DIR

import json

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt.__main__ import main
from xla_ckpt._estimate.chips import CHIPS, GIB
from xla_ckpt._estimate.fit import XLA_BAND, arch_config, fit, hf_builder
from xla_ckpt._estimate.scale import estimate_layers
from xla_ckpt.models import GPT, GPTConfig

BUDGET = {"checkpoint": [{"blocks": True, "budget": 0.3}]}


def _gpt(n: int) -> tuple[torch.nn.Module, tuple, dict]:
    with torch.device("meta"):
        m = GPT(GPTConfig(n_layer=n, n_head=4, d_model=64, seq_len=32))
    idx = torch.zeros(2, 32, dtype=torch.long, device="meta")
    return m, (idx, idx), {}


def _hf(arch: str):  # noqa: ANN202
    def build(n: int) -> tuple[torch.nn.Module, tuple, dict]:
        with torch.device("meta"):
            m = hf_models.build(arch, n_layer=n)
        return m, (), hf_models.batch(arch, m, device="meta")
    return build


@pytest.mark.parametrize("name,build,period,n", [
    ("gpt", _gpt, 1, 7),
    pytest.param("llama", _hf("llama"), 1, 6, marks=pytest.mark.slow),
    pytest.param("gemma2", _hf("gemma2"), 2, 12, marks=pytest.mark.slow),  # sliding/full attention alternate
])
@pytest.mark.parametrize("config", ["full", "megatron_selective", "names", BUDGET])
def test_scaled_equals_whole_model(name: str, build, period: int, n: int, config) -> None:  # noqa: ANN001
    model, args, kwargs = build(n)
    whole = xla_ckpt.estimate(model, *args, config=config, **kwargs)
    scaled, extrapolated = estimate_layers(build, n, period, config=config)
    assert extrapolated
    assert scaled == whole  # every field, by_module and by_op included


def test_scaling_refuses_what_is_not_linear() -> None:
    """A model whose blocks grow with depth is estimated whole, never extrapolated wrongly."""
    def build(n: int) -> tuple[torch.nn.Module, tuple, dict]:
        with torch.device("meta"):
            m = GPT(GPTConfig(n_layer=n, n_head=4, d_model=64, seq_len=32))
        idx = torch.zeros(2, 8 * n, dtype=torch.long, device="meta")  # the sequence grows with depth
        return m, (idx, idx), {}

    est, extrapolated = estimate_layers(build, 6, config="full")
    model, args, kwargs = build(6)
    assert not extrapolated and est == xla_ckpt.estimate(model, *args, config="full", **kwargs)


@pytest.mark.slow
def test_fit_accounting_and_verdict() -> None:
    cfg = arch_config("llama", hidden=256, layers=6, heads=4, kv_heads=2, mlp=512, vocab=1000, seq=256)
    r = fit(cfg, seq=256, batch=2, chips=4, hbm_gib=0.05, param_dtype="bf16", optim_dtype="fp32", xla=False,
            budgets=(0.25,))
    build, _, _, _ = hf_builder(cfg, 2, 256, torch.bfloat16)
    model, args, kwargs = build(6)
    n = sum(p.numel() for p in model.parameters())
    assert r.n_params == n
    assert r.param_bytes == r.grad_bytes == n * 2 // 4
    assert r.optimizer_bytes == n * (2 * 4 + 4) // 4  # Adam's two fp32 moments and an fp32 master copy
    assert r.gather_bytes > 0 and r.band is None
    rows = {row.policy: row for row in r.rows}
    for name in ("full", "megatron_selective"):
        est = xla_ckpt.estimate(model, *args, config=name, **kwargs)
        assert rows[name].activation_bytes == est.activation_bytes
        assert rows[name].recompute_flops == est.recompute_flops
        assert rows[name].total_bytes == r.static_bytes + rows[name].charged_bytes
    assert rows["none"].working_bytes == 0 and rows["full"].working_bytes > 0
    fitting = [row for row in r.rows if row.fits]
    assert fitting, str(r)
    assert r.recommended_policy == min(fitting, key=lambda row: (row.recompute_flops, -row.activation_bytes)).policy
    best = next(row.config for row in fitting if row.policy == r.recommended_policy)
    assert r.recommended is not None and r.recommended.checkpoint == best.checkpoint  # what apply takes
    assert all(row.headroom_bytes == int(0.05 * GIB * 0.95) - row.total_bytes for row in r.rows)
    # Less memory: nothing fits, and the report says so.
    small = fit(cfg, seq=256, batch=2, chips=4, hbm_gib=0.001, xla=False, budgets=())
    assert small.recommended is None and "no policy fits" in str(small)


def test_fit_on_an_xla_chip_charges_the_band() -> None:
    cfg = arch_config("llama", hidden=128, layers=4, heads=4, kv_heads=2, mlp=256, vocab=500, seq=128)
    r = fit(cfg, seq=128, batch=1, chips=8, chip="v5e", budgets=())
    assert r.band == XLA_BAND and r.hbm_bytes == CHIPS["v5e"].hbm_bytes
    for row in r.rows:
        assert row.charged_bytes == int((row.activation_bytes + row.working_bytes) * XLA_BAND[1])


def test_fit_cli_json_and_errors(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "config.json"
    path.write_text(json.dumps(arch_config("mistral", 128, 4, 4, 2, 256, 500, 128)))
    code = main(["fit", "--hf-config", str(path), "--seq", "128", "--chips", "8", "--chip", "v5p", "--json",
                 "--budgets", "0.25"])
    # (all presets and one budget: the CLI's path end to end)
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["recommended"] and data["chips"] == 8 and data["fsdp"] == 8
    assert {row["policy"] for row in data["rows"]} >= {"none", "full", "megatron_selective", "memory_budget(0.25)"}
    assert main(["fit", "--hf-config", str(path), "--seq", "128", "--chips", "6", "--fsdp", "4", "--chip", "v5p"]) == 2
    assert "fsdp must divide chips" in capsys.readouterr().err
    with pytest.raises(ValueError, match="exactly one"):
        fit(str(path), seq=128)
    with pytest.raises(ValueError, match="unknown chip"):
        fit(str(path), seq=128, chip="v9")


def test_band_is_the_published_measurement() -> None:
    """fit's XLA band is the one bench/xla_band.py measured and docs/estimate.md publishes (no drift)."""
    import os

    root = ROOT_DIR
    with open(os.path.join(root, "bench", "results", "xla_band.json"), encoding="utf-8") as f:
        data = json.load(f)
    ratios = [r["ratio"] for r in data["cases"] if "ratio" in r]
    assert XLA_BAND == (min(ratios), max(ratios)) == tuple(data["band"])
    with open(os.path.join(root, "docs", "estimate.md"), encoding="utf-8") as f:
        assert f"{XLA_BAND[0]:.3f} - {XLA_BAND[1]:.3f}" in f.read()
