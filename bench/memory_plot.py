"""memory.py's plot: memory against recompute share and against step-time ratio, Pareto front highlighted.

    plot(results, "compiled_peak_bytes", "out.png", "title", compiled=rows)   # rows: bench/compiled.py's
"""

from __future__ import annotations

from typing import Any


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
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if not r.get("error") and r.get(key)]
    panels = [("recompute_share", "recompute share of the step's FLOPs (%)", 100.0),
              ("time_ratio", "step time / no checkpointing (median per-round ratio, interleaved)", 1.0)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (xkey, xlabel, scale) in zip(axes, panels):
        pts = [(scale * r.get(xkey, 0.0), r[key] / 2**20, r["variant"]) for r in ok if r.get(xkey) is not None]
        budget = sorted((p for p in pts if "budget=" in p[2]), key=lambda p: p[1])  # by memory
        others = [p for p in pts if "budget=" not in p[2]]
        ax.scatter([p[0] for p in others], [p[1] for p in others], color="tab:gray")
        line = front(pts)
        ax.plot([p[0] for p in line], [p[1] for p in line], "-", color="tab:red", label="Pareto front")
        if budget:
            ax.plot([p[0] for p in budget], [p[1] for p in budget], "o--", color="tab:blue", label="memory_budget")
        comp = [(scale * r[xkey], r["compiled_peak_bytes"] / 2**20, r["variant"]) for r in compiled or []
                if not r.get("error") and r.get(xkey) is not None and r.get("compiled_peak_bytes")]
        if comp:
            ax.scatter([p[0] for p in comp], [p[1] for p in comp], color="tab:green", marker="s",
                       label="torch.compile(openxla): largest program")
        for x, m, n in pts:
            ax.annotate(n.replace("xla_ckpt:", ""), (x, m), textcoords="offset points", xytext=(4, 4), fontsize=7)
        for i, (x, m, n) in enumerate(comp):  # compiled none and an unmarked budget coincide: alternate offsets
            ax.annotate(n, (x, m), textcoords="offset points", xytext=(4, 4 - 11 * (i % 2)), fontsize=7)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(f"{key.replace('_bytes', '')} (MiB)")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
