"""Compiled-XLA rows: the GPT under ``torch.compile(backend="openxla")`` beside the lazy engine.

    python bench/openxla.py [--json bench/results/openxla.json] [--rounds 10] [--layers 4 --d-model 256 ...]

Per variant (``none``, ``megatron_selective``, ``full``, ``budget:0.3``; compiled, and the lazy
engine for the same policy), in one fresh process each (``bench/openxla_probe.py``, XLA_FLAGS read
once): the compiled peak of every XLA program the step ran (forward, backward), the first step's
wall time (trace + compile + run), graphs and graph breaks. Then one process times every variant
interleaved (``bench/timing.py``'s rounds, order reversed every other round): host trace (step start
until the sync call) and step (until the device is done), as per-round ratios to lazy ``none``
(host) and compiled ``none`` (step). ``--no-fence`` rows show what the fenced backward buys.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from openxla_probe import add_size_args  # bench/ is the script's folder: on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VARIANTS = ["none", "megatron_selective", "full", "budget:0.3"]
SIZE_ARGS = ("layers", "d_model", "heads", "seq", "batch", "vocab")


def _size_flags(a: argparse.Namespace) -> list[str]:
    return [f for k in SIZE_ARGS for f in (f"--{k.replace('_', '-')}", str(getattr(a, k)))]


def probe(variant: str, a: argparse.Namespace, fence: bool = True) -> dict[str, Any]:
    """One variant's compiled peaks and first step, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as dump:
        cmd = [sys.executable, os.path.join(HERE, "openxla_probe.py"), variant, dump, *_size_flags(a)]
        proc = subprocess.run(cmd + ([] if fence else ["--no-fence"]), capture_output=True, text=True, env=env,
                              timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr or "no output").strip().splitlines()[-1:]
        return {"variant": variant, "fence": fence, "error": tail[0][:200] if tail else "no output"}
    out = json.loads(lines[-1])
    out.pop("peaks", None)
    return out


# --------------------------------------------------------------------------- interleaved timing (a worker)


def _timing_worker(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    sys.path[:0] = [HERE, ROOT]
    import warnings

    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    import xla_ckpt
    from timing import per_round_ratios, round_order, summarize
    from xla_ckpt.models import GPT, GPTConfig

    warnings.simplefilter("ignore")
    torch._dynamo.config.cache_size_limit = 64  # one compiled GPT per variant, same code object
    dev = torch_xla.device()
    m = spec["model"]
    cfg = GPTConfig(vocab_size=m["vocab"], seq_len=m["seq"], n_layer=m["layers"], n_head=m["heads"], d_model=m["d_model"])
    torch.manual_seed(0)
    base = GPT(cfg)
    idx = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), generator=torch.Generator().manual_seed(1)).to(dev)
    live = []
    out: dict[str, Any] = {"entries": {}}
    for name in spec["entries"]:
        kind, variant = name.split(":", 1)
        model = copy.deepcopy(base).to(dev)
        if variant.startswith("budget:"):
            xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "budget": float(variant.split(":")[1])}]})
        elif variant != "none":
            xla_ckpt.apply(model, variant)
        run = torch.compile(model, backend="openxla") if kind == "openxla" else model

        def step(model: Any = model, run: Any = run) -> tuple[float, float]:
            t0 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            run(idx, idx).backward()
            t1 = time.perf_counter()
            torch_xla.sync()
            xm.wait_device_ops()
            return t1 - t0, time.perf_counter() - t0

        t0 = time.perf_counter()
        step()
        out["entries"][name] = {"first_step_s": time.perf_counter() - t0}
        for _ in range(spec["warmup"] - 1):
            step()
        live.append((name, step))
    host = {n: [] for n, _ in live}
    full = {n: [] for n, _ in live}
    out["loadavg_before"] = os.getloadavg()[0]
    for r in range(spec["rounds"]):
        for i in round_order(len(live), r):
            name, step = live[i]
            gc.collect()
            h, s = step()
            host[name].append(h)
            full[name].append(s)
    out["loadavg_after"] = os.getloadavg()[0]
    for name in host:
        e = out["entries"][name]
        e["host"], e["step"] = summarize(host[name]), summarize(full[name])
        e["host_vs_lazy_none"] = summarize(per_round_ratios(host[name], host["lazy:none"]))
        e["step_vs_openxla_none"] = summarize(per_round_ratios(full[name], full["openxla:none"]))
    return out


