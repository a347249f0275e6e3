"""The README states only what runs and what was measured.

- Its ```python blocks run in ``test_docs.py`` (the XLA quick start under the ``xla`` mark, on XLA:CPU);
  here: the three quick starts are there and the XLA one is marked.
- Every call written inline in its prose (``xla_ckpt.policies.memory_budget(0.3)``) resolves after a plain
  ``import xla_ckpt`` in a fresh process (an attribute another test imported must not hide a missing one),
  and a library call with literal arguments runs.
- The headline table's figures are those of the committed ``bench/results/headline.json``.
- Counts and lists it states come from the code: the presets, and the number of Hugging Face
  architectures wherever a page states one.
"""

from __future__ import annotations

from helpers import ROOT_DIR

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path


from doc_blocks import fences, pages, python_blocks

ROOT = Path(ROOT_DIR)
README = ROOT / "README.md"
MAX_LINES = 120  # what a newcomer reads in five minutes; reference text goes to docs/


def _prose(text: str) -> str:
    """The page without its fenced blocks."""
    out, inside = [], None
    for line in text.split("\n"):
        m = re.match(r"^(`{3,})", line)
        if inside is None and m:
            inside = m.group(1)
        elif inside is not None and line.rstrip() == inside:
            inside = None
        elif inside is None:
            out.append(line)
    return "\n".join(out)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def calls_in(code: str) -> list[tuple[str, str, bool]]:
    """(source of the call, dotted callee, whether its arguments are all literals) for each call in ``code``;
    code that is not Python (``make bench``) has none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            literal = True
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                try:
                    ast.literal_eval(arg)
                except ValueError:
                    literal = False
            out.append((ast.get_source_segment(code, node) or code, _dotted(node.func) or code, literal))
    return out


def inline_calls(text: str) -> list[tuple[str, str, bool]]:
    """``calls_in`` for every piece of inline code in the prose."""
    return [c for code in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", _prose(text)) for c in calls_in(code)]


# Runs in a fresh interpreter: resolves each callee from `import xla_ckpt` (and torch, torch_xla) alone.
_RESOLVER = r"""
import json, sys
import torch
import xla_ckpt
ns = {"torch": torch, "xla_ckpt": xla_ckpt}
out = []
for source, name, literal in json.loads(sys.argv[1]):
    root, *rest = name.split(".")
    if root == "torch_xla" and root not in ns:
        try:
            import torch_xla
            ns["torch_xla"] = torch_xla
        except ImportError:
            out.append("skipped: no torch_xla")
            continue
    obj = ns.get(root, getattr(xla_ckpt, root, getattr(xla_ckpt.policies, root, None)))
    if obj is None:
        out.append(f"{root} is not xla_ckpt, torch, torch_xla nor a name xla_ckpt or xla_ckpt.policies exports")
        continue
    for i, attr in enumerate(rest):
        if not hasattr(obj, attr):
            obj = None
            out.append(f"{'.'.join([root, *rest[:i]])} has no attribute {attr!r} after `import xla_ckpt`")
            break
        obj = getattr(obj, attr)
    if obj is None:
        continue
    if not callable(obj):
        out.append(f"{name} is not callable")
    elif literal and (root == "xla_ckpt" or root not in ns):
        try:
            eval(source, {**vars(xla_ckpt.policies), **vars(xla_ckpt), **ns})
            out.append("ran")
        except Exception as e:
            out.append(f"raised {type(e).__name__}: {e}")
    else:
        out.append("resolves")
