"""The headline's dropout rows: the default GPT with dropout on XLA, beside the same model's CPU bytes.

    python bench/memory.py --headline                  # adds dropout:none / megatron_selective / full at p = 0.1
    python bench/memory.py --dropout 0.1               # the rows in any XLA run with --model gpt; --dropout 0: none
    python bench/dropout.py cpu SPEC_JSON              # CPU bytes only (what memory.py calls)

Per row, on XLA, one fresh process (``bench/worker.py``, the dropout rate in its spec, XLA's generator
seeded with ``xm.set_rng_state(0, device)``): bytes autograd keeps (``saved_activations``), the compiled
peak of the step's one XLA program (``--xla_dump_to``), the first step, and every parameter grad
(compared with the dropout ``none`` row's: the recomputed masks must be the forward's). Then **one**
CPU-eager process measures the same model's bytes under every row's policy (``saved_activations``
around one forward): ``XLA / CPU`` is exact, and the target is <= 1.05 for ``megatron_selective``
and ``full``. Step and host trace come from memory.py's one interleaved process (these rows are entries
there): per-round ratios to the dropout ``none`` row of the same round. Example::

    rows = measure(0.1, size, tmp, run_variant); timing_entries(rows, size); derive(rows, timed, grads)
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

from timing import per_round_ratios, summarize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PREFIX = "dropout:"
PRESETS = ["megatron_selective", "full"]
HEADLINE = 0.1  # GPT-2's, BERT's and T5's default dropout
LIMIT = 1.05  # the target: XLA bytes <= 1.05x CPU's for full and megatron_selective


def variants(presets: list[str] = PRESETS) -> list[tuple[str, str, Any]]:
    """``(row name, worker variant, config)``: dropout ``none`` first, then each preset.

    Example: ``variants(["full"])[1]`` -> ``("dropout:full", "xla_ckpt:full", ".../policies/full.toml")``.
    """
    out: list[tuple[str, str, Any]] = [(PREFIX + "none", "none", None)]
    for p in presets:
        out.append((PREFIX + p, f"xla_ckpt:{p}", os.path.join(ROOT, "policies", f"{p}.toml")))
    return out


def _cpu_bytes(size: dict[str, Any], rows: list[list[Any]]) -> dict[str, int]:
    """Bytes autograd keeps for one forward of the GPT on CPU eager, per ``(name, variant, config)``."""
    import torch

    import xla_ckpt
    from worker import _model

    base = _model({**size, "model": "gpt"})
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=g)
    out = {}
    for name, variant, config in rows:
        model = copy.deepcopy(base)
        if variant != "none":
            xla_ckpt.apply(model, config)
        torch.manual_seed(0)
        with xla_ckpt.saved_activations() as saved:
            loss = model(idx, idx)
        out[name] = saved.nbytes
        del loss
    return out


def cpu_bytes(size: dict[str, Any], rows: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """Run ``_cpu_bytes`` in a fresh CPU-only process; ``{"bytes": {name: n}}`` or ``{"error": ...}``."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "cpu", json.dumps({"size": size, "rows": rows})],
                          capture_output=True, text=True, env=env, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return {"bytes": json.loads(line[len("RESULT "):])}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"CPU bytes process exited {proc.returncode}: {tail[0][:200]}"}


