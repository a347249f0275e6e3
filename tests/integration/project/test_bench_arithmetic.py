"""The benchmarks' arithmetic on made-up samples (ratios, targets, verdicts, row selection) and the
compiled-peak parser: no benchmark runs here (``test_bench.py`` runs them end to end, quick configurations).
"""

from __future__ import annotations

from helpers import ROOT_DIR

import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = ROOT_DIR
sys.path.insert(0, os.path.join(ROOT, "bench"))  # bench/ is scripts, not a package

import compiled  # noqa: E402
import depth  # noqa: E402
import dropout  # noqa: E402
import memory  # noqa: E402
import targets  # noqa: E402
import timing  # noqa: E402
import xla_dump  # noqa: E402

def test_headline_selects_the_readme_rows_and_the_full_sweep_keeps_every_variant():
    """`make bench` (--headline) runs the default model with a few variants; `make bench-all` every one."""
    names = lambda a: [n for n, _ in memory._variants(a)]  # noqa: E731
    head = memory._args(["--headline"])
    assert (head.layers, head.d_model, head.rounds) == (4, 256, memory.HEADLINE_ROUNDS)
    assert names(head) == ["none", "torch_xla", "torch_sac", "xla_ckpt:dots", "xla_ckpt:megatron_selective",
                           "xla_ckpt:full", "xla_ckpt:budget=0.3"]
    full = memory._args([])
    presets = sorted(os.path.splitext(p)[0] for p in os.listdir(os.path.join(ROOT, "policies")) if p.endswith(".toml"))
    assert full.rounds == memory.ROUNDS and len(names(full)) == 3 + len(presets) - 1 + len(memory.BUDGETS) + 1
    assert "xla_ckpt:offload(dots_saveable)" in names(full) and "xla_ckpt:budget=0.9" in names(full)
    # An explicit flag wins over the headline's selection.
    assert not any("budget" in n for n in names(memory._args(["--headline", "--budgets"])))
    assert memory._args(["--headline", "--rounds", "4"]).rounds == 4


def test_headline_adds_the_compiled_xla_rows_on_xla_with_the_gpt_only():
    assert memory._args(["--headline"]).openxla == compiled.HEADLINE == ["none", "megatron_selective", "full",
                                                                          "budget=0.3"]
    assert memory._args([]).openxla == [] and memory._args(["--headline", "--openxla"]).openxla == []
    assert memory._args(["--headline", "--device", "cpu"]).openxla == []
    with pytest.raises(SystemExit):  # the probe compiles our GPT on XLA: a clear argparse error elsewhere
        memory._args(["--device", "cpu", "--openxla", "full"])


def test_headline_adds_the_dropout_rows_on_xla_with_the_gpt_only():
    assert memory._args(["--headline"]).dropout == dropout.HEADLINE == 0.1
    assert memory._args([]).dropout == 0.0 and memory._args(["--headline", "--dropout", "0"]).dropout == 0.0
    assert memory._args(["--headline", "--device", "cpu"]).dropout == 0.0
    for bad in (["--device", "cpu", "--dropout", "0.1"], ["--dropout", "1.5"], ["--model", "llama-hf", "--dropout", "0.1"]):
        with pytest.raises(SystemExit):  # it compares XLA's bytes with CPU's, on our GPT
            memory._args(bad)
    assert [n for n, _, _ in dropout.variants()] == ["dropout:none", "dropout:megatron_selective", "dropout:full"]