def timing(a: argparse.Namespace) -> dict[str, Any]:
    entries = ["lazy:none", "lazy:megatron_selective", *(f"openxla:{v}" for v in VARIANTS)]
    spec = {"rounds": a.rounds, "warmup": a.warmup, "entries": entries,
            "model": {k: getattr(a, k) for k in SIZE_ARGS}}
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--timing-worker", json.dumps(spec)],
                          capture_output=True, text=True, env=env, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"error": (proc.stderr or "no output").strip().splitlines()[-1][:300]}


def table(peaks: list[dict[str, Any]], timed: dict[str, Any]) -> list[str]:
    by = {(p["variant"], p.get("fence", True)): p for p in peaks}
    none = by.get(("none", True), {}).get("peak")
    rows = ["| variant | fence | compiled peak MiB (fwd / bwd) | vs compiled none | vs lazy same policy | "
            "first step s | graphs | host vs lazy none | step vs compiled none |", "|---" * 9 + "|"]
    for p in peaks:
        if p["variant"].startswith("lazy:"):
            continue
        if p.get("error"):
            rows.append(f"| {p['variant']} | {p.get('fence')} | error: {p['error']} |")
            continue
        lazy = by.get((f"lazy:{p['variant']}", True), {}).get("peak")
        t = timed.get("entries", {}).get(f"openxla:{p['variant']}", {}) if p.get("fence", True) else {}
        vs_lazy = f"{p['peak'] / lazy:.2f}x" if lazy else "-"

        def ratio(key: str, t: dict = t) -> str:
            return f"{t[key]['median']:.2f} [{t[key]['p25']:.2f}, {t[key]['p75']:.2f}]" if key in t else "-"

        rows.append(
            f"| {p['variant']} | {p.get('fence', True)} | {p['peak'] / 2**20:.1f} ({(p.get('forward_peak') or 0) / 2**20:.1f} / "
            f"{(p.get('backward_peak') or 0) / 2**20:.1f}) | {p['peak'] / none:.2f}x | "
            f"{vs_lazy} | {p['first_step_s']:.1f} | "
            f"{p['graphs']} ({p['breaks']} breaks) | {ratio('host_vs_lazy_none')} | {ratio('step_vs_openxla_none')} |")
    for p in peaks:
        if p["variant"].startswith("lazy:") and not p.get("error"):
            rows.append(f"| {p['variant']} (lazy engine) | - | {p['peak'] / 2**20:.1f} | {p['peak'] / none:.2f}x | 1.00x | "
                        f"{p['first_step_s']:.1f} | - | - | - |")
    return rows


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--timing-worker":
        print("RESULT " + json.dumps(_timing_worker(json.loads(sys.argv[2]))))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    add_size_args(p)
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--no-fence-rows", action="store_true", help="skip the unfenced rows")
    p.add_argument("--peaks-from", default=None, help="JSON lines of earlier openxla_probe.py runs (same sizes): "
                   "skip the peak processes")
    a = p.parse_args()
    peaks = []
    if a.peaks_from:
        with open(a.peaks_from) as f:
            peaks = [json.loads(ln) for ln in f if ln.startswith("{")]
        for q in peaks:
            q.pop("peaks", None)
    for v in VARIANTS if not peaks else []:
        peaks.append(probe(v, a))
        print(json.dumps(peaks[-1]), file=sys.stderr)
        if v != "none" and not v.startswith("budget") and not a.no_fence_rows:
            peaks.append(probe(v, a, fence=False))
            print(json.dumps(peaks[-1]), file=sys.stderr)
    for v in ("none", "megatron_selective", "full") if not a.peaks_from else []:
        peaks.append(probe(f"lazy:{v}", a))
        print(json.dumps(peaks[-1]), file=sys.stderr)
    timed = {} if a.no_timing else timing(a)
    lines = table(peaks, timed)
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": {k: getattr(a, k) for k in SIZE_ARGS}, "peaks": peaks, "timing": timed,
                       "table": lines}, f, indent=1)


if __name__ == "__main__":
    main()
