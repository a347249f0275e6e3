"""Full-scale estimate: a Llama-3-70B-shaped model at seq 8192, batch 1, every preset, on the meta device.

    python bench/estimate_70b.py [--json bench/results/estimate_70b.json] [--check-full full]

Target: every preset in <= 60 s and <= 4 GiB of memory here. Each policy is estimated
from three shallow models (``estimate_layers``: 1, 2, 3 blocks, increments checked equal) and scaled
to 80 blocks. ``--check-full POLICY`` also estimates the whole 80-block model once and requires the
same result. The growth section times the whole-model estimate at several depths and sequence
lengths (how the time grows without the scaling).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

import xla_ckpt  # noqa: E402
from xla_ckpt._estimate.fit import DEFAULT_BUDGETS, hf_builder  # noqa: E402
from xla_ckpt._estimate.scale import estimate_layers  # noqa: E402

CONFIG = os.path.join(HERE, "configs", "llama3_70b.json")


def _how(name: str) -> object:
    return {"checkpoint": [{"blocks": True, "budget": float(name.split("(")[1][:-1])}]} if "(" in name else name


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--check-full", default=None, help="also estimate the whole 80-block model with this policy")
    p.add_argument("--growth", action="store_true", help="time whole-model estimates at several depths and lengths")
    a = p.parse_args()
    build, n_layers, period, _ = hf_builder(CONFIG, 1, 8192, torch.bfloat16)
    names = list(xla_ckpt.presets()) + [f"memory_budget({f:g})" for f in DEFAULT_BUDGETS]
    rows, t_all, cpu_all = [], time.perf_counter(), time.process_time()
    for name in names:
        t = time.perf_counter()
        est, scaled = estimate_layers(build, n_layers, period, config=_how(name))
        dt = time.perf_counter() - t
        rows.append(dict(policy=name, seconds=round(dt, 2), extrapolated=scaled, activation_bytes=est.activation_bytes,
                         forward_flops=est.forward_flops, recompute_flops=est.recompute_flops,
                         recompute_share=round(est.recompute_share, 4)))
        print(f"{name:22s} {dt:6.2f} s  {est.activation_bytes / 2**30:9.2f} GiB  recompute {est.recompute_share:6.1%}"
              f"  scaled={scaled}", flush=True)
    total, cpu = time.perf_counter() - t_all, time.process_time() - cpu_all
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB (Linux)
    # CPU seconds beside wall seconds: this machine's 2 cores are shared, and the wall time says how busy.
    print(f"all {len(names)} policies: {total:.1f} s wall, {cpu:.1f} s CPU, max RSS {rss:.2f} GiB "
          "(targets: 60 s, 4 GiB)")
    out: dict = {"policies": rows, "seconds": round(total, 2), "cpu_seconds": round(cpu, 2),
                 "max_rss_gib": round(rss, 3), "load_average": os.getloadavg()}
    if a.check_full:
        t = time.perf_counter()
        model, args, kwargs = build(n_layers)
        whole = xla_ckpt.estimate(model, *args, config=_how(a.check_full), **kwargs)
        scaled_est, _ = estimate_layers(build, n_layers, period, config=_how(a.check_full))
        same = whole == scaled_est
        out["check_full"] = dict(policy=a.check_full, seconds=round(time.perf_counter() - t, 2), equal=same)
        print(f"whole 80-block estimate of {a.check_full}: {out['check_full']['seconds']} s, equal to the scaled one: {same}")
        if not same:
            raise SystemExit("the scaled estimate differs from the whole model's")
    if a.growth:
        growth = []
        for layers, seq in ((2, 8192), (4, 8192), (8, 8192), (4, 1024)):
            b, _, _, _ = hf_builder(CONFIG, 1, seq, torch.bfloat16)
            model, args, kwargs = b(layers)
            t, c = time.perf_counter(), time.process_time()
            xla_ckpt.estimate(model, *args, config="full", **kwargs)
            growth.append(dict(layers=layers, seq=seq, seconds=round(time.perf_counter() - t, 3),
                               cpu_seconds=round(time.process_time() - c, 3)))
            print(f"whole-model estimate, {layers} blocks, seq {seq}: {growth[-1]['seconds']} s wall, "
                  f"{growth[-1]['cpu_seconds']} s CPU", flush=True)
        out["growth"] = growth
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
