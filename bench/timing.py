"""Step time of several variants, interleaved in one process: the only comparison a loaded machine allows.

    python bench/timing.py SPEC_JSON   -> prints one line "RESULT {json}"

Separate processes run one after another see different machine loads (one run here measured `none`
at 1930 ms and torch_xla's checkpoint at 837 ms). So one process builds one model, deep-copies it
for every entry (same weights, same batch), wraps each copy its own way, warms every entry up (on
XLA: trace, compile, run), then runs rounds of one step per entry, the order reversed every other
round so no entry always follows the same one. Ratios are taken per round, against the reference
entry's step of the same round, and summarised by their median and quartiles.

Per step: ``host`` = from step start until the sync call (on XLA the host trace of forward and
backward; on CUDA the dispatch), ``step`` = until the device is done (XLA: ``torch_xla.sync()`` +
``xm.wait_device_ops()``; CUDA: ``torch.cuda.synchronize()``). On CPU eager both are the step.

SPEC: {"device", "rounds", "warmup", "reference": entry name,
       "entries": [{"name", "variant", "config", "model": worker.py model spec}]}
"""

from __future__ import annotations

import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def round_order(n: int, r: int) -> list[int]:
    """Entry indices for round ``r``: as given in even rounds, reversed in odd ones."""
    order = list(range(n))
    return order if r % 2 == 0 else order[::-1]


def summarize(samples: list[float]) -> dict[str, float]:
    """Median, quartiles, extremes, and the spread (interquartile range over median) of one series."""
    if not samples:
        raise ValueError("summarize() needs at least one sample")
    s = sorted(samples)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    med = statistics.median(s)
    return {"median": med, "p25": q[0], "p75": q[2], "min": s[0], "max": s[-1],
            "spread": (q[2] - q[0]) / med if med else 0.0}


def per_round_ratios(samples: list[float], reference: list[float]) -> list[float]:
    """Each round's sample over the reference entry's sample of the same round."""
    if len(samples) != len(reference):
        raise ValueError(f"{len(samples)} samples vs {len(reference)} reference samples: rounds must match")
    return [a / b for a, b in zip(samples, reference, strict=True)]


def launch(spec: dict[str, Any], timeout: float = 3600) -> dict[str, Any]:
    """Run ``spec`` in a fresh process (no XLA dump flags: they would slow compilation only)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), json.dumps(spec)],
                          capture_output=True, text=True, env=env, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"timing process exited {proc.returncode}: {tail[0][:200]}", "entries": {}}


def merge(results: list[dict[str, Any]], timing: dict[str, Any]) -> None:
    """Put the interleaved timings into benchmark result rows (keyed by ``variant``), in place.

    Flat keys for tables: ``step_s`` (median), ``step_spread`` (IQR / median), ``time_ratio`` (median
    per-round ratio to the reference) and, off CPU, ``trace_s``, ``trace_spread``, ``trace_ratio``
    (host time until the sync call). The full record, samples included, goes under ``timing``.
    """
    for r in results:
        t = timing.get("entries", {}).get(r["variant"])
        if t is None or r.get("error"):
            continue
        r["timing"] = t
        if t.get("error"):
            r["timing_error"] = t["error"]
            continue
        r["step_s"], r["step_spread"] = t["step"]["median"], t["step"]["spread"]
        r["time_ratio"] = t.get("step_ratio", {}).get("median")
        if "host" in t:
            r["trace_s"], r["trace_spread"] = t["host"]["median"], t["host"]["spread"]
            r["trace_ratio"] = t.get("host_ratio", {}).get("median")


def _loss(model: Any, idx: Any, kind: str) -> Any:
    return model(idx, idx) if kind == "gpt" else model(idx, labels=idx).loss


def _build(entry: dict[str, Any], base: Any, device: Any) -> tuple[Any, Any]:
    """The entry's model and what a step calls: the model itself, or it compiled (``openxla:`` entries)."""
    import torch

    import xla_ckpt
    from worker import TORCH_SAC, _SacObserver, _wrap_torch

    model = copy.deepcopy(base).to(device)
    variant = entry["variant"]
    if variant.startswith("openxla:"):  # bench/compiled.py's rows: the policy (if any) under torch.compile
        if entry["config"] is not None:
            xla_ckpt.apply(model, entry["config"])
        # One compiled GPT per entry, the same code object: each needs its own cache entries.
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        return model, torch.compile(model, backend="openxla")
    if variant.startswith("xla_ckpt:"):
        report = xla_ckpt.apply(model, entry["config"])
        if not report.wrapped:
            raise ValueError("config matched no module of this model (nothing to time)")
    elif variant == "torch_xla" or variant in TORCH_SAC:
        observer = _SacObserver(TORCH_SAC.get(variant, TORCH_SAC["torch_sac"]))
        _wrap_torch(model, variant, observer)  # inactive: it adds nothing to the timed steps
    elif variant != "none":
        raise ValueError(f"unknown variant {variant!r}: none, torch_xla, {', '.join(TORCH_SAC)}, xla_ckpt:<preset> "
                         "or openxla:<preset>")
    return model, model


