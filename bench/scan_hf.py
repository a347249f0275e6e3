"""HF Llama scanned vs unrolled on XLA:CPU: HLO size, trace + compile time, compiled peak, host trace, per preset and depth.

    python bench/scan_hf.py                      # 4, 16, 32 layers; none, megatron_selective, full
    python bench/scan_hf.py --depths 2 4 --json r.json

``xla_ckpt.apply(model, preset, scan=scan)`` on a Llama from its default config (only sizes set,
``xla_ckpt.hf_models``). Each (depth, preset, scan) runs in a fresh process (nothing cached by torch_xla
or XLA): the step's HLO text size (``_get_xla_tensors_hlo`` of the loss and every grad, before it
runs), the first step's trace (Python until ``torch_xla.sync()``) and its wall time (trace + compile +
run), a second step's wall time (compiled graph cached, so trace + run), and the compiled peak (the
largest ``*buffer-assignment.txt`` peak in the step's ``--xla_dump_to``). The grads of every parameter
are compared, scanned against unrolled, per preset and depth. Timings are one sample on a shared
machine; HLO size and peak are exact.

The per-step host trace (Python from the step's start until ``torch_xla.sync()``: what a host-bound
step costs) and the whole step come from one more process per depth, which builds every (preset,
scan) variant of one model, warms each up (trace, compile, run) and then times ``--rounds`` rounds of
one step per variant, interleaved (``bench/timing.py``'s order and summaries): the ratio against
unrolled ``none`` is taken per round, its median reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PRESETS = ("none", "megatron_selective", "full")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One (depth, preset, scan) in this process (fresh: run through ``--child``)."""
    import warnings

    import torch
    import torch_xla

    import xla_ckpt
    from xla_ckpt import hf_models
    from xla_ckpt._api.scan_hf import plain_grads
    from xla_dump import compiled_peaks

    warnings.simplefilter("ignore")
    dev = torch_xla.device()
    model = hf_models.build("llama", d_model=spec["d_model"], n_layer=spec["layers"], n_head=spec["heads"],
                            seq_len=spec["seq"], vocab_size=spec["vocab"])
    model = hf_models.to_device(model, dev)
    xla_ckpt.apply(model, spec["preset"], scan=spec["scan"])
    batch = hf_models.batch("llama", model, batch=spec["batch"], seq_len=spec["seq"], vocab_size=spec["vocab"],
                            device=dev)
    out: dict[str, Any] = {}
    for i in range(2):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss = model(**batch, use_cache=False).loss
        loss.backward()
        trace = time.perf_counter() - t0
        text_s = 0.0
        if i == 0:  # the HLO text is not part of the step: its time is taken out of the wall time
            t1 = time.perf_counter()
            out["hlo_chars"] = len(torch_xla._XLAC._get_xla_tensors_hlo([loss, *(p.grad for p in model.parameters())]))
            text_s = time.perf_counter() - t1
        torch_xla.sync()
        grads = [g.cpu() for g in plain_grads(model).values()]  # by plain name: a stacked grad split per layer
        wall = time.perf_counter() - t0 - text_s
        out[f"step{i + 1}_trace_s"], out[f"step{i + 1}_wall_s"] = trace, wall
    out["loss"] = float(loss.detach().cpu())
    torch.save(torch.cat([loss.detach().cpu().reshape(1)] + [g.reshape(-1) for g in grads]), spec["grads_path"])
    peaks = compiled_peaks(spec["dump_dir"])
    out["compiled_peak_bytes"] = max(peaks.values()) if peaks else None
    return out


