"""Every ```python block in docs/*.md runs as-is (CPU, seconds), each in a fresh namespace."""

from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        with open(path) as f:
            text = f.read()
        for i, m in enumerate(BLOCK.finditer(text)):
            line = text[: m.start()].count("\n") + 2
            out.append(pytest.param(path, line, m.group(1), id=f"{os.path.basename(path)}:{line}"))
    return out


def test_docs_have_examples():
    assert any(p.values[0].endswith("migrating.md") for p in _blocks())


@pytest.mark.parametrize("path, line, code", _blocks())
def test_python_block_runs(path, line, code):
    if "hf_models" in code:
        pytest.importorskip("transformers")
    # Compiled at its line in the file, so a traceback points into the document.
    exec(compile("\n" * (line - 1) + code, path, "exec"), {"__name__": "__docs__"})
