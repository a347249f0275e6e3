"""Where the benchmarks write, what the committed results hold, and what the plot shows.

`make bench` writes to bench/out/ (ignored by git) so a run leaves `git status` clean; the README's
figures come from bench/results/, updated on purpose (`make bench-publish`). Committed results name
repository files, never the folder of the machine that ran them. No benchmark runs here: the plot is
redrawn from the committed headline results (matplotlib only, about a second).
"""

from __future__ import annotations

from helpers import ROOT_DIR

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(ROOT_DIR)
sys.path.insert(0, str(ROOT / "bench"))  # bench/ is scripts, not a package

import memory  # noqa: E402
import memory_plot  # noqa: E402

BENCH_TARGETS = ("bench", "bench-all", "bench-cpu")
# The same pattern test_references.py applies to the docs: a machine's folder, not a repository file.
MACHINE_PATH = re.compile(r"(?<![\w.$~])/(?:work|tmp|root|home|Users|mnt|opt|var/folders)/")


def _recipe(target: str) -> list[str]:
    """The commands `make TARGET` would run (dry run; the install step's lines included)."""
    proc = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if "bench/" in line]


@pytest.mark.parametrize("target", BENCH_TARGETS)
def test_bench_targets_write_only_to_the_ignored_output_folder(target):
    lines = _recipe(target)
    assert lines, f"make -n {target} runs no bench/ script"
    written = [w for line in lines for w in re.findall(r"--(?:json|plot) (\S+)", line)]
    assert written, lines
    for path in written:
        assert path.startswith("bench/out/"), f"`make {target}` writes {path}: outside bench/out/"
    check = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "bench/out/headline.json"])
    assert check.returncode == 0, "bench/out/ is not ignored by git: `make bench` would leave git status dirty"


def test_publish_copies_outputs_over_the_committed_results(tmp_path):
    out = tmp_path / "out"
    cmd = ["make", "-n", "-C", str(ROOT), "bench-publish", f"BENCH_OUT={out}"]
    dry = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "bench/results/" in dry.stdout, dry.stdout + dry.stderr
    real = subprocess.run(cmd[:1] + cmd[2:], capture_output=True, text=True, timeout=60)
    assert real.returncode != 0 and "run make bench" in real.stdout, real.stdout  # nothing there yet: says what to do


def test_committed_results_name_no_machine_path():
    found = []
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if MACHINE_PATH.search(line):
                found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_portable_makes_checkout_paths_relative_and_leaves_the_rest():
    inside = os.path.join(memory.ROOT, "policies", "full.toml")
    doc = {"config": {"policies": [inside], "json": "bench/out/x.json"}, "rows": [{"config": inside, "n": 3}],
           "other": "/usr/lib/x", "none": None}
    assert memory.portable(doc) == {"config": {"policies": ["policies/full.toml"], "json": "bench/out/x.json"},
                                    "rows": [{"config": "policies/full.toml", "n": 3}], "other": "/usr/lib/x",
                                    "none": None}


def test_labels_are_words():
    assert memory_plot.label("none") == "no checkpointing"
    assert memory_plot.label("xla_ckpt:budget=0.3") == "memory_budget(0.3)"
    assert memory_plot.label("openxla:megatron_selective") == "megatron_selective (compiled)"
    assert memory_plot.label("xla_ckpt:full") == "full"
    assert "compiled peak memory" in memory_plot.MEMORY_LABELS["compiled_peak_bytes"]


def test_errored_variants_are_listed_not_dropped():
    rows = [{"variant": "none", "error": None}, {"variant": "torch_sac", "error": "AttributeError: no xla\nmore"}]
    comp = [{"variant": "openxla:full", "error": "probe exited 1: boom"}]
    assert memory_plot.errors(rows, comp) == ["torch SAC: AttributeError: no xla",
                                             "full (compiled): probe exited 1: boom"]


def test_the_committed_headline_plot_redraws_with_its_errors_noted(tmp_path, monkeypatch):
    """Redraw from the committed JSON; every figure text is captured: words on the axes, the better
    corner, the legend outside both panels, the errored torch SAC row named."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure

    doc = json.loads((ROOT / "bench" / "results" / "headline.json").read_text())
    assert any(r.get("error") for r in doc["results"]), "the headline records torch SAC's error on XLA"
    figs = []
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, *a, **k: (figs.append(self), save(self, *a, **k)))
    out = tmp_path / "headline.png"
    assert memory_plot.main([str(ROOT / "bench" / "results" / "headline.json"), str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = figs[-1]
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("torch SAC" in t and "errored" in t for t in texts), texts
    assert sum(t == "better" for t in texts) == 2, texts
    assert all("compiled peak memory" in ax.get_ylabel() for ax in fig.axes)
    assert not any(ax.get_legend() for ax in fig.axes), "a legend inside a panel covers points"
    assert len(fig.legends) == 1
    assert "megatron_selective (compiled)" in texts and "no checkpointing" in texts


def test_an_interrupted_benchmark_leaves_no_temporary_folder(tmp_path, monkeypatch):
    """The probes' dumps and gradients (about 190 MiB a run) go to a temporary folder, removed however the
    run ends: an interrupted `make bench` (Ctrl-C) does not leave it behind."""
    import tempfile

    def interrupted(a, variants, tmp):
        (Path(tmp) / "dump_none").mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(memory, "_measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        memory.main(["--device", "cpu"])
    assert list(tmp_path.iterdir()) == []
