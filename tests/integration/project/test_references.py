"""Docstrings, comments and docs name files and modules that exist, and no machine's paths.

Text only (``tokenize`` for Python's comments and docstrings, the whole file for the rest), so it is fast
and runs in the fast tier. It reads:

- the Python of the library, the tests and the benchmarks (``xla_ckpt/``, ``tests/``, ``bench/``): comments
  and docstrings (every string on a line of its own), and the other strings for paths (an error message
  that names a file must name a real one, a benchmark writes to a repository folder, not a machine's);
- README.md, docs/*.md, tests/*.md, and the benchmarks' configs and recorded results (``bench/configs/``,
  ``bench/results/``): what a reader follows from a figure must exist. CHANGELOG.md is history and may
  name what is gone: it is not read.

A reference is a path under the repository (``xla_ckpt/_engine/replay.py``, ``tests/fuzz/test_fuzz.py``), a
module path inside the package (``_engine/replay.py``), a dotted name (``_record.replay_state.Fence``,
``xla_ckpt.policies.offload``), or one of the flat module names that each became a module of a layer
(``_replay_state``, ``_compiled.py``): those name nothing.

The same texts, and the build files (Makefile, .ci/run, pyproject.toml), say why the code is as it is today,
never its history: no "issue 31", "found by the fuzz", "a later session", "this wave". Our issue numbers and
how a bug was found go to CHANGELOG.md and git; another project's issue is cited by its link
(``pytorch/xla#3811``).
"""

from __future__ import annotations

from helpers import ROOT_DIR

import importlib
import io
import pathlib
import re
import tokenize
from typing import Iterator

import pytest

ROOT = pathlib.Path(ROOT_DIR)
PACKAGE = ROOT / "xla_ckpt"
LAYERS = ("_base", "_ops", "_record", "_policy", "_hooks", "_compile", "_engine", "_api", "_estimate", "_cli")
# The wheel ships policies/ as xla_ckpt/presets/ (pyproject's package-dir).
ALIASES = {"xla_ckpt/presets": "policies"}
# Where the benchmarks write (ignored by git, absent from a fresh clone): a file there is an output, never stale.
OUTPUT_DIRS = ("bench/out",)
# Other projects' files the docs cite where a peer test was ported from (docs/correctness.md).
UPSTREAM = frozenset({"tests/unit_tests/test_activation_checkpoint.py",  # torchtitan
                      "tests/api_test.py"})  # JAX
# Other projects' private module files the tests open by name (the engine's trace cost excludes torch's pytree).
UPSTREAM_FILES = frozenset({"_pytree.py"})
# Flat module names that name nothing: each is a module of a layer (``_replay`` -> ``_engine/replay.py``).
REMOVED = frozenset(
    "_apply _blocks _budget _chips _compat _compile_scope _compiled _compiled_fence _config _direct _dots "
    "_explain _external _fit _fit_cli _forward _hf _linear _liveness _modules _offload "
    "_offload_policies _params _plan _presets _recompute _replay _replay_state _report _retain "
    "_saved _scale _scan _tag _torch_args _wrap _xla _xla_state".split())

# History in prose: our issue numbers, how a bug was found, which wave or session did what.
HISTORY = re.compile(
    r"(?i)\bissues? #?\d+"
    r"|\bfound (?:by|in|with|trying|sweeping)\b[^.;:)]{0,40}?\b(?:fuzz|hunt|review|hand|CI)\b"
    r"|\b(?:this|a|the) (?:wave|session) before\b|\bthis (?:wave|session)\b|\ba later (?:session|hunt)\b"
    r"|\bused to (?:be|make|write|share|raise|keep)\b")
BUILD_FILES = ("Makefile", ".ci/run", "pyproject.toml")
MACHINE_PATH = re.compile(r"(?<![\w.$~])/(?:work|tmp|root|home|Users|mnt|opt|var/folders)/")
REPO_PATH = re.compile(r"(?<![\w/.-])((?:xla_ckpt|tests|bench|docs|policies)/[\w./-]*[\w/])")
OUTPUT_FLAG = re.compile(r"--[\w-]+[ =]$")  # `--json bench/results/tpu.json`: a file the command writes
LAYER_PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(LAYERS) + r")/[\w/]*\w\.py)\b")
PRIVATE_FILE = re.compile(r"(?<![\w/.-])(_\w+\.py)\b")
DOTTED = re.compile(r"(?<![\w./-])((?:xla_ckpt\.)?(?:" + "|".join(LAYERS) + r")(?:\.\w+)+)")
PUBLIC_DOTTED = re.compile(r"(?<![\w./-])(xla_ckpt(?:\.\w+)+)")
OLD_NAME = re.compile(r"(?<![\w./-])(_\w+)(?![\w/-])")


