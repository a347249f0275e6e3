"""memory.py's plot: memory against recompute share and against step time, Pareto front highlighted.

    plot(results, "compiled_peak_bytes", "out.png", "title", compiled=rows)   # rows: bench/compiled.py's
    python bench/memory_plot.py bench/results/headline.json bench/out/headline.png   # redraw from a results file

Read at a glance: axes in words, the better corner (less memory, less time) marked, the legend under the
panels (never over a point), and every variant that raised listed under the figure with its error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

# What each memory figure is, in words, for the y-axis.
MEMORY_LABELS = {"compiled_peak_bytes": "compiled peak memory of the step (MiB)",
                 "device_peak_bytes": "device peak memory of the step (MiB)",
                 "saved_bytes": "bytes kept for backward (MiB)"}
# The benchmark's variant names, as a reader knows them.
NAMES = {"none": "no checkpointing", "torch_xla": "torch_xla checkpoint", "torch_sac": "torch SAC",
         "torch_sac:dots": "torch SAC (dots' choices)"}


def label(variant: str) -> str:
    """A variant's name on the figure.

    Example: ``label("xla_ckpt:budget=0.3")`` -> ``"memory_budget(0.3)"``; ``label("openxla:full")`` ->
    ``"full (compiled)"``.
    """
    if variant in NAMES:
        return NAMES[variant]
    if variant.startswith("openxla:"):
        return label(variant[len("openxla:"):]) + " (compiled)"
    name = variant.removeprefix("xla_ckpt:")
    if name.startswith("budget="):
        return f"memory_budget({name[len('budget='):]})"
    return name


def front(pts: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Pareto front: no other point is both lower on x and smaller.

    Example: ``front([(1, 5, "a"), (2, 3, "b"), (3, 4, "c")])`` -> ``[(1, 5, "a"), (2, 3, "b")]``.
    """
    out, best = [], float("inf")
    for x, m, n in sorted(pts):
        if m < best:
            out.append((x, m, n))
            best = m
    return out


def _merged(pts: list[tuple[float, float, str]]) -> list[tuple[float, float, list[str]]]:
    """Points at the same place (``offload(dots_saveable)`` keeps what ``dots`` keeps on one memory space)
    as one point with every name, in memory order, so their labels are one label, not a smudge."""
    out: dict[tuple[float, float], list[str]] = {}
    for x, m, n in pts:
        out.setdefault((round(x, 6), round(m, 3)), []).append(n)
    return [(x, m, names) for (x, m), names in sorted(out.items(), key=lambda kv: (kv[0][1], kv[0][0]))]


def errors(results: list[dict[str, Any]], compiled: list[dict[str, Any]] | None = None) -> list[str]:
    """One line per variant that raised, for the note under the figure.

    Example: ``errors([{"variant": "torch_sac", "error": "boom"}])`` -> ``["torch SAC: boom"]``.
    """
    return [f"{label(r['variant'])}: {str(r['error']).splitlines()[0][:110]}"
            for r in [*results, *(compiled or [])] if r.get("error")]


