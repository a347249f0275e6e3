"""Every ```python block of README.md and docs/*.md runs, each in a fresh namespace.

A page added to docs/ is picked up without editing this file. A block that imports torch_xla gets the
``xla`` mark; one that compiles with inductor (`torch.compile`) the ``slow`` mark. A block not meant to run
is fenced ``text``, ``toml``, ``bash``...: an opening fence without a language is an error, so no code hides
in one.
"""

from __future__ import annotations

from doc_blocks import fences, pages, python_blocks
from helpers import ROOT_DIR

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(ROOT_DIR)


@pytest.mark.parametrize("name, code", python_blocks())
def test_python_block_runs(name, code, monkeypatch, xla_device_if_needed):
    monkeypatch.chdir(ROOT)  # blocks name files as a user in the checkout would: "policies/dots.toml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. the once-per-class HF cache notice
        exec(compile(code, name, "exec"), {"__name__": "__docs__"})


@pytest.fixture
def xla_device_if_needed(request):
    """The session's XLA device where the block is marked xla (skips cleanly without torch_xla)."""
    if request.node.get_closest_marker("xla"):
        return request.getfixturevalue("xla_device")
    return None


def test_every_page_is_collected_and_has_runnable_code():
    names = {p.name for p in pages()}
    expected = {"policies.md", "config.md", "correctness.md", "compiled.md", "budget_offload.md", "sharded.md",
                "benchmarks.md", "design.md", "choose.md", "README.md"}
    assert expected <= names, expected - names
    counted = {}
    for page in pages():
        counted[page.relative_to(ROOT).as_posix()] = sum(lang == "python" for _, lang, _ in fences(page.read_text()))
    assert counted["README.md"] >= 2 and len(python_blocks()) == sum(counted.values()) >= 12, counted


def test_every_opening_fence_names_its_language():
    for page in pages():
        for line, lang, _ in fences(page.read_text()):
            assert lang, f"{page.relative_to(ROOT)}:{line}: a fence without a language (```text for output)"


def test_fence_parser_sees_through_nested_and_unclosed_fences():
    text = "a\n````text\n```python\nnot run\n```\n````\n```python\nx = 1\n```\n"
    assert fences(text) == [(2, "text", "```python\nnot run\n```"), (7, "python", "x = 1")]
    with pytest.raises(AssertionError, match="never closed"):
        fences("```python\nx = 1\n")


def test_relative_links_point_to_files_that_exist():
    for page in pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"

