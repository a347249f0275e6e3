"""``python -m xla_ckpt``: --help lists every subcommand, an unknown one is named with the valid ones (exit 2),
``presets`` prints just the presets."""

from __future__ import annotations

import subprocess
import sys

import xla_ckpt
from xla_ckpt.__main__ import _RUN, SUBCOMMANDS, main


def test_help_lists_every_subcommand():
    assert set(SUBCOMMANDS) == set(_RUN) == {"explain", "fit", "presets"}
    run = subprocess.run([sys.executable, "-m", "xla_ckpt", "--help"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    listed = [ln.split()[0] for ln in run.stdout.split("subcommands:")[1].strip().split("\n\n")[0].splitlines()]
    assert listed == list(SUBCOMMANDS), run.stdout


def test_unknown_subcommand_is_named_with_the_valid_ones(capsys):
    assert main(["fitt", "--seq", "8"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "unknown subcommand 'fitt'; valid subcommands: explain, fit, presets" in err, err
    assert main([]) == 2  # nothing given: the usage, on stderr
    assert "subcommands:" in capsys.readouterr().err


def test_presets_prints_just_the_presets(capsys):
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("presets (") and not any("usage" in ln for ln in lines)
    assert [ln.split()[0] for ln in lines[1:]] == list(xla_ckpt.presets())
    assert main(["presets", "extra"]) == 2


def test_subcommand_help_is_its_own(capsys):
    try:
        main(["fit", "--help"])
    except SystemExit as e:  # argparse's --help exits 0
        assert e.code == 0
    assert "python -m xla_ckpt fit" in capsys.readouterr().out