def plot(results: list[dict[str, Any]], key: str, path: str, title: str,
         compiled: list[dict[str, Any]] | None = None) -> None:
    """Write the two-panel PNG.

    Args:
        results: memory.py's rows (the lazy engine and the alternatives).
        key: the memory figure to plot (``compiled_peak_bytes``, ``device_peak_bytes`` or ``saved_bytes``).
        path: the PNG to write.
        title: the model and device, above both panels.
        compiled: the compiled-XLA rows, drawn apart (green squares) in the step-time panel: their
            ``time_ratio`` is to lazy ``none`` too; they have no FLOP count (nothing runs eagerly).

    Example: ``plot(doc["results"], "compiled_peak_bytes", "out.png", "gpt on xla", compiled=doc["compiled"])``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if not r.get("error") and r.get(key)]
    panels = [("recompute_share", "recompute: share of the step's FLOPs spent recomputing (%)", 100.0),
              ("time_ratio", "step time relative to no checkpointing (1.0 = same time)", 1.0)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6))
    handles: dict[str, Any] = {}
    for ax, (xkey, xlabel, scale) in zip(axes, panels, strict=True):
        pts = [(scale * r.get(xkey, 0.0), r[key] / 2**20, r["variant"]) for r in ok if r.get(xkey) is not None]
        budget = sorted((p for p in pts if "budget=" in p[2]), key=lambda p: p[1])  # by memory
        others = [p for p in pts if "budget=" not in p[2]]
        handles["variant"] = ax.scatter([p[0] for p in others], [p[1] for p in others], color="tab:gray")
        line = front(pts)
        pareto = f"Pareto front{' of the uncompiled variants' if compiled else ''} (none better on both axes)"
        handles[pareto] = ax.plot(
            [p[0] for p in line], [p[1] for p in line], "-", color="tab:red")[0]
        if budget:
            handles["memory_budget(fraction)"] = ax.plot([p[0] for p in budget], [p[1] for p in budget], "o--",
                                                         color="tab:blue")[0]
        comp = [(scale * r[xkey], r["compiled_peak_bytes"] / 2**20, r["variant"]) for r in compiled or []
                if not r.get("error") and r.get(xkey) is not None and r.get("compiled_peak_bytes")]
        if comp:
            handles["torch.compile(backend='openxla'): peak of its larger program"] = ax.scatter(
                [p[0] for p in comp], [p[1] for p in comp], color="tab:green", marker="s")
        xs = [p[0] for p in [*pts, *comp]]
        right = max(xs) - 0.2 * (max(xs) - min(xs))  # labels of the rightmost points go to their left
        for i, (x, m, names) in enumerate(_merged([*pts, *comp])):
            # neighbours in memory alternate above and below their point, so close labels do not overlap
            dx, ha = (-5, "right") if x > right else (5, "left")
            ax.annotate(" = ".join(label(n) for n in names), (x, m), textcoords="offset points",
                        xytext=(dx, 4 if i % 2 == 0 else -10), fontsize=7, ha=ha)
        ax.annotate("better", xy=(0.015, 0.015), xytext=(0.1, 0.1), xycoords="axes fraction",
                    textcoords="axes fraction", fontsize=9, color="tab:green", ha="center", va="center",
                    arrowprops={"arrowstyle": "->", "color": "tab:green", "lw": 1.5})
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(MEMORY_LABELS.get(key, key), fontsize=8)
        ax.margins(x=0.2, y=0.16)  # keeps the better corner clear of points
    fig.suptitle(title + "  (lower left is better: less memory, less recompute or time)", fontsize=9)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, 0.06))
    failed = errors(results, compiled)
    note = ("errored, not plotted: " + "; ".join(failed)) if failed else "every variant ran"
    fig.text(0.5, 0.015, note, ha="center", fontsize=8, color="tab:red" if failed else "black")
    fig.tight_layout(rect=(0, 0.12, 1, 0.96))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _title(doc: dict[str, Any]) -> str:
    c = doc["config"]
    return (f"{c['model']} L={c['layers']} d={c['d_model']} h={c['heads']} seq={c['seq']} batch={c['batch']} "
            f"{c['dtype']} on {c['device']}")


def main(argv: list[str]) -> int:
    """Redraw a PNG from a results file that memory.py wrote: ``memory_plot.py RESULTS.json OUT.png``."""
    if len(argv) != 2:
        print("usage: python bench/memory_plot.py RESULTS.json OUT.png", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        doc = json.load(f)
    os.makedirs(os.path.dirname(os.path.abspath(argv[1])), exist_ok=True)
    key = {"xla": "compiled_peak_bytes", "cuda": "device_peak_bytes"}.get(doc["config"]["device"], "saved_bytes")
    plot(doc["results"], key, argv[1], _title(doc), compiled=doc.get("compiled"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
