"""Depth sweep on XLA:CPU: does the cost of checkpointing grow with the number of layers?

    python bench/depth.py                                  # 2, 4, 8, 16 layers of a small GPT
    python bench/depth.py --quick --json d.json --plot d.png

For none / full / megatron_selective at each depth: the compiled peak of the training step (one fresh
process per variant and depth, bench/worker.py with --xla_dump_to, as memory.py does) and its ratio
to none at the same depth; and the host trace time (step start until torch_xla.sync() is called) of
every (depth, variant), all timed interleaved in ONE process (bench/timing.py), so depths compare too.

Per-layer cost: trace time / layers, and the slope between consecutive depths (median over rounds of
each round's (t(L2) - t(L1)) / (L2 - L1)): fixed costs (embedding, loss, launch) cancel in the slope.
The sweep calls a variant's cost per layer flat when its largest slope is within FLAT_TOLERANCE of
its smallest, and prints the verdict either way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from typing import Any

import memory
import timing

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VARIANTS = ("none", "xla_ckpt:full", "xla_ckpt:megatron_selective")
# Slopes are differences of noisy timings on a shared machine: 1.3x apart still counts as flat;
# a per-layer cost that grows with depth (e.g. a scan over all earlier layers) doubles across 2..16.
FLAT_TOLERANCE = 1.3


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depths", type=int, nargs="+", default=[2, 4, 8, 16])
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--rounds", type=int, default=10, help="interleaved timing rounds")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per entry before the rounds")
    p.add_argument("--quick", action="store_true", help="depths 1 and 2 of a tiny model (tests, smoke runs)")
    p.add_argument("--json", help="write results (with the environment) to this path")
    p.add_argument("--plot", help="write a PNG: trace time per layer and compiled peak vs depth")
    a = p.parse_args(argv)
    if a.quick:
        a.depths, a.d_model, a.heads, a.seq, a.batch, a.vocab = [1, 2], 32, 2, 16, 2, 64
        a.rounds, a.warmup = min(a.rounds, 3), 1
    if a.rounds < 1 or a.warmup < 1:
        p.error(f"--rounds and --warmup must be >= 1 (got {a.rounds}, {a.warmup}): XLA compiles in the warm-up")
    if sorted(set(a.depths)) != a.depths or a.depths[0] < 1:
        p.error(f"--depths must be increasing positive layer counts, got {a.depths}")
    return a


def _config(variant: str) -> str | None:
    name = variant.split(":", 1)[1] if ":" in variant else None
    return os.path.join(ROOT, "policies", f"{name}.toml") if name else None


def _model(a: argparse.Namespace, layers: int) -> dict[str, Any]:
    return {"model": "gpt", "layers": layers, "d_model": a.d_model, "heads": a.heads, "seq": a.seq,
            "batch": a.batch, "vocab": a.vocab, "dtype": a.dtype}


def _memory(a: argparse.Namespace, tmp: str) -> dict[tuple[int, str], dict[str, Any]]:
    """Compiled peak, saved bytes and grad agreement: one fresh worker process per (depth, variant)."""
    import torch

    out = {}
    for layers in a.depths:
        grads = {}
        for v in VARIANTS:
            tag = f"L{layers}_{v.replace(':', '_')}"
            spec = {"variant": v, "config": _config(v), "device": "xla", **_model(a, layers), "steps": 1,
                    "dump_dir": os.path.join(tmp, "dump_" + tag), "grads_path": os.path.join(tmp, tag + ".pt")}
            print(f"depth {layers}: {v} (compiled peak, own process)", file=sys.stderr)
            r = memory._run_variant(spec)
            if not r.get("error"):
                grads[v] = torch.load(spec["grads_path"])
                r["grad_max_abs_diff"] = float((grads[v] - grads["none"]).abs().max()) if "none" in grads else None
            out[(layers, v)] = r
    return out


def _slopes(samples: dict[int, list[float]], depths: list[int]) -> dict[str, float]:
    """Median over rounds of the per-layer slope between consecutive depths, keyed 'L1-L2'."""
    out = {}
    for d1, d2 in zip(depths, depths[1:], strict=False):
        if d1 in samples and d2 in samples:
            per_round = [(b - c) / (d2 - d1) for b, c in zip(samples[d2], samples[d1], strict=True)]
            out[f"{d1}-{d2}"] = statistics.median(per_round)
    return out


def analyse(a: argparse.Namespace, mem: dict[tuple[int, str], dict[str, Any]],
            timed: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows per (depth, variant) and the per-variant flatness verdict."""
    rows, flat = [], {}
    ents = timed.get("entries", {})
    for v in VARIANTS:
        host: dict[int, list[float]] = {}
        for layers in a.depths:
            m, t = mem[(layers, v)], ents.get(f"L{layers}:{v}", {})
            base_m, base_t = mem[(layers, "none")], ents.get(f"L{layers}:none", {})
            row: dict[str, Any] = {"layers": layers, "variant": v, "error": m.get("error") or t.get("error"),
                                   "saved_bytes": m.get("saved_bytes"), "grad_max_abs_diff": m.get("grad_max_abs_diff"),
                                   "compiled_peak_bytes": m.get("compiled_peak_bytes")}
            if row["compiled_peak_bytes"] and base_m.get("compiled_peak_bytes"):
                row["peak_ratio"] = row["compiled_peak_bytes"] / base_m["compiled_peak_bytes"]
            if "host" in t:
                host[layers] = t["host_samples_s"]
                row.update(trace_s=t["host"]["median"], trace_spread=t["host"]["spread"],
                           trace_per_layer_s=t["host"]["median"] / layers, step_s=t["step"]["median"],
                           step_spread=t["step"]["spread"])
                if "host_samples_s" in base_t:
                    ratio = timing.per_round_ratios(t["host_samples_s"], base_t["host_samples_s"])
                    row["trace_ratio"] = statistics.median(ratio)
            rows.append(row)
        slopes = _slopes(host, a.depths)
        verdict: dict[str, Any] = {"slope_s_per_layer": slopes}
        if len(slopes) >= 2 and min(slopes.values()) > 0:
            verdict["max_over_min"] = max(slopes.values()) / min(slopes.values())
            verdict["flat"] = verdict["max_over_min"] <= FLAT_TOLERANCE
        else:
            verdict["flat"] = None  # too few depths, or a slope lost in noise (<= 0)
        flat[v] = verdict
    return rows, flat


