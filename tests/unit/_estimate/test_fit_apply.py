"""From the chip to the config: ``fit(...).recommended`` is what ``apply`` takes, ``--write`` round-trips it."""

from __future__ import annotations

import copy
import sys

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt.__main__ import main
from xla_ckpt._estimate.chips import GIB
from xla_ckpt._api.config_dump import config_data, to_toml
from xla_ckpt._estimate.fit import fit

from helpers import assert_same

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SEQ, BATCH = 16, 2


@pytest.mark.parametrize("name", list(xla_ckpt.presets()) + ["budget", "every_other"])
def test_config_round_trips_through_toml(name: str) -> None:
    """Every preset and a config with every kind of value: TOML text -> load_config -> the same Config."""
    if name == "budget":
        cfg = xla_ckpt.load_config({"checkpoint": [{"blocks": True, "budget": 0.3}], "verify": True})
    elif name == "every_other":
        cfg = xla_ckpt.load_config({"description": 'quotes " and \\ and\nnewline', "checkpoint": [
            {"match": ["layers.*", "h.[0-3]"], "every": 2, "policy": {"name": "offload", "policy": "dots_saveable"}},
            {"classes": ["Block"], "enabled": False},
            {"blocks": True, "policy": {"name": "any_of", "policies": ["dots_saveable",
                                                                       {"name": "save_only_these_names",
                                                                        "names": ["qkv"]}]}}]})
    else:
        cfg = xla_ckpt.load_config(name)
    text = to_toml(cfg, header="why\nit was written")
    assert text.startswith("# why\n# it was written\n")
    back = xla_ckpt.load_config(tomllib.loads(text))
    assert back == cfg and config_data(back) == config_data(cfg)


def _llama() -> torch.nn.Module:
    return hf_models.build("llama", d_model=32, n_layer=2, n_head=4, seq_len=SEQ)  # default config otherwise


def _fit(model: torch.nn.Module, hbm_gib: float):  # noqa: ANN202
    return fit(model.config.to_dict(), seq=SEQ, batch=BATCH, hbm_gib=hbm_gib, param_dtype="fp32", xla=False,
               budgets=(0.25,), reserve=0.0)


@pytest.fixture(scope="module")
def roomy():  # noqa: ANN201
    return _fit(_llama(), 1.0)


# fsdp_xla: the first policy with recompute FLOPs that wins on a smaller chip (patch_linear and weights
# by reference, through apply); memory_budget(0.25): a planned policy.
@pytest.mark.parametrize("policy", ["fsdp_xla", "memory_budget(0.25)"])
def test_fit_recommendation_applies_to_an_hf_model_and_trains_exactly(roomy, policy: str) -> None:  # noqa: ANN001
    model = _llama()
    assert roomy.recommended_policy == "none"  # on a roomy chip: no recompute at all
    # Size the chip so that `policy` is the least-recompute fit: every row recomputing less keeps more.
    rows = roomy.rows  # sorted by recompute
    i = next(i for i, r in enumerate(rows) if r.policy == policy)
    pick = rows[i]
    assert pick.recompute_flops > 0 and all(q.total_bytes > pick.total_bytes for q in rows[:i]), str(roomy)
    report = _fit(model, pick.total_bytes / GIB)
    assert report.recommended_policy == pick.policy, str(report)
    cfg = report.recommended
    assert isinstance(cfg, xla_ckpt.Config) and cfg.checkpoint and pick.policy in cfg.description
    # The estimate of that very config fits the chip.
    batch = hf_models.batch("llama", model, batch=BATCH, seq_len=SEQ)
    est = xla_ckpt.estimate(model, config=cfg, **batch)
    row = next(r for r in report.rows if r.policy == report.recommended_policy)
    assert est.activation_bytes == row.activation_bytes and est.recompute_flops == row.recompute_flops > 0
    assert report.static_bytes + est.activation_bytes + row.working_bytes <= report.hbm_bytes

    # apply(model, fit(...).recommended): the same losses, outputs and every grad as the plain model, two steps.
    plain, ckpt = model, copy.deepcopy(model)
    applied = xla_ckpt.apply(ckpt, cfg)
    assert len(applied.wrapped) == 2 and not applied.unmatched_rules
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (plain, ckpt)]
    for step in range(2):
        results = []
        for m, opt in zip((plain, ckpt), opts, strict=True):
            opt.zero_grad()
            with xla_ckpt.saved_activations() as kept:
                out = m(**batch)
            out.loss.backward()
            results.append(([out.loss.detach(), out.logits.detach()], [p.grad for p in m.parameters()], kept.nbytes))
            opt.step()
        (ref_out, ref_g, ref_kept), (got_out, got_g, got_kept) = results
        assert_same((ref_out, ref_g), (got_out, got_g), names=[n for n, _ in plain.named_parameters()])
        assert got_kept < ref_kept, (step, got_kept, ref_kept)  # the config did keep less
    for p, q in zip(plain.parameters(), ckpt.parameters(), strict=True):
        torch.testing.assert_close(q, p)