def _stepper(dev_kind: str) -> Callable[[Any, Callable[[], Any]], tuple[float, float]]:
    import torch

    if dev_kind == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        def sync() -> None:
            torch_xla.sync()
            xm.wait_device_ops()
    elif dev_kind == "cuda":
        sync = torch.cuda.synchronize
    else:
        def sync() -> None:
            pass

    def step(model: Any, loss_fn: Callable[[], Any]) -> tuple[float, float]:
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss_fn().backward()
        t1 = time.perf_counter()
        sync()
        return t1 - t0, time.perf_counter() - t0

    return step


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Warm every entry up, then time ``rounds`` interleaved rounds; returns samples and summaries."""
    dev_kind = spec["device"]
    if dev_kind == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch

    from worker import _model

    if dev_kind == "xla":
        import torch_xla

        device = torch_xla.device()  # before the first backward of the process
    else:
        device = torch.device(dev_kind)
    step = _stepper(dev_kind)
    bases: dict[str, Any] = {}
    live: list[tuple[dict[str, Any], Any, Callable[[], Any]]] = []
    out: dict[str, Any] = {"device": dev_kind, "rounds": spec["rounds"], "entries": {}}
    for e in spec["entries"]:
        key = json.dumps(e["model"], sort_keys=True)
        if key not in bases:  # one set of weights and one batch per model shape
            m = e["model"]
            g = torch.Generator().manual_seed(1)
            bases[key] = (_model(m), torch.randint(0, m["vocab"], (m["batch"], m["seq"]), generator=g))
        res: dict[str, Any] = {"variant": e["variant"], "error": None}
        out["entries"][e["name"]] = res
        try:
            base, idx_cpu = bases[key]
            model, run_fn = _build(e, base, device)
            idx = idx_cpu.to(device)

            def loss_fn(mdl=run_fn, x=idx, k=e["model"]["model"]):
                return _loss(mdl, x, k)

            t0 = time.perf_counter()
            step(model, loss_fn)
            res["first_step_s"] = time.perf_counter() - t0
            for _ in range(spec["warmup"] - 1):
                step(model, loss_fn)
            live.append((e, model, loss_fn))
        except Exception as exc:  # recorded per entry (e.g. torch SAC on XLA), the others still run
            res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    out["loadavg_before"] = os.getloadavg()[0]  # 1-minute load: how shared the machine was
    host: dict[str, list[float]] = {e["name"]: [] for e, _, _ in live}
    full: dict[str, list[float]] = {e["name"]: [] for e, _, _ in live}
    for r in range(spec["rounds"]):
        for i in round_order(len(live), r):
            e, model, loss_fn = live[i]
            gc.collect()  # outside the timed region: a collection must not land inside one entry's step
            h, s = step(model, loss_fn)
            host[e["name"]].append(h)
            full[e["name"]].append(s)
    out["loadavg_after"] = os.getloadavg()[0]
    ref = spec.get("reference")
    for name in host:
        res = out["entries"][name]
        res["step_samples_s"], res["step"] = full[name], summarize(full[name])
        if ref in full:
            res["step_ratio"] = summarize(per_round_ratios(full[name], full[ref]))
        if dev_kind != "cpu":
            res["host_samples_s"], res["host"] = host[name], summarize(host[name])
            if ref in host:
                res["host_ratio"] = summarize(per_round_ratios(host[name], host[ref]))
    return out


def main() -> None:
    sys.path[:0] = [HERE, ROOT]
    print("RESULT " + json.dumps(run(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