def _mib(n: Any) -> str:
    return f"{n / 2**20:9.2f}" if n else f"{'-':>9s}"


def _f(x: Any, scale: float, width: int, digits: int) -> str:
    return f"{'-':>{width}s}" if x is None else f"{scale * x:{width}.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'layers':>6s} {'variant':28s} {'trace ms':>8s} {'IQR%':>5s} {'ms/layer':>8s} {'x none':>6s} "
            f"{'peak MiB':>9s} {'x none':>6s} {'step ms':>8s} {'grad diff':>9s}")
    lines = [head, "-" * len(head)]
    for r in sorted(rows, key=lambda r: (r["layers"], VARIANTS.index(r["variant"]))):
        if r.get("error"):
            lines.append(f"{r['layers']:6d} {r['variant']:28s} error: {r['error']}")
            continue
        lines.append(f"{r['layers']:6d} {r['variant']:28s} {_f(r.get('trace_s'), 1e3, 8, 1)} "
                     f"{_f(r.get('trace_spread'), 100, 5, 0)} {_f(r.get('trace_per_layer_s'), 1e3, 8, 2)} "
                     f"{_f(r.get('trace_ratio'), 1, 6, 2)} {_mib(r.get('compiled_peak_bytes'))} "
                     f"{_f(r.get('peak_ratio'), 1, 6, 2)} {_f(r.get('step_s'), 1e3, 8, 1)} "
                     f"{r['grad_max_abs_diff'] if r.get('grad_max_abs_diff') is not None else float('nan'):9.1e}")
    return "\n".join(lines)


