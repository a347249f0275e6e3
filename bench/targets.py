"""The step-time targets of issue 13, read off an interleaved timing run (reported, not enforced).

- XLA: host trace time of ``megatron_selective`` <= 1.2x of no checkpointing.
- CPU eager: step time of ``megatron_selective`` <= torch SAC's (same decisions), and ``dots`` <= 1.05x;
  beside it, ``dots`` against torch SAC with dots' decisions (what the decisions themselves cost).

Every ratio is the median of per-round ratios (both steps from the same round), with its quartiles.
"""

from __future__ import annotations

from typing import Any

from timing import per_round_ratios, summarize

MEGATRON, DOTS = "xla_ckpt:megatron_selective", "xla_ckpt:dots"
SAC_DOTS = "torch_sac:dots"


def _ratio(timing: dict[str, Any], num: str, den: str, kind: str) -> dict[str, float] | None:
    ents = timing.get("entries", {})
    a, b = ents.get(num, {}).get(f"{kind}_samples_s"), ents.get(den, {}).get(f"{kind}_samples_s")
    return summarize(per_round_ratios(a, b)) if a and b else None


def targets(timing: dict[str, Any], device: str) -> list[dict[str, Any]]:
    """The targets that apply to ``device``: name, measured ratio summary (None if a side is missing), limit, met."""
    rows = []
    if device == "xla":
        rows.append(("XLA host trace: megatron_selective / none", _ratio(timing, MEGATRON, "none", "host"), 1.2))
    elif device == "cpu":
        rows.append(("CPU step: megatron_selective / torch_sac", _ratio(timing, MEGATRON, "torch_sac", "step"), 1.0))
        rows.append(("CPU step: dots / none", _ratio(timing, DOTS, "none", "step"), 1.05))
        rows.append(("CPU step: dots / torch_sac:dots", _ratio(timing, DOTS, SAC_DOTS, "step"), 1.0))
    return [{"target": name, "ratio": r, "limit": limit, "met": None if r is None else r["median"] <= limit}
            for name, r, limit in rows]


def lines(rows: list[dict[str, Any]]) -> list[str]:
    """One printable line per target."""
    out = []
    for t in rows:
        r = t["ratio"]
        got = "not measured" if r is None else f"{r['median']:.3f} [p25 {r['p25']:.3f}, p75 {r['p75']:.3f}]"
        verdict = "-" if t["met"] is None else ("met" if t["met"] else "MISSED")
        out.append(f"target {t['target']:45s} {got:36s} <= {t['limit']:.2f}: {verdict}")
    return out
