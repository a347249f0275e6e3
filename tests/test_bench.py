"""The memory benchmark end to end (quick configuration), and the compiled-peak parser on a real dump."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from xla_ckpt import _xla

ROOT = os.path.dirname(os.path.dirname(__file__))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _bench(tmp_path, device, *extra):
    out_json, out_png = tmp_path / f"{device}.json", tmp_path / f"{device}.png"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "memory.py"), "--quick", "--device", device,
         "--json", str(out_json), "--plot", str(out_png), *extra],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "variant" in proc.stdout  # the table
    doc = json.loads(out_json.read_text())
    assert out_png.read_bytes()[:8] == PNG_MAGIC
    return doc, {r["variant"]: r for r in doc["results"]}


def _check(doc, res, expected):
    assert set(res) == set(expected), set(res) ^ set(expected)
    env = doc["environment"]
    assert env["torch"] and env["device"] == doc["config"]["device"]
    ok = {k: r for k, r in res.items() if not r.get("error")}
    for r in ok.values():
        assert r["grad_max_abs_diff"] <= 1e-5, r  # fp32: agreement to rounding
        assert r["n_grads"] == r["n_params"]
        assert 0.0 <= r["recompute_share"] <= 1.0
        assert r["step_s"] > 0 and r["time_ratio"] > 0
    saved = {k: r["saved_bytes"] for k, r in ok.items()}
    assert saved["none"] > saved["xla_ckpt:megatron_selective"] > saved["xla_ckpt:full"], saved
    assert saved["none"] > saved["xla_ckpt:dots"] > saved["xla_ckpt:full"], saved
    return ok


def test_bench_cpu(tmp_path):
    doc, res = _bench(tmp_path, "cpu")
    presets = [os.path.splitext(p)[0] for p in os.listdir(os.path.join(ROOT, "policies")) if p.endswith(".toml")]
    expected = {"none", "torch_sac"} | {f"xla_ckpt:{p}" for p in presets if p != "none"}
    ok = _check(doc, res, expected)
    assert "torch_sac" in ok  # torch's SAC runs on eager devices
    assert set(ok) == expected  # every preset finds the blocks of our GPT (blocks = true): no error row


def test_bench_hf_architecture_by_name(tmp_path):
    """--model takes any architecture of xla_ckpt.hf_models, built from its default config."""
    doc, res = _bench(tmp_path, "cpu", "--model", "mistral", "--policies", os.path.join(ROOT, "policies", "full.toml"))
    assert doc["config"]["model"] == "mistral"
    ok = {k: r for k, r in res.items() if not r.get("error")}
    assert set(ok) == {"none", "torch_sac", "xla_ckpt:full"}, res
    for r in ok.values():
        assert r["grad_max_abs_diff"] <= 1e-5 and r["n_grads"] == r["n_params"], r
    assert ok["xla_ckpt:full"]["wrapped"] == 2
    saved = {k: r["saved_bytes"] for k, r in ok.items()}
    assert saved["none"] > saved["torch_sac"] > saved["xla_ckpt:full"], saved


@pytest.mark.xla
def test_bench_xla(tmp_path, xla_device):
    pols = [os.path.join(ROOT, "policies", f"{p}.toml") for p in ("full", "dots", "megatron_selective")]
    doc, res = _bench(tmp_path, "xla", "--policies", *pols)
    ok = _check(doc, res, {"none", "torch_xla", "torch_sac", "xla_ckpt:full", "xla_ckpt:dots",
                           "xla_ckpt:megatron_selective"})
    assert "torch_sac" not in ok and "torch" in res["torch_sac"]["error"]  # crashes on XLA: recorded
    assert all(r["compiled_peak_bytes"] > 0 for r in ok.values())
    assert doc["environment"]["torch_xla"]


@pytest.mark.xla
def test_compiled_peak_parser_on_a_real_dump(tmp_path, xla_device):
    code = ("import torch, torch_xla; d = torch_xla.device(); x = torch.randn(64, 64, device=d); "
            "y = (x @ x).relu().sum(); torch_xla.sync()")
    env = {**os.environ, "PJRT_DEVICE": "CPU", "XLA_FLAGS": f"--xla_dump_to={tmp_path}"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300, capture_output=True)
    peaks = _xla.compiled_peaks(tmp_path)
    assert peaks
    for name, peak in peaks.items():
        text = (tmp_path / name).read_text()
        line = next(ln for ln in text.splitlines() if "Stack trace breakdown for peak usage" in ln)
        assert peak == int(re.sub(r"\D", "", line.split(":")[1])) and peak > 0
    # The 64x64 fp32 matmul output (16 KiB) is live at the peak of the graph that computes it.
    assert max(peaks.values()) >= 64 * 64 * 4


def test_parse_peak_bytes_separators():
    assert _xla.parse_peak_bytes("  Stack trace breakdown for peak usage: 8 131 592 bytes\n") == 8131592
    assert _xla.parse_peak_bytes("  Stack trace breakdown for peak usage: 272 bytes") == 272
    assert _xla.parse_peak_bytes("no such line") is None
