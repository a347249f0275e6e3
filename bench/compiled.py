"""The headline's compiled-XLA rows: the GPT under ``torch.compile(backend="openxla")`` beside the lazy engine.

    python bench/memory.py --headline                 # adds openxla:none / megatron_selective / full / budget=0.3
    python bench/memory.py --openxla none full        # any presets, ``budget=F``, or ``--openxla`` for none

Per name, one fresh process (``bench/openxla_probe.py``: ``XLA_FLAGS`` is read once per process) gives
the compiled peak of each XLA program the step ran (forward and backward are two programs under
openxla; exact bytes from ``*buffer-assignment.txt``), the first step's wall time (trace + compile +
run), Dynamo's graphs and graph breaks, and the grads (compared with lazy ``none``'s). The step
times come from memory.py's one interleaved process (``bench/timing.py`` compiles these entries
there): host trace (step start until the sync call) as per-round ratios to lazy ``none``, and the
step as per-round ratios to compiled ``none``.

``memory_budget`` under compile is planned on the joint graph by the library's planner before torch's
min-cut (``xla_ckpt/_compile/budget.py``): the row says so. Example::

    rows = [probe(n, c, size, tmp) for n, c in variants(["none", "full"], policies_dir)]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from timing import per_round_ratios, summarize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PREFIX = "openxla:"
HEADLINE = ["none", "megatron_selective", "full", "budget=0.3"]
# How a budget row is made under compile: said beside it wherever it is printed.
BUDGET_NOTE = ("planned: memory_budget's region planned on the joint graph by xla_ckpt's planner before torch's "
               "min-cut, lowered to per-op marks, fenced (xla_ckpt/_compile/budget.py)")


def variants(names: list[str], policies_dir: str) -> list[tuple[str, Any]]:
    """``(row name, config)`` per name: ``none``, a preset in ``policies_dir``, or ``budget=F``.

    Args:
        names: what ``--openxla`` was given.
        policies_dir: the folder of preset files (``policies/``).
    Example: ``variants(["full"], "policies")`` -> ``[("openxla:full", ".../policies/full.toml")]``.
    """
    out: list[tuple[str, Any]] = []
    for n in names:
        if n == "none":
            out.append((PREFIX + n, None))
        elif n.startswith("budget="):
            out.append((PREFIX + n, {"checkpoint": [{"blocks": True, "budget": float(n.split("=", 1)[1])}]}))
        elif os.path.exists(path := os.path.join(policies_dir, f"{n}.toml")):
            out.append((PREFIX + n, os.path.abspath(path)))
        else:
            presets = sorted(os.path.splitext(f)[0] for f in os.listdir(policies_dir) if f.endswith(".toml"))
            raise ValueError(f"--openxla {n!r}: not 'none', 'budget=F' or a preset ({', '.join(presets)})")
    return out


def lazy_twin(name: str) -> str:
    """The lazy-engine row with the same policy: ``openxla:full`` -> ``xla_ckpt:full``, ``openxla:none`` -> ``none``."""
    n = name[len(PREFIX):]
    return "none" if n == "none" else f"xla_ckpt:{n}"


def probe(name: str, size: dict[str, Any], dump_dir: str, grads_path: str) -> dict[str, Any]:
    """One compiled row (peaks, first step, graphs) from ``bench/openxla_probe.py`` in a fresh process.

    Args:
        name: ``openxla:<none | preset | budget=F>``.
        size: the GPT's sizes (layers, d_model, heads, seq, batch, vocab, dtype).
        dump_dir: an empty folder for ``--xla_dump_to``.
        grads_path: where the probe saves every parameter grad, concatenated.
    Example: ``probe("openxla:full", {"layers": 4, ...}, "dump", "grads.pt")["compiled_peak_bytes"]``.
    """
    variant = name[len(PREFIX):].replace("budget=", "budget:")
    flags = [f for k in ("layers", "d_model", "heads", "seq", "batch", "vocab", "dtype")
             for f in (f"--{k.replace('_', '-')}", str(size[k]))]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, os.path.join(HERE, "openxla_probe.py"), variant, dump_dir, *flags,
                           "--grads", grads_path], capture_output=True, text=True, env=env, timeout=1800)
    row: dict[str, Any] = {"variant": name, "error": None}
    if name.startswith(PREFIX + "budget="):
        row["note"] = BUDGET_NOTE
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        row["error"] = f"probe exited {proc.returncode}: {tail[0][:200]}"
        return row
    p = json.loads(lines[-1])
    row.update(compiled_peak_bytes=p["peak"], forward_peak_bytes=p["forward_peak"],
               backward_peak_bytes=p["backward_peak"], programs=len(p["peaks"]), first_step_s=p["first_step_s"],
               graphs=p["graphs"], breaks=p["breaks"])
    return row


def derive(rows: list[dict[str, Any]], lazy: list[dict[str, Any]], timed: dict[str, Any],
           grads: dict[str, Any]) -> None:
    """Peak ratios (to compiled none, to the lazy twin), time ratios and grad differences, into ``rows``.

    Args:
        rows: the compiled rows (``probe``), timings merged (``timing.merge``).
        lazy: memory.py's lazy rows (``none`` among them).
        timed: the interleaved process's result: ``host_vs_lazy_none`` is the summary of per-round
            host-trace ratios to lazy ``none``, ``step_vs_compiled_none`` of step ratios to ``openxla:none``.
        grads: every parameter grad, concatenated, by row name: ``grad_max_abs_diff`` is against lazy ``none``.
    Example: ``derive(rows, results, timed, grads); rows[1]["peak_vs_compiled_none"]``.
    """
    peak = {r["variant"]: r.get("compiled_peak_bytes") for r in [*lazy, *rows] if not r.get("error")}
    ents = timed.get("entries", {})
    for r in rows:
        if r.get("error"):
            continue
        for key, ref in (("peak_vs_compiled_none", PREFIX + "none"), ("peak_vs_lazy_same", lazy_twin(r["variant"])),
                         ("peak_vs_lazy_none", "none")):
            r[key] = r["compiled_peak_bytes"] / peak[ref] if peak.get(ref) else None
        if r["variant"] in grads and "none" in grads:
            r["grad_max_abs_diff"] = float((grads[r["variant"]] - grads["none"]).abs().max())
        t = ents.get(r["variant"], {})
        for key, kind, ref in (("host_vs_lazy_none", "host", "none"), ("step_vs_compiled_none", "step", PREFIX + "none")):
            a, b = t.get(f"{kind}_samples_s"), ents.get(ref, {}).get(f"{kind}_samples_s")
            r[key] = summarize(per_round_ratios(a, b)) if a and b else None


def _q(s: dict[str, float] | None) -> str:
    return "-" if s is None else f"{s['median']:.2f} [{s['p25']:.2f}, {s['p75']:.2f}]"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The compiled rows as printable lines (a markdown table, as the docs show it)."""
    out = ["| variant | compiled peak MiB (fwd / bwd) | x compiled none | x lazy same policy | x lazy none | "
           "host ms | host x lazy none | step ms | step x compiled none | 1st s | graphs (breaks) | grad diff |",
           "|---" * 12 + "|"]
    mib = lambda n: "-" if n is None else f"{n / 2**20:.1f}"  # noqa: E731
    for r in rows:
        if r.get("error"):
            out.append(f"| {r['variant']} | error: {r['error']} |")
            continue
        t = r.get("timing") or {}
        host = f"{1e3 * t['host']['median']:.1f}" if t.get("host") else "-"
        step = f"{1e3 * t['step']['median']:.1f}" if t.get("step") else "-"
        diff = r.get("grad_max_abs_diff")
        out.append(
            f"| {r['variant']} | {mib(r['compiled_peak_bytes'])} ({mib(r['forward_peak_bytes'])} / "
            f"{mib(r['backward_peak_bytes'])}) | {_x(r.get('peak_vs_compiled_none'))} | {_x(r.get('peak_vs_lazy_same'))} | "
            f"{_x(r.get('peak_vs_lazy_none'))} | {host} | {_q(r.get('host_vs_lazy_none'))} | {step} | "
            f"{_q(r.get('step_vs_compiled_none'))} | {r['first_step_s']:.1f} | {r['graphs']} ({r['breaks']}) | "
            f"{'-' if diff is None else f'{diff:.1e}'} |")
    out += [f"note: {r['variant']}: {r['note']}" for r in rows if r.get("note")]
    return out
