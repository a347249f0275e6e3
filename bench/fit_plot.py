"""Memory per chip vs recompute share for every policy, Llama-3-70B-shaped at seq 8192 (``fit``).

    python bench/fit_plot.py [--chip v5p --chips 64] [--out docs/estimate_70b.png --json bench/results/fit_70b.json]
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from xla_ckpt._estimate.chips import GIB  # noqa: E402
from xla_ckpt._estimate.fit import fit  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chip", default="v5p")
    p.add_argument("--chips", type=int, default=64)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "estimate_70b.png"))
    p.add_argument("--json", default=os.path.join(HERE, "results", "fit_70b.json"))
    a = p.parse_args()
    report = fit(os.path.join(HERE, "configs", "llama3_70b.json"), seq=a.seq, batch=1, chips=a.chips, chip=a.chip)
    print(report)
    with open(a.json, "w", encoding="utf-8") as f:
        f.write(report.to_json())
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    points: dict[tuple[float, int], list] = {}  # policies that keep and recompute the same share one label
    for r in report.rows:
        points.setdefault((r.recompute_share, r.total_bytes), []).append(r)
    for (share, total), rs in points.items():
        ax.scatter(100 * share, total / GIB, color="tab:green" if rs[0].fits else "tab:red")
        ax.annotate(" = ".join(r.policy for r in rs), (100 * share, total / GIB), fontsize=8,
                    xytext=(4, 3), textcoords="offset points")
    usable = report.hbm_bytes * (1 - report.reserve) / GIB
    ax.axhline(usable, color="k", linestyle="--", linewidth=1)
    ax.text(0, usable, f" usable HBM per {report.chip} chip ({usable:.1f} GiB)", va="bottom", fontsize=8)
    ax.axhline(report.static_bytes / GIB, color="gray", linestyle=":", linewidth=1)
    ax.text(0, report.static_bytes / GIB, " params + grads + optimizer + FSDP gather", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("recompute, % of the step's FLOPs without checkpointing")
    ax.set_ylabel("memory per chip, GiB (log)")
    band = f", activations x{report.band[1]:.2f} (XLA band)" if report.band else ""
    ax.set_title(f"Llama-3-70B shape, seq {report.seq}, batch 1/chip, {report.chips} x {report.chip}, FSDP{band}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
