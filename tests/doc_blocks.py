"""The documentation pages and their fenced code blocks, as the docs tests read them.

``pages()`` lists README.md and docs/*.md, the pages users read (not CHANGELOG.md, history); ``fences`` splits
a page into its fenced blocks; ``python_blocks`` makes one test parameter of each ```python block. Example::

    for line, lang, code in fences(pages()[0].read_text()): ...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import ROOT_DIR

ROOT = Path(ROOT_DIR)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # glob("*.md"): no subfolder of docs/


def fences(text: str) -> list[tuple[int, str, str]]:
    """(line of the opening fence, its language, the block's code) for each fenced block, in order."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^(`{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).strip(), i
        i += 1
        while i < len(lines) and lines[i].rstrip() != fence:
            i += 1
        if i == len(lines):
            raise AssertionError(f"line {start + 1}: fence {fence}{lang} is never closed")
        out.append((start + 1, lang, "\n".join(lines[start + 1:i])))
        i += 1
    return out


def python_blocks() -> list:
    """One ``pytest.param(name, code)`` per ```python block of the pages, marked ``xla`` / ``slow`` as it needs."""
    params = []
    for page in pages():
        for line, lang, code in fences(page.read_text()):
            if lang != "python":
                continue
            marks = []
            if "torch_xla" in code:
                marks.append(pytest.mark.xla)
            if "torch.compile(" in code:
                marks.append(pytest.mark.slow)  # inductor compiles for minutes on 2 shared cores
            name = f"{page.relative_to(ROOT)}:{line}"
            params.append(pytest.param(name, code, marks=marks, id=name))
    return params