def measure(p: float, size: dict[str, Any], tmp: str,
            run_variant: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """The XLA rows (one worker process each, ``run_variant`` = memory.py's) and their CPU bytes.

    Args:
        p: the dropout rate of every ``nn.Dropout`` of the GPT.
        size: the GPT's sizes (layers, d_model, heads, seq, batch, vocab, dtype).
        tmp: a folder for the dumps and grads.
        run_variant: runs one worker spec, returns its result row.
    """
    rows, specs = [], variants()
    t0 = time.perf_counter()  # wall times: what these rows add to `make bench`
    cpu = cpu_bytes({**size, "dropout": p}, [list(s) for s in specs])
    cpu_wall = time.perf_counter() - t0
    for name, variant, config in specs:
        stem = os.path.join(tmp, name.replace(":", "_"))
        spec = {**size, "variant": variant, "config": config, "device": "xla", "model": "gpt", "dropout": p,
                "steps": 1, "dump_dir": stem + "_dump", "grads_path": stem + ".pt"}
        t0 = time.perf_counter()
        r = run_variant(spec)
        r["wall_s"], r["cpu_bytes_wall_s"] = time.perf_counter() - t0, cpu_wall
        r.pop("step_s", None)  # this process's own step time: not comparable across processes
        r.update(variant=name, worker_variant=variant, config=config, dropout=p, grads_path=spec["grads_path"])
        if cpu.get("error"):
            r["cpu_error"] = cpu["error"]
        elif not r.get("error"):
            r["cpu_saved_bytes"] = cpu["bytes"][name]
            r["xla_over_cpu"] = r["saved_bytes"] / r["cpu_saved_bytes"]
        rows.append(r)
    return rows


def timing_entries(rows: list[dict[str, Any]], size: dict[str, Any]) -> list[dict[str, Any]]:
    """Entries for bench/timing.py: the dropout model (its own base weights there), per row without error."""
    return [{"name": r["variant"], "variant": r["worker_variant"], "config": r["config"],
             "model": {**size, "model": "gpt", "dropout": r["dropout"]}} for r in rows if not r.get("error")]


def derive(rows: list[dict[str, Any]], timed: dict[str, Any], grads: dict[str, Any]) -> None:
    """Ratios to the dropout ``none`` row, in place: peak (exact), host and step (per round), grads."""
    import torch

    for r in rows:
        path = r.pop("grads_path", None)
        if not r.get("error") and path and os.path.exists(path):
            grads[r["variant"]] = torch.load(path)
    base = next((r for r in rows if r["variant"] == PREFIX + "none" and not r.get("error")), None)
    ents = timed.get("entries", {})
    ref = ents.get(PREFIX + "none", {})
    for r in rows:
        if r.get("error") or base is None:
            continue
        if r.get("compiled_peak_bytes") and base.get("compiled_peak_bytes"):
            r["compiled_peak_ratio"] = r["compiled_peak_bytes"] / base["compiled_peak_bytes"]
        r["saved_ratio"] = r["saved_bytes"] / base["saved_bytes"]
        t = ents.get(r["variant"], {})
        r["timing"] = t  # samples included, as timing.merge keeps them for the other rows
        for kind in ("host", "step"):
            a, b = t.get(f"{kind}_samples_s"), ref.get(f"{kind}_samples_s")
            if a and b:
                r[f"{kind}_s"] = summarize(a)["median"]
                r[f"{kind}_vs_none"] = summarize(per_round_ratios(a, b))
        if t.get("error"):
            r["timing_error"] = t["error"]
    none = grads.get(PREFIX + "none")
    for r in rows:
        if none is not None and r["variant"] in grads:
            r["grad_max_abs_diff"] = float((grads[r["variant"]] - none).abs().max())


def _ratio(q: dict[str, float] | None) -> str:
    return "-" if q is None else f"{q['median']:.2f} [{q['p25']:.2f}, {q['p75']:.2f}]"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}"


def _num(v: float | None, scale: float) -> str:
    return "-" if v is None else f"{scale * v:.1f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The dropout rows as a markdown table (bytes and peaks exact; host and step per-round ratios)."""
    out = ["| variant | XLA saved MiB | CPU saved MiB | XLA / CPU | compiled peak MiB | peak x none | host ms | "
           "host x none | step x none | 1st s | grad diff |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            out.append(f"| {r['variant']} | error: {r['error']} |")
            continue
        ratio = r.get("xla_over_cpu")
        out.append(f"| {r['variant']} | {_mib(r['saved_bytes'])} | {_mib(r.get('cpu_saved_bytes'))} | "
                   f"{'-' if ratio is None else f'{ratio:.3f}'} | {_mib(r.get('compiled_peak_bytes'))} | "
                   f"{r.get('compiled_peak_ratio') or 0:.2f} | "
                   f"{_num(r.get('host_s'), 1e3)} | "
                   f"{_ratio(r.get('host_vs_none'))} | {_ratio(r.get('step_vs_none'))} | {r['first_step_s']:.1f} | "
                   f"{r.get('grad_max_abs_diff', float('nan')):.1e} |")
    notes = [f"{r['variant']}: {r.get('cpu_error') or r.get('timing_error')}" for r in rows
             if r.get("cpu_error") or r.get("timing_error")]
    return out + [f"note: {n}" for n in notes]


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bytes target: XLA saved bytes <= 1.05x CPU's for ``megatron_selective`` and ``full`` (exact)."""
    by = {r["variant"]: r for r in rows if not r.get("error")}
    out = []
    for p in ("megatron_selective", "full"):
        v = by.get(PREFIX + p, {}).get("xla_over_cpu")
        ratio = None if v is None else {"median": v, "p25": v, "p75": v, "exact": True}
        out.append({"target": f"dropout bytes: {p} XLA / CPU", "ratio": ratio, "limit": LIMIT,
                    "met": None if v is None else v <= LIMIT})
    return out


if __name__ == "__main__" and sys.argv[1:2] == ["cpu"]:
    sys.path[:0] = [HERE, ROOT]
    arg = json.loads(sys.argv[2])
    print("RESULT " + json.dumps(_cpu_bytes(arg["size"], arg["rows"])))