# This file's examples of stale references are stale on purpose.
SELF = pathlib.Path(__file__).resolve()


def _python_texts(folder: pathlib.Path) -> Iterator[tuple[str, int, str, bool]]:
    """(file, line, text, is_prose) for each comment and string of the Python under ``folder``; prose: a
    comment or a docstring-like string (one standing on its own line), as opposed to a string inside code."""
    for path in sorted(p for p in folder.rglob("*.py") if p.resolve() != SELF):
        name = str(path.relative_to(ROOT))
        prev = tokenize.NEWLINE
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.COMMENT:
                yield name, tok.start[0], tok.string, True
            elif tok.type == tokenize.STRING:
                alone = prev in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
                yield name, tok.start[0], tok.string, alone
            if tok.type not in (tokenize.COMMENT, tokenize.NL):
                prev = tok.type


def _library_texts() -> Iterator[tuple[str, int, str, bool]]:
    return _python_texts(PACKAGE)


def _doc_texts() -> Iterator[tuple[str, int, str, bool]]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield str(path.relative_to(ROOT)), 1, path.read_text(), True


def _test_and_bench_texts() -> Iterator[tuple[str, int, str, bool]]:
    yield from _python_texts(ROOT / "tests")
    yield from _python_texts(ROOT / "bench")
    pages = [*sorted((ROOT / "tests").rglob("*.md")), *sorted((ROOT / "bench").rglob("*.md")),
             *sorted((ROOT / "bench" / "configs").glob("*.json")), *sorted((ROOT / "bench" / "results").glob("*.json"))]
    for path in pages:
        yield str(path.relative_to(ROOT)), 1, path.read_text(), True


def _build_texts() -> Iterator[tuple[str, int, str, bool]]:
    for name in BUILD_FILES:
        yield name, 1, (ROOT / name).read_text(), True


def _lines(text: str, first: int) -> Iterator[tuple[int, str]]:
    for i, line in enumerate(text.split("\n")):
        yield first + i, line


def _exists(rel: str) -> bool:
    rel = rel.rstrip("/.")
    if any(rel == d or rel.startswith(d + "/") for d in OUTPUT_DIRS):
        return True
    for alias, real in ALIASES.items():
        if rel == alias or rel.startswith(alias + "/"):
            rel = real + rel[len(alias):]
    return (ROOT / rel).exists()


def _resolves(dotted: str) -> bool:
    """``_record.replay_state.Fence`` or ``xla_ckpt.policies.offload``: the longest importable module
    prefix, then attributes."""
    parts = dotted.split(".")
    if parts[0] != "xla_ckpt":
        parts.insert(0, "xla_ckpt")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def problems(texts) -> list[str]:
    basenames = {p.name for d in ("xla_ckpt", "tests", "bench") for p in (ROOT / d).rglob("*.py")}
    out = []
    for name, first, text, prose in texts:
        for line, s in _lines(text, first):
            where = f"{name}:{line}"
            for m in MACHINE_PATH.finditer(s):
                out.append(f"{where}: a machine's path ({s[m.start():m.start() + 40].split()[0]}); name a repository file")
            for m in REPO_PATH.finditer(s):
                if m.group(1) in UPSTREAM or OUTPUT_FLAG.search(s[:m.start()]):
                    continue
                if not _exists(m.group(1)):
                    out.append(f"{where}: {m.group(1)} does not exist")
            for m in LAYER_PATH.finditer(s):
                if not (PACKAGE / m.group(1)).is_file():
                    out.append(f"{where}: xla_ckpt/{m.group(1)} does not exist")
            for m in PRIVATE_FILE.finditer(s):
                if m.group(1) not in basenames and m.group(1) not in UPSTREAM_FILES:
                    out.append(f"{where}: no file {m.group(1)} (a module the layering moved? name its layer's path)")
            if not prose:
                continue
            for m in DOTTED.finditer(s):
                if not _resolves(m.group(1)):
                    out.append(f"{where}: {m.group(1)} does not resolve")
            for m in PUBLIC_DOTTED.finditer(s):
                if not _resolves(m.group(1)):
                    out.append(f"{where}: {m.group(1)} does not resolve")
            for m in OLD_NAME.finditer(s):
                if m.group(1) in REMOVED:
                    out.append(f"{where}: {m.group(1)} names no module (it is a module of a layer: see "
                               f"tests/integration/project/test_layers.py for the layers)")
    return out