def test_dropout_rows_ratios_and_the_issue31_targets():
    """Made-up rows over two rounds: ratios to dropout none's, grads against its grads, the 1.05 bytes target."""
    rows = [{"variant": "dropout:none", "error": None, "saved_bytes": 400, "cpu_saved_bytes": 380,
             "xla_over_cpu": 400 / 380, "compiled_peak_bytes": 1000, "first_step_s": 3.0},
            {"variant": "dropout:megatron_selective", "error": None, "saved_bytes": 105, "cpu_saved_bytes": 100,
             "xla_over_cpu": 1.05, "compiled_peak_bytes": 600, "first_step_s": 4.0},
            {"variant": "dropout:full", "error": None, "saved_bytes": 30, "cpu_saved_bytes": 25,
             "xla_over_cpu": 1.2, "compiled_peak_bytes": 400, "first_step_s": 4.0}]
    ents = {"dropout:none": {"host_samples_s": [0.02, 0.04], "step_samples_s": [0.5, 1.0]},
            "dropout:megatron_selective": {"host_samples_s": [0.03, 0.06], "step_samples_s": [0.55, 1.1]},
            "dropout:full": {"error": "boom"}}
    grads = {"dropout:none": torch.zeros(2), "dropout:megatron_selective": torch.tensor([1e-9, -2e-9])}
    dropout.derive(rows, {"entries": ents}, grads)
    none, mega, full = rows
    assert mega["compiled_peak_ratio"] == 0.6 and mega["saved_ratio"] == pytest.approx(105 / 400)
    assert mega["host_vs_none"]["median"] == pytest.approx(1.5) and mega["step_vs_none"]["median"] == pytest.approx(1.1)
    assert mega["grad_max_abs_diff"] == pytest.approx(2e-9) and "grad_max_abs_diff" not in full
    assert full["timing_error"] == "boom" and "host_vs_none" not in full
    goals = {t["target"]: t["met"] for t in dropout.targets(rows)}
    assert goals == {"dropout bytes: megatron_selective XLA / CPU": True, "dropout bytes: full XLA / CPU": False}
    text = "\n".join(dropout.table(rows))
    assert "| dropout:megatron_selective | 0.00 | 0.00 | 1.050 |" in text and "note: dropout:full: boom" in text
    pol = os.path.join(ROOT, "policies")
    got = compiled.variants(["none", "full", "budget=0.3"], pol)
    assert got == [("openxla:none", None), ("openxla:full", os.path.join(pol, "full.toml")),
                   ("openxla:budget=0.3", {"checkpoint": [{"blocks": True, "budget": 0.3}]})]
    with pytest.raises(ValueError, match="'nosuch'.*megatron_selective"):
        compiled.variants(["nosuch"], pol)
    assert [compiled.lazy_twin(n) for n, _ in got] == ["none", "xla_ckpt:full", "xla_ckpt:budget=0.3"]


def _compiled_fake(mega_peak):
    """Made-up compiled rows over two rounds: megatron's host 0.5x lazy none's, its step 1.1x compiled none's."""
    lazy = [{"variant": "none", "compiled_peak_bytes": 200, "error": None},
            {"variant": "xla_ckpt:megatron_selective", "compiled_peak_bytes": 120, "error": None}]
    rows = [{"variant": "openxla:none", "compiled_peak_bytes": 250, "forward_peak_bytes": 240,
             "backward_peak_bytes": 250, "first_step_s": 9.0, "graphs": 1, "breaks": 0, "error": None},
            {"variant": "openxla:megatron_selective", "compiled_peak_bytes": mega_peak, "forward_peak_bytes": 100,
             "backward_peak_bytes": mega_peak, "first_step_s": 12.0, "graphs": 1, "breaks": 0, "error": None},
            {"variant": "openxla:full", "error": "probe exited 1: boom"}]
    ents = {"none": {"host_samples_s": [0.02, 0.04], "step_samples_s": [0.5, 1.0]},
            "openxla:none": {"host_samples_s": [0.01, 0.02], "step_samples_s": [0.4, 0.8]},
            "openxla:megatron_selective": {"host_samples_s": [0.01, 0.02], "step_samples_s": [0.44, 0.88]}}
    grads = {"none": torch.zeros(3), "openxla:megatron_selective": torch.tensor([0.0, 2e-9, -3e-9])}
    compiled.derive(rows, lazy, {"entries": ents}, grads)
    return rows


def test_compiled_rows_ratios_and_the_issue22_targets():
    none, mega, full = _compiled_fake(mega_peak=150)
    assert none["peak_vs_compiled_none"] == 1.0 and none["peak_vs_lazy_none"] == 1.25
    assert mega["peak_vs_compiled_none"] == 0.6 and mega["peak_vs_lazy_same"] == 1.25 and mega["peak_vs_lazy_none"] == 0.75
    assert mega["host_vs_lazy_none"]["median"] == pytest.approx(0.5)  # per round: 0.01/0.02 and 0.02/0.04
    assert mega["step_vs_compiled_none"]["median"] == pytest.approx(1.1)
    assert mega["grad_max_abs_diff"] == pytest.approx(3e-9) and "grad_max_abs_diff" not in full
    goals = {t["target"]: t for t in targets.compiled_targets([none, mega, full])}
    assert goals["openxla peak: megatron_selective / compiled none"]["met"] is True  # 0.60 <= 0.60
    assert goals["openxla peak: full / compiled none"]["met"] is None  # its probe failed: not measured
    assert goals["openxla host: megatron_selective / lazy none"]["met"] is True
    assert goals["openxla step: megatron_selective / compiled none"]["met"] is False  # 1.1 > 1.05
    text = "\n".join(targets.lines(list(goals.values())))
    assert "0.600 (exact bytes)" in text and "not measured" in text and "MISSED" in text
    # One byte over the limit misses the peak target.
    _, mega, _ = _compiled_fake(mega_peak=151)
    assert targets.compiled_targets([mega])[0]["met"] is False
    table = "\n".join(compiled.table([none, mega, full]))
    assert "| openxla:full | error: probe exited 1: boom |" in table and "0.50 [0.50, 0.50]" in table


