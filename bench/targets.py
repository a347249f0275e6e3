"""The project's step-time and compiled targets, read off a benchmark run (reported, not enforced).

Step times:
- XLA: host trace time of ``megatron_selective`` <= 1.2x of no checkpointing.
- CPU eager: step time of ``megatron_selective`` <= torch SAC's (same decisions), and ``dots`` <= 1.05x;
  beside it, ``dots`` against torch SAC with dots' decisions (what the decisions themselves cost).

XLA under ``torch.compile(backend="openxla")`` (the compiled rows of ``bench/compiled.py``):
compiled peak of ``megatron_selective`` <= 0.60x and of ``full`` <= 0.45x of compiled ``none``'s (exact
bytes); host trace of compiled ``megatron_selective`` <= 1.0x lazy ``none``'s; its step <= 1.05x
compiled ``none``'s.

Every time ratio is the median of per-round ratios (both steps from the same round), with its quartiles.
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


def _exact(v: float | None) -> dict[str, Any] | None:
    return None if v is None else {"median": v, "p25": v, "p75": v, "exact": True}


def compiled_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The compiled targets from the compiled rows (``bench/compiled.py``, after ``derive``).

    Example: ``compiled_targets(rows)[0]["met"]``.
    """
    by = {r["variant"]: r for r in rows if not r.get("error")}
    mega, full = by.get("openxla:megatron_selective", {}), by.get("openxla:full", {})
    goals = [("openxla peak: megatron_selective / compiled none", _exact(mega.get("peak_vs_compiled_none")), 0.60),
             ("openxla peak: full / compiled none", _exact(full.get("peak_vs_compiled_none")), 0.45),
             ("openxla host: megatron_selective / lazy none", mega.get("host_vs_lazy_none"), 1.0),
             ("openxla step: megatron_selective / compiled none", mega.get("step_vs_compiled_none"), 1.05)]
    return [{"target": name, "ratio": r, "limit": limit, "met": None if r is None else r["median"] <= limit}
            for name, r, limit in goals]


def lines(rows: list[dict[str, Any]]) -> list[str]:
    """One printable line per target."""
    out = []
    for t in rows:
        r = t["ratio"]
        got = ("not measured" if r is None else f"{r['median']:.3f} (exact bytes)" if r.get("exact")
               else f"{r['median']:.3f} [p25 {r['p25']:.3f}, p75 {r['p75']:.3f}]")
        verdict = "-" if t["met"] is None else ("met" if t["met"] else "MISSED")
        out.append(f"target {t['target']:50s} {got:36s} <= {t['limit']:.2f}: {verdict}")
    return out
