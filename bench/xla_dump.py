"""The compiled peak of XLA programs, read from an ``XLA_FLAGS=--xla_dump_to=DIR`` dump.

XLA writes one ``*buffer-assignment.txt`` per compiled program; its "Stack trace breakdown for peak
usage" line is the program's peak in bytes, deterministic (on XLA:CPU ``xm.get_memory_info`` reports
nothing). The benchmark, the test probes and the tests measure with it; the library never reads a dump,
so this lives here, beside its users (``bench/`` is scripts on ``sys.path``, not a package: the probes
and tests append this folder to ``sys.path`` and ``import xla_dump``).

Example:
    >>> # XLA_FLAGS=--xla_dump_to=dump python train_step.py
    >>> max(compiled_peaks("dump").values())
"""

from __future__ import annotations

import os
import re
from typing import Optional

__all__ = ["parse_peak_bytes", "compiled_peaks"]

# XLA prints the number with digit-group separators: "peak usage: 8 131 592 bytes".
_PEAK_RE = re.compile(r"Stack trace breakdown for peak usage:\s*([0-9][0-9 ,']*)\s*bytes")


def parse_peak_bytes(text: str) -> Optional[int]:
    """The compiled program's peak from one ``*buffer-assignment.txt`` dump, or None."""
    m = _PEAK_RE.search(text)
    return int(re.sub(r"[^0-9]", "", m.group(1))) if m else None


def compiled_peaks(dump_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Peak bytes per compiled graph found in an ``--xla_dump_to`` folder, keyed by file name."""
    out: dict[str, int] = {}
    for name in sorted(os.listdir(dump_dir)):
        if name.endswith("buffer-assignment.txt"):
            with open(os.path.join(dump_dir, name), encoding="utf-8", errors="replace") as f:
                peak = parse_peak_bytes(f.read())
            if peak is not None:
                out[name] = peak
    return out