def test_interleaved_order_alternates():
    assert timing.round_order(3, 0) == [0, 1, 2]
    assert timing.round_order(3, 1) == [2, 1, 0]
    assert timing.round_order(3, 2) == [0, 1, 2]


def test_summaries_and_per_round_ratios():
    s = timing.summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert (s["median"], s["p25"], s["p75"], s["min"], s["max"]) == (3.0, 2.0, 4.0, 1.0, 100.0)
    assert s["spread"] == pytest.approx(2.0 / 3.0)
    assert timing.summarize([5.0])["spread"] == 0.0
    # A load spike in round 2 slows both entries: the per-round ratio does not see it.
    assert timing.per_round_ratios([2.0, 20.0, 2.2], [1.0, 10.0, 1.0]) == [2.0, 2.0, 2.2]
    with pytest.raises(ValueError, match="rounds must match"):
        timing.per_round_ratios([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least one sample"):
        timing.summarize([])


def _depth_fake(slopes_ms):
    """Made-up worker and timing results: `none` grows linearly, `full` per `slopes_ms` per layer."""
    import argparse

    depths = [2, 4, 8, 16]
    a = argparse.Namespace(depths=depths)
    mem, ents = {}, {}
    for n in depths:
        spans = zip(depths, depths[1:], strict=False)
        extra = sum(s * (min(n, hi) - lo) for (lo, hi), s in zip(spans, slopes_ms, strict=True) if n > lo)
        for v, ms in (("none", 10 + 1.0 * n), ("xla_ckpt:full", 10 + 2.0 * 2 + extra),
                      ("xla_ckpt:megatron_selective", 10 + 2.0 * n)):
            mem[(n, v)] = {"compiled_peak_bytes": 1000 * n if v == "none" else 500 * n, "saved_bytes": 1,
                           "grad_max_abs_diff": 0.0}
            samples = [ms / 1e3, 2 * ms / 1e3]  # round 2 under twice the load
            ents[f"L{n}:{v}"] = {"host_samples_s": samples, "host": timing.summarize(samples),
                                 "step": timing.summarize([2 * x for x in samples])}
    return depth.analyse(a, mem, {"entries": ents})


def test_depth_flatness_verdict():
    rows, flat = _depth_fake([2.0, 2.0, 2.0])
    assert flat["none"]["flat"] and flat["xla_ckpt:megatron_selective"]["flat"] and flat["xla_ckpt:full"]["flat"]
    assert flat["xla_ckpt:full"]["slope_s_per_layer"]["8-16"] == pytest.approx(3e-3)  # median of 2 and 4 ms
    r = next(r for r in rows if r["layers"] == 8 and r["variant"] == "xla_ckpt:megatron_selective")
    assert r["peak_ratio"] == 0.5 and r["trace_ratio"] == pytest.approx(26 / 18)
    _, flat = _depth_fake([1.0, 2.0, 4.0])  # per-layer cost doubles with depth: said plainly
    assert flat["xla_ckpt:full"]["flat"] is False and flat["xla_ckpt:full"]["max_over_min"] == pytest.approx(4.0)
    assert "NOT flat" in depth.verdict_lines(flat)[1]


@pytest.mark.xla
def test_compiled_peak_parser_on_a_real_dump(tmp_path, xla_device):
    code = ("import torch, torch_xla; d = torch_xla.device(); x = torch.randn(64, 64, device=d); "
            "y = (x @ x).relu().sum(); torch_xla.sync()")
    env = {**os.environ, "PJRT_DEVICE": "CPU", "XLA_FLAGS": f"--xla_dump_to={tmp_path}"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300, capture_output=True)
    peaks = xla_dump.compiled_peaks(tmp_path)
    assert peaks
    for name, peak in peaks.items():
        text = (tmp_path / name).read_text()
        line = next(ln for ln in text.splitlines() if "Stack trace breakdown for peak usage" in ln)
        assert peak == int(re.sub(r"\D", "", line.split(":")[1])) and peak > 0
    # The 64x64 fp32 matmul output (16 KiB) is live at the peak of the graph that computes it.
    assert max(peaks.values()) >= 64 * 64 * 4


def test_parse_peak_bytes_separators():
    assert xla_dump.parse_peak_bytes("  Stack trace breakdown for peak usage: 8 131 592 bytes\n") == 8131592
    assert xla_dump.parse_peak_bytes("  Stack trace breakdown for peak usage: 272 bytes") == 272
    assert xla_dump.parse_peak_bytes("no such line") is None