def test_fit_cli_writes_the_recommendation(roomy, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    import json

    model = _llama()
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(model.config.to_dict()))
    out = tmp_path / "ckpt.toml"
    rows = {r.policy: r for r in roomy.rows}
    hbm = (rows["none"].total_bytes + rows["full"].total_bytes) / 2 / GIB  # `none` does not fit: a real config
    args = ["fit", "--hf-config", str(cfg_path), "--seq", str(SEQ), "--batch", str(BATCH), "--hbm-gib", repr(hbm),
            "--param-dtype", "fp32", "--reserve", "0", "--budgets", "0.25", "--json", "--write", str(out)]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)  # --json: one JSON document, the recommendation as data
    written = xla_ckpt.load_config(str(out))
    assert written == xla_ckpt.load_config(data["recommended"]) and written.checkpoint
    assert data["recommended_policy"] in written.description
    assert out.read_text().startswith("# Written by python -m xla_ckpt fit --hf-config")
    # Nothing fits: nothing is written; a path that is not TOML is refused before any work.
    small = tmp_path / "small.toml"
    assert main(["fit", "--hf-config", str(cfg_path), "--seq", str(SEQ), "--hbm-gib", "0.000001",
                 "--budgets", "--write", str(small)]) == 1
    assert not small.exists() and "nothing written" in capsys.readouterr().err
    assert main(args[:-1] + [str(tmp_path / "ckpt.yaml")]) == 2
    assert "give a path ending in .toml" in capsys.readouterr().err


def test_fit_budgets_outside_the_range_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _llama().config.to_dict()
    for bad in (0, 1.5, -0.25):
        with pytest.raises(ValueError, match=r"fit: budgets are memory_budget fractions in \(0, 1\].*got " + repr(bad)):
            fit(cfg, seq=SEQ, hbm_gib=1, budgets=(0.25, bad))
    assert main(["fit", "--arch", "llama", "--hidden", "32", "--layers", "2", "--heads", "4", "--seq", "16",
                 "--hbm-gib", "1", "--budgets", "0.5", "0"]) == 2
    err = capsys.readouterr().err
    assert "in (0, 1]" in err and "got 0.0" in err


def test_fit_names_the_attention_kernel(roomy) -> None:  # noqa: ANN001
    assert roomy.attention == "math" and "attention: math, math SDPA" in str(roomy)
    assert "(assumed: no chip named; pass attention='flash'" in str(roomy)  # hbm_gib= names no chip
    flash = fit(_llama().config.to_dict(), seq=SEQ, batch=BATCH, hbm_gib=1.0, param_dtype="fp32", xla=False,
                budgets=(0.25,), reserve=0.0, attention="flash")
    assert "attention: flash, a fused kernel" in str(flash) and '"attention": "flash"' in flash.to_json()
    rows = {r.policy: r for r in flash.rows}
    math_rows = {r.policy: r for r in roomy.rows}
    assert rows["none"].activation_bytes < math_rows["none"].activation_bytes
    assert rows["full"].activation_bytes == math_rows["full"].activation_bytes  # only block inputs: no attention
    with pytest.raises(ValueError, match=r"fit: attention='pallas'; allowed: 'math', 'flash'"):
        fit(_llama().config.to_dict(), seq=SEQ, hbm_gib=1, attention="pallas")


def test_fit_names_the_device_forms(roomy) -> None:  # noqa: ANN001
    """cpu by default off a GPU chip (the forms the XLA band was measured against), cuda on one; device= overrides."""
    assert roomy.device == "cpu" and "device forms: cpu, eager CPU" in str(roomy)
    assert "(the default for this chip" in str(roomy)
    gpu = fit(_llama().config.to_dict(), seq=SEQ, batch=BATCH, chip="h100", param_dtype="fp32", budgets=())
    assert gpu.device == "cuda" and "device forms: cuda, eager CUDA, modelled" in str(gpu)
    assert '"device": "cuda"' in gpu.to_json()
    with pytest.raises(ValueError, match=r"fit: device='gpu'; allowed: 'cpu', 'xla', 'tpu', 'cuda'"):
        fit(_llama().config.to_dict(), seq=SEQ, hbm_gib=1, device="gpu")