def verdict_lines(flat: dict[str, Any]) -> list[str]:
    out = []
    for v, f in flat.items():
        slopes = ", ".join(f"{k}: {1e3 * s:.2f}" for k, s in f["slope_s_per_layer"].items())
        if f["flat"] is None:
            word = "no verdict (too few depths, or a slope <= 0 in the noise)"
        elif f["flat"]:
            word = f"flat (max/min slope {f['max_over_min']:.2f} <= {FLAT_TOLERANCE})"
        else:
            word = f"NOT flat (max/min slope {f['max_over_min']:.2f} > {FLAT_TOLERANCE})"
        out.append(f"trace cost per layer, {v}: {word}; slopes ms/layer {slopes}")
    return out


def plot(rows: list[dict[str, Any]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for v in VARIANTS:
        rs = [r for r in rows if r["variant"] == v and not r.get("error")]
        label = v.replace("xla_ckpt:", "")
        pts = [(r["layers"], 1e3 * r["trace_per_layer_s"]) for r in rs if r.get("trace_per_layer_s")]
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=label)
        pts = [(r["layers"], r["compiled_peak_bytes"] / 2**20) for r in rs if r.get("compiled_peak_bytes")]
        ax2.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=label)
        for r in rs:
            if r.get("peak_ratio") and v != "none":
                ax2.annotate(f"{r['peak_ratio']:.2f}x", (r["layers"], r["compiled_peak_bytes"] / 2**20),
                             textcoords="offset points", xytext=(4, -10), fontsize=7)
    depths = sorted({r["layers"] for r in rows})
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.minorticks_off()
        ax.set_xlabel("layers")
        ax.legend(fontsize=8)
    ax1.set_ylabel("host trace ms / layer (interleaved median)")
    ax1.set_ylim(bottom=0)
    ax2.set_ylabel("compiled peak MiB (ratio to none)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    import json
    import shutil

    a = _args(argv)
    tmp = tempfile.mkdtemp(prefix="xla_ckpt_depth_")
    try:
        mem = _memory(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"interleaved timing: {len(a.depths) * len(VARIANTS)} entries, {a.rounds} rounds", file=sys.stderr)
    entries = [{"name": f"L{n}:{v}", "variant": v, "config": _config(v), "model": _model(a, n)}
               for n in a.depths for v in VARIANTS if not mem[(n, v)].get("error")]
    timed = timing.launch({"device": "xla", "rounds": a.rounds, "warmup": a.warmup, "reference": None,
                           "entries": entries})
    rows, flat = analyse(a, mem, timed)
    title = (f"depth sweep: gpt d={a.d_model} h={a.heads} seq={a.seq} batch={a.batch} {a.dtype} on xla, "
             f"{a.rounds} interleaved rounds")
    print(title)
    print(table(rows))
    print("trace = host time from step start until torch_xla.sync() is called; IQR% = (p75 - p25) / median; "
          "x none = median per-round ratio (trace) / ratio at the same depth (peak)")
    if timed.get("error"):
        print(f"timing: {timed['error']}")
    else:
        print(f"load average {timed['loadavg_before']:.1f} -> {timed['loadavg_after']:.1f} on {os.cpu_count()} CPUs")
    print("\n".join(verdict_lines(flat)))
    doc = memory.portable({"environment": memory._environment(argparse.Namespace(device="xla")), "config": vars(a),
                           "rows": rows, "flatness": flat, "flat_tolerance": FLAT_TOLERANCE, "timing": timed})
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    if a.plot:
        os.makedirs(os.path.dirname(os.path.abspath(a.plot)), exist_ok=True)
        plot(rows, a.plot, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