def history(texts) -> list[str]:
    """Each line of prose (comments, docstrings, pages) that tells history instead of today's reason."""
    out = []
    for name, first, text, prose in texts:
        if not prose:
            continue
        for line, s in _lines(text, first):
            for m in HISTORY.finditer(s):
                out.append(f"{name}:{line}: {m.group(0)!r} is history: say why the code is so today "
                           "(issue numbers and how a bug was found go to CHANGELOG.md)")
    return out


def test_the_library_names_only_what_exists():
    found = problems(_library_texts())
    assert not found, "\n".join(found)


def test_the_docs_name_only_what_exists():
    found = problems(_doc_texts())
    assert not found, "\n".join(found)


def test_the_tests_and_benchmarks_name_only_what_exists():
    found = problems(_test_and_bench_texts())
    assert not found, "\n".join(found)


def test_the_tests_and_benchmarks_are_read():
    """The scope is what the checks above say: every folder, and recorded results among the pages."""
    names = {name for name, _, _, _ in _test_and_bench_texts()}
    assert {"tests/helpers.py", "tests/fuzz/test_fuzz.py", "tests/README.md", "bench/memory.py",
            "bench/results/memory.json", "bench/configs/llama3_8b.json"} <= names
    assert "tests/integration/project/test_references.py" not in names


def test_code_docs_and_build_files_tell_no_history():
    texts = [*_library_texts(), *_doc_texts(), *_test_and_bench_texts(), *_build_texts()]
    assert {"Makefile", "docs/compiled.md", "tests/fuzz_programs.py", "xla_ckpt/_api/outside.py"} <= {n for n, *_ in texts}
    found = history(texts)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text", [
    "# the replay's stand-ins (issue 20, item 2)",
    '"""Issue 15 item 2: the grandchild\'s name."""',
    "# a wrong gradient (found by the compiled fuzz)",
    "(found by ``XLA_CKPT_FUZZ=hunt``, seed 8)",
    "# found trying user programs by hand, a later session",
    "# CI time this wave: 55 min; a wave before: 44 min",
    "# one preset used to share one folder",
])
def test_history_is_found(text):
    assert history([("example.py", 1, text, True)]), text


@pytest.mark.parametrize("text", [
    "# torch_xla's scan needs a fresh process (pytorch/xla#3811)",
    "# every LlamaDecoderLayer, found by `blocks = true`",
    "# a Python side effect is an issue for Dynamo; the session's XLA device",
    "# used to prove work was or was not done",
])
def test_todays_reason_is_not_history(text):
    assert not history([("example.py", 1, text, True)]), history([("example.py", 1, text, True)])


@pytest.mark.parametrize("text", [
    "# fenced as in _replay_state.Fence",
    "# see ``_compiled``",
    "# the general replay (_replay.py)",
    "# facts in /work/shared/xla_cpu_facts.md",
    "# dump to /tmp/dump",
    "# see xla_ckpt/_engine/gone.py",
    "# see _engine/gone.py",
    "# see ``_record.replay_state.Nothing``",
    "# see xla_ckpt.policies.no_such_policy",
])
def test_a_stale_reference_is_found(text):
    assert problems([("example.py", 1, text, True)]), text


@pytest.mark.parametrize("text", [
    "# fenced as in ``_record.replay_state.Fence`` (xla_ckpt/_record/replay_state.py)",
    "# the general replay (``_engine/replay.py``); presets in xla_ckpt/presets/",
    "# tests/fuzz/test_fuzz.py, bench/memory.py, docs/correctness.md, xla_ckpt.policies.offload",
    "# a private helper ``_wrap_torch`` and $HOME/tmp/x are not module references",
    "python bench/memory.py --json bench/results/new.json (an output the command writes)",
    "make bench writes bench/out/headline.json (the ignored output folder)",
])
def test_a_current_reference_passes(text):
    assert not problems([("example.py", 1, text, True)]), problems([("example.py", 1, text, True)])