print("RESULT " + json.dumps(out))
"""

# The checker's own example: what it must find wrong (prose, then a block it must skip).
BAD_EXAMPLE = ("Call `xla_ckpt.hf_models_gone.to_device(model, d)` or `xla_ckpt.policies.memory_budget(7)` "
               "or `no_such_helper(1)`; `make bench` and `(OpCall) -> Decision` are not calls.\n"
               "```python\nignored_in_a_block()\n```\n")


def _readme_block_calls() -> list[tuple[str, str, bool]]:
    return [(src, name, False) for _, lang, code in fences(README.read_text()) if lang == "python"
            for src, name, _ in calls_in(code) if name.startswith("xla_ckpt.")]


@functools.cache
def _resolved() -> dict[tuple[str, str, bool], str]:
    """Every call the tests below check, resolved in one fresh process (an import of torch costs seconds)."""
    calls = list(dict.fromkeys([*inline_calls(README.read_text()), *_readme_block_calls(),
                                *inline_calls(BAD_EXAMPLE)]))
    proc = subprocess.run([sys.executable, "-c", _RESOLVER, json.dumps(calls)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stderr[-3000:]
    return dict(zip(calls, json.loads(line[-1][len("RESULT "):]), strict=True))


def resolve(calls: list[tuple[str, str, bool]]) -> dict[str, str]:
    """Source of each call -> "ran", "resolves", "skipped: ..." or what is wrong."""
    results = _resolved()
    return {c[0]: results[c] for c in calls}


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines (at most {MAX_LINES}): move reference text to docs/"


def test_the_three_quick_starts_run_in_test_docs_and_the_xla_one_on_xla():
    blocks = [p for p in python_blocks() if p.values[0].startswith("README.md:")]
    codes = [p.values[1] for p in blocks]
    assert any("LlamaForCausalLM" in c and "torch_xla" not in c for c in codes), "the Hugging Face quick start"
    assert any("checkpointed(" in c for c in codes), "the own-block quick start"
    xla = [p for p in blocks if "torch_xla" in p.values[1]]
    assert xla and all(any(m.name == "xla" for m in p.marks) for p in xla), "the XLA quick start, marked xla"
    assert any("xla_ckpt.hf_models.to_device" in p.values[1] for p in xla)
    assert not any(any(m.name == "slow" for m in p.marks) for p in blocks), "the quick starts run in the fast tier"


def test_every_inline_call_in_the_readme_resolves_after_import_xla_ckpt():
    calls = inline_calls(README.read_text())
    assert any(name == "xla_ckpt.policies.memory_budget" for _, name, _ in calls), calls
    results = resolve(calls)
    bad = {s: r for s, r in results.items() if r not in ("ran", "resolves") and not r.startswith("skipped")}
    assert not bad, bad
    assert results["xla_ckpt.policies.memory_budget(0.3)"] == "ran"


def test_every_library_call_in_the_readmes_blocks_resolves_after_import_xla_ckpt():
    """The blocks run in test_docs.py inside the test session, where another test may have imported a
    submodule (``xla_ckpt.hf_models``) that a user's plain ``import xla_ckpt`` does not give: a fresh process."""
    calls = _readme_block_calls()
    assert any(name == "xla_ckpt.hf_models.to_device" for _, name, _ in calls), calls
    bad = {s: r for s, r in resolve(calls).items() if r != "resolves"}
    assert not bad, bad


def test_inline_call_checker_finds_what_does_not_resolve():
    calls = inline_calls(BAD_EXAMPLE)
    assert [n for _, n, _ in calls] == ["xla_ckpt.hf_models_gone.to_device", "xla_ckpt.policies.memory_budget",
                                         "no_such_helper"], calls
    results = resolve(calls)
    assert "no attribute 'hf_models_gone'" in results["xla_ckpt.hf_models_gone.to_device(model, d)"]
    assert results["xla_ckpt.policies.memory_budget(7)"].startswith("raised")
    assert "not xla_ckpt" in results["no_such_helper(1)"]


def test_the_presets_the_readme_names_are_the_librarys():
    import xla_ckpt

    m = re.search(r"The presets are (.+?): `python -m xla_ckpt", _prose(README.read_text()), re.S)
    assert m, "README: the sentence that names the presets"
    named = set(re.findall(r"`(\w+)`", m.group(1)))
    assert named == set(xla_ckpt.presets()), (named, sorted(xla_ckpt.presets()))


# "22 architectures", "the 22-architecture table"; "the other 13 architectures" is a subset, not a count.
COUNT = re.compile(r"(?<!other )\b(\d+)(?:-| )(?:Hugging Face |HF )?architectures?\b")