def timing_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Every (preset, scan) of one depth in this process, timed interleaved against unrolled ``none``."""
    import copy
    import gc
    import warnings

    import torch_xla
    import torch_xla.core.xla_model as xm

    import xla_ckpt
    from timing import per_round_ratios, round_order, summarize
    from xla_ckpt import hf_models

    warnings.simplefilter("ignore")
    dev = torch_xla.device()
    base = hf_models.build("llama", d_model=spec["d_model"], n_layer=spec["layers"], n_head=spec["heads"],
                           seq_len=spec["seq"], vocab_size=spec["vocab"])
    live = []
    for preset in spec["presets"]:
        for scan in (False, True):
            model = hf_models.to_device(copy.deepcopy(base), dev)
            xla_ckpt.apply(model, preset, scan=scan)
            batch = hf_models.batch("llama", model, batch=spec["batch"], seq_len=spec["seq"],
                                    vocab_size=spec["vocab"], device=dev)
            live.append((f"{preset}/{'scan' if scan else 'unrolled'}", model, batch))

    def step(model: Any, batch: dict) -> tuple[float, float]:
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        model(**batch, use_cache=False).loss.backward()
        t1 = time.perf_counter()
        torch_xla.sync()
        xm.wait_device_ops()
        return t1 - t0, time.perf_counter() - t0

    for _, model, batch in live:  # warm up: trace, compile, run; then the cached program
        for _ in range(2):
            step(model, batch)
    host: dict[str, list[float]] = {name: [] for name, _, _ in live}
    full: dict[str, list[float]] = {name: [] for name, _, _ in live}
    for r in range(spec["rounds"]):
        for i in round_order(len(live), r):
            name, model, batch = live[i]
            gc.collect()
            h, s = step(model, batch)
            host[name].append(h)
            full[name].append(s)
    ref = "none/unrolled"
    out: dict[str, Any] = {"loadavg": os.getloadavg()[0]}
    for name in host:
        out[name] = {"host_ms": summarize(host[name])["median"] * 1e3, "step_ms": summarize(full[name])["median"] * 1e3,
                     "host_ratio": summarize(per_round_ratios(host[name], host[ref])) if ref in host else None,
                     "step_ratio": summarize(per_round_ratios(full[name], full[ref])) if ref in full else None}
    return out


def run(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"), "PYTHONPATH": ROOT + os.pathsep + HERE}
    if spec.get("dump_dir"):
        env["XLA_FLAGS"] = f"--xla_dump_to={spec['dump_dir']}"
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True,
                       text=True, timeout=3600)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depths", type=int, nargs="+", default=[4, 16, 32])
    p.add_argument("--presets", nargs="+", default=list(PRESETS))
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--rounds", type=int, default=10, help="interleaved timing rounds per depth (0: no timing)")
    p.add_argument("--json", help="write the rows to this path")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        spec = json.loads(a.child)
        print("RESULT " + json.dumps(timing_child(spec) if spec.get("timing") else child(spec)))
        return
    import torch

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in a.depths:
            for preset in a.presets:
                grads = {}
                for scan in (False, True):
                    tag = f"L{layers}_{preset}_{'scan' if scan else 'unrolled'}"
                    spec = {"layers": layers, "preset": preset, "scan": scan, "d_model": a.d_model, "heads": a.heads,
                            "seq": a.seq, "batch": a.batch, "vocab": a.vocab, "dump_dir": os.path.join(tmp, tag),
                            "grads_path": os.path.join(tmp, tag + ".pt")}
                    print(f"{tag} ...", file=sys.stderr, flush=True)
                    r = {"layers": layers, "preset": preset, "scan": scan, **run(spec)}
                    if not r.get("error"):
                        grads[scan] = torch.load(spec["grads_path"])
                        if False in grads and scan:
                            r["grad_max_abs_diff"] = float((grads[True] - grads[False]).abs().max())
                    rows.append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
            if a.rounds:
                print(f"L{layers} interleaved timing ...", file=sys.stderr, flush=True)
                t = run({"timing": True, "layers": layers, "presets": a.presets, "rounds": a.rounds,
                         "d_model": a.d_model, "heads": a.heads, "seq": a.seq, "batch": a.batch, "vocab": a.vocab})
                print(json.dumps(t), file=sys.stderr, flush=True)
                for r in rows:
                    if r["layers"] == layers:
                        r["timing"] = t.get(f"{r['preset']}/{'scan' if r['scan'] else 'unrolled'}") or \
                            {"error": t.get("error")}
    print(table(rows))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            # The run's parameters; where the rows went is not one (and would be a machine's path).
            args = {k: v for k, v in vars(a).items() if k != "json"}
            json.dump({"args": args, "rows": rows}, f, indent=1)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per (depth, preset, scan), with the scanned/unrolled and depth ratios."""
    by = {(r["layers"], r["preset"], r["scan"]): r for r in rows}
    first = min(r["layers"] for r in rows)
    lines = ["| layers | preset | scan | HLO chars | x shallowest | 1st step s (trace+compile+run) | x shallowest | "
             "2nd step s | compiled peak MiB | grad diff vs unrolled | host trace ms | host x unrolled none | "
             "step x unrolled none |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['layers']} | {r['preset']} | {r['scan']} | error: {r['error']} |||||||")
            continue
        base = by.get((first, r["preset"], r["scan"]), {})
        hx = r["hlo_chars"] / base["hlo_chars"] if base.get("hlo_chars") else float("nan")
        tx = r["step1_wall_s"] / base["step1_wall_s"] if base.get("step1_wall_s") else float("nan")
        peak = f"{r['compiled_peak_bytes'] / 2**20:.2f}" if r.get("compiled_peak_bytes") else "-"
        diff = f"{r['grad_max_abs_diff']:.1e}" if r.get("grad_max_abs_diff") is not None else ""
        t = r.get("timing") or {}
        timed = (f"{t['host_ms']:.0f} | {_ratio(t['host_ratio'])} | {_ratio(t['step_ratio'])}" if t.get("host_ratio")
                 else " | | ")
        lines.append(f"| {r['layers']} | {r['preset']} | {'scan' if r['scan'] else 'unrolled'} | {r['hlo_chars']} | "
                     f"{hx:.2f} | {r['step1_wall_s']:.1f} | {tx:.2f} | {r['step2_wall_s']:.2f} | {peak} | {diff} | "
                     f"{timed} |")
    return "\n".join(lines)


def _ratio(s: dict[str, float]) -> str:
    """A per-round ratio's median and quartiles: ``1.23 (1.20-1.31)``."""
    return f"{s['median']:.2f} ({s['p25']:.2f}-{s['p75']:.2f})"


if __name__ == "__main__":
    main()
