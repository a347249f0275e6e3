"""The wheel carries the presets: apply(model, "megatron_selective") works from an install, outside the checkout."""

from __future__ import annotations

from helpers import ROOT_DIR

import glob
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # builds a wheel and installs it into a fresh venv

ROOT = ROOT_DIR

# Run from a folder with no checkout in sight, importing only the installed copy.
USE = """
import os, sys, torch, xla_ckpt
from torch import nn
assert xla_ckpt.__file__.startswith({site!r}), xla_ckpt.__file__
names = xla_ckpt.presets()
assert {{"none", "full", "dots", "megatron_selective", "names", "fsdp_xla"}} <= set(names), names
model = nn.Sequential(*[nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)) for _ in range(3)])
report = xla_ckpt.apply(model, "megatron_selective")
assert [w.name for w in report.wrapped] == ["0", "1", "2"], report
assert xla_ckpt.load_config("full").checkpoint[0].blocks
print("OK", xla_ckpt._base.presets.preset_dir())
"""


def test_wheel_ships_presets_usable_by_name(tmp_path):
    src = tmp_path / "src"
    # A copy, so the in-tree build leaves no build/ or egg-info in the checkout.
    for part in ("xla_ckpt", "policies"):
        shutil.copytree(os.path.join(ROOT, part), src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, f), src / f)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(pip + ["wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)], check=True,
                   capture_output=True, timeout=600, cwd=tmp_path)
    (wheel,) = glob.glob(str(tmp_path / "dist" / "*.whl"))
    site = tmp_path / "site"
    subprocess.run(pip + ["install", "--no-deps", "-q", "--target", str(site), wheel], check=True,
                   capture_output=True, timeout=600)
    assert (site / "xla_ckpt" / "presets" / "megatron_selective.toml").is_file()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PJRT_DEVICE": "CPU"}
    run = subprocess.run([sys.executable, "-c", USE.format(site=str(site))], cwd=outside, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("OK " + str(site / "xla_ckpt" / "presets")), run.stdout
    cli = subprocess.run([sys.executable, "-m", "xla_ckpt", "explain", "megatron_selective", "--layers", "2",
                          "--d-model", "32", "--seq", "8"], cwd=outside, env=env, capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert "2 modules checkpointed" in cli.stdout and "without checkpointing" in cli.stdout, cli.stdout
    listing = subprocess.run([sys.executable, "-m", "xla_ckpt", "presets"], cwd=outside, env=env, capture_output=True,
                             text=True, timeout=300)
    assert "megatron_selective" in listing.stdout and "fsdp_xla" in listing.stdout, listing.stdout + listing.stderr