def test_architecture_counts_on_every_page_are_the_librarys():
    from xla_ckpt.hf_models import ARCHS

    wrong = []
    for page in pages():
        for m in re.finditer(COUNT, _prose(page.read_text())):
            if int(m.group(1)) != len(ARCHS):
                wrong.append(f"{page.relative_to(ROOT)}: {m.group(0)!r} (xla_ckpt.hf_models.ARCHS has {len(ARCHS)})")
    assert not wrong, "\n".join(wrong)


def _variant(label: str) -> str:
    label = label.strip().strip("`")
    fixed = {"no checkpointing": "none", "torch_xla.utils.checkpoint": "torch_xla",
             "torch selective checkpointing": "torch_sac"}
    if label in fixed:
        return fixed[label]
    m = re.fullmatch(r"memory_budget\(([\d.]+)\)", label)
    return f"xla_ckpt:budget={m.group(1)}" if m else f"xla_ckpt:{label}"


def test_the_headline_table_is_the_committed_results():
    doc = json.loads((ROOT / "bench" / "results" / "headline.json").read_text())
    by = {r["variant"]: r for r in doc["results"]}
    text = README.read_text()
    section = text[text.index("## The headline numbers"):text.index("## Read more")]
    rows = [line for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| variant", "| ---"))]
    assert len(rows) == len(doc["results"]), rows
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        r = by[_variant(cells[0])]
        if r.get("error"):
            assert "error" in cells[1] and cells[1].split("`")[1] in r["error"], (line, r["error"])
            continue
        ratio = r["timing"]["step_ratio"]
        step = "1.00" if r["variant"] == "none" else f"{ratio['median']:.2f} [{ratio['p25']:.2f}, {ratio['p75']:.2f}]"
        want = [f"{r['saved_bytes'] / 2**20:.2f}", f"{r['compiled_peak_bytes'] / 2**20:.2f}",
                f"{r['compiled_peak_ratio']:.2f}", step]
        assert cells[1:] == want, (line, want)
    worst = max(r["grad_max_abs_diff"] for r in doc["results"] if not r.get("error"))
    assert f"to {worst:.1e}" in section, worst
    comp = {r["variant"]: r for r in doc["compiled"]}
    for name in ("megatron_selective", "full"):
        assert f"`{name}` {'peaks ' if name == 'megatron_selective' else ''}at " \
               f"{comp['openxla:' + name]['peak_vs_compiled_none']:.2f}x" in " ".join(section.split()), name
    t = doc["timing"]
    assert f"load {t['loadavg_before']:.1f}-{t['loadavg_after']:.1f}" in section


def _step(r: dict) -> str:
    s = r["timing"]["step_ratio"]
    return "1.00" if r["variant"] == "none" else f"{s['median']:.2f} [{s['p25']:.2f}, {s['p75']:.2f}]"


def test_choose_a_policy_states_the_committed_results():
    """docs/choose.md's figures: the side-by-side table (memory.json, memory_cpu.json), the compiled
    sentence (headline.json) and the long-sequence table (korthikanti.json)."""
    results = ROOT / "bench" / "results"
    xla = {r["variant"]: r for r in json.loads((results / "memory.json").read_text())["results"]}
    cpu = {r["variant"]: r for r in json.loads((results / "memory_cpu.json").read_text())["results"]}
    text = (ROOT / "docs" / "choose.md").read_text()
    section = text[text.index("## Measured side by side"):text.index("## The situations")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 6, rows
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = _variant(cells[0])
        name = "none" if name == "xla_ckpt:none" else name
        a, b = xla[name], cpu[name]
        want = [f"{a['saved_bytes'] / 2**20:.2f}",
                f"{a['compiled_peak_bytes'] / 2**20:.2f} ({a['compiled_peak_ratio']:.2f}x)",
                f"{100 * a.get('recompute_share', 0):.1f}", _step(a), f"{b['saved_bytes'] / 2**20:.2f}", _step(b)]
        assert cells[1:] == want, (line, want)
    flat = " ".join(text.split())
    comp = {r["variant"]: r for r in json.loads((results / "headline.json").read_text())["compiled"]}
    for label, key in (("`megatron_selective`", "megatron_selective"), ("`full`", "full"),
                       ("`memory_budget(0.3)`", "budget=0.3")):
        r = comp["openxla:" + key]
        assert re.search(rf"{re.escape(label)} {r['peak_vs_compiled_none']:.2f}x (the peak )?at "
                         rf"{r['step_vs_compiled_none']['median']:.2f}x", flat), label
    kor = json.loads((results / "korthikanti.json").read_text())["rows"]
    for attention in ("math", "flash"):
        by = {r["policy"]: r for r in kor if r["device"] == "cpu" and r["attention"] == attention}
        line = next(x for x in text.splitlines() if x.startswith(f"| {attention} "))
        assert f"| {by['none']['estimate_sbh']:.1f} sbh |" in line, line
        for p in ("megatron_selective", "full"):
            assert f"{by[p]['estimate_sbh']:.1f} sbh, {by[p]['recompute_flops'] / 1e9:.1f} GFLOP" in line, (line, p)


def test_changelog_entries_are_one_line_each():
    """One line per change (git keeps the details): no entry continues on an indented line."""
    lines = (ROOT / "CHANGELOG.md").read_text().split("\n")
    assert sum(line.startswith("- ") for line in lines) >= 20
    continued = [f"CHANGELOG.md:{i + 1}" for i, line in enumerate(lines)
                 if line.startswith("  ") and line.strip() and i and lines[i - 1].strip()]
    assert not continued, continued


def _ratio(r: dict) -> str:
    return f"{r['median']:.2f} [{r['p25']:.2f}, {r['p75']:.2f}]"


def test_the_benchmarks_page_headline_tables_are_the_committed_results():
    """docs/benchmarks.md's lazy and compiled headline tables against bench/results/headline.json."""
    doc = json.loads((ROOT / "bench" / "results" / "headline.json").read_text())
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = text[text.index("## The headline"):text.index("**Dropout 0.1**")]
    by = {r["variant"]: r for r in doc["results"]}
    comp = {r["variant"].removeprefix("openxla:"): r for r in doc["compiled"]}
    lazy_rows = compiled_rows = 0
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| variant", "| ---", "| compiled")):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if "peak MiB (fwd / bwd)" in section[:section.index(line)]:  # the compiled table
            key = {"no checkpointing": "none"}.get(cells[0], _variant(cells[0]).removeprefix("xla_ckpt:"))
            r = comp[key]
            mib = lambda b: f"{b / 2**20:.1f}"  # noqa: E731
            peaks = (mib(r["compiled_peak_bytes"]), mib(r["forward_peak_bytes"]), mib(r["backward_peak_bytes"]))
            want = ["{} ({} / {})".format(*peaks),
                    f"{r['peak_vs_compiled_none']:.2f}", _ratio(r["host_vs_lazy_none"]),
                    "1.00" if key == "none" else _ratio(r["step_vs_compiled_none"]), f"{r['first_step_s']:.1f}"]
            assert cells[1:] == want, (line, want)
            compiled_rows += 1
            continue
        r = by[_variant(cells[0])]
        if r.get("error"):
            assert cells[1].split("`")[1] in r["error"], line
            lazy_rows += 1
            continue
        t = r["timing"]
        none = r["variant"] == "none"
        want = [f"{r['saved_bytes'] / 2**20:.2f}", f"{r['compiled_peak_bytes'] / 2**20:.2f}",
                f"{r['compiled_peak_ratio']:.2f}", "1.00" if none else _ratio(t["step_ratio"]),
                "1.00" if none else _ratio(t["host_ratio"]),
                "0" if none else f"{r['grad_max_abs_diff']:.1e}"]
        assert cells[1:] == want, (line, want)
        lazy_rows += 1
    assert (lazy_rows, compiled_rows) == (len(doc["results"]), len(doc["compiled"]))
