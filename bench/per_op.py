"""What the engine costs per op on the host: a chain of N ``sin`` plain, under an empty dispatch mode, checkpointed.

    python bench/per_op.py                      # XLA:CPU, 200 ops, 15 rounds
    python bench/per_op.py --device cpu --ops 200 --rounds 15 --json out.json

The table of docs/benchmarks.md ("What the per-op path costs"). One process; every variant warmed up
(on XLA: traced, compiled, run), then ``--rounds`` interleaved rounds of one step per variant, the
order reversed every other round (bench/timing.py's ``round_order``). Each step starts after
``torch_xla.sync()`` + ``xm.wait_device_ops()`` (nothing pending), then times on the host:

- ``forward``: ``fn(x)`` (plain / under the mode) or ``xla_ckpt.checkpoint(fn, x, policy=p)``;
- ``backward``: ``out.sum().backward()`` until the sync call (the replay, for the engine).

Per op = time / N. Ratios are per round against ``plain`` of the same round, then their median.
Variants: ``plain``, ``empty_mode`` (a ``TorchDispatchMode`` that only calls the op: the floor any
per-op dispatch mode pays in Python), ``checking_floor`` (a mode that only checks each op against the
ops of a known program and keys its tensors, saved tensors held by index: the least a forward reusing
a known region's program pays), and the engine under ``nothing_saveable``,
``everything_saveable`` and ``dots_saveable`` (a chain of ``sin`` has no dot: it saves nothing, as
``nothing_saveable``, but asks the policy per op).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]  # bench's timing helpers and the checkout's library

from timing import per_round_ratios, round_order, summarize  # noqa: E402

ENGINE_POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable"]


def _variants(n_ops: int) -> list[tuple[str, Callable[[Any], Any]]]:
    import torch
    from floors import CheckingFloor, Empty  # bench/'s modes (importing them imports the library)

    import xla_ckpt

    def chain(x: Any) -> Any:
        for _ in range(n_ops):
            x = torch.sin(x)
        return x

    def empty_mode(x: Any) -> Any:
        with Empty():
            return chain(x)

    known: list[Any] = []  # the ops of the first call: the "known program" the floor checks against

    def checking_floor(x: Any) -> Any:
        saved: list[Any] = []

        def pack(t: Any) -> int:
            saved.append(t)
            return len(saved) - 1

        with torch.autograd.graph.saved_tensors_hooks(pack, saved.__getitem__), CheckingFloor(known):
            return chain(x)

    out = [("plain", chain), ("empty_mode", empty_mode), ("checking_floor", checking_floor)]
    for p in ENGINE_POLICIES:
        out.append((p, lambda x, p=p: xla_ckpt.checkpoint(chain, x, policy=p)))
    return out


def run(device_kind: str, n_ops: int, rounds: int, warmup: int, shape: tuple[int, ...]) -> dict[str, Any]:
    """Time every variant interleaved; returns per-op medians (us) and per-round ratios to ``plain``."""
    import torch

    if device_kind == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla
        import torch_xla.core.xla_model as xm

        device = torch_xla.device()  # before the first backward of the process

        def settle() -> None:
            torch_xla.sync()
            xm.wait_device_ops()
    else:
        device = torch.device(device_kind)

        def settle() -> None:
            pass

    x0 = torch.randn(*shape).to(device)
    variants = _variants(n_ops)

    def step(fn: Callable[[Any], Any]) -> tuple[float, float]:
        settle()
        x = x0.detach().requires_grad_(True)
        t0 = time.perf_counter()
        out = fn(x)
        t1 = time.perf_counter()
        out.sum().backward()
        t2 = time.perf_counter()
        settle()
        return t1 - t0, t2 - t1

    for _, fn in variants:
        for _ in range(warmup):
            step(fn)
    fwd: dict[str, list[float]] = {n: [] for n, _ in variants}
    bwd: dict[str, list[float]] = {n: [] for n, _ in variants}
    load_before = os.getloadavg()[0]
    for r in range(rounds):
        for i in round_order(len(variants), r):
            name, fn = variants[i]
            gc.collect()  # outside the timed region
            f, b = step(fn)
            fwd[name].append(f)
            bwd[name].append(b)
    rows = []
    for name, _ in variants:
        rows.append({"variant": name,
                     "forward_us_per_op": 1e6 * statistics.median(fwd[name]) / n_ops,
                     "forward_spread": summarize(fwd[name])["spread"],
                     "forward_x_plain": summarize(per_round_ratios(fwd[name], fwd["plain"])),
                     "backward_us_per_op": 1e6 * statistics.median(bwd[name]) / n_ops,
                     "backward_x_plain": summarize(per_round_ratios(bwd[name], bwd["plain"])),
                     "forward_samples_s": fwd[name], "backward_samples_s": bwd[name]})
    return {"device": device_kind, "ops": n_ops, "rounds": rounds, "shape": list(shape), "torch": torch.__version__,
            "loadavg_before": load_before, "loadavg_after": os.getloadavg()[0], "cpus": os.cpu_count(), "rows": rows}


def table(doc: dict[str, Any]) -> list[str]:
    """The markdown table docs/benchmarks.md shows."""
    out = ["| variant | forward us / op | forward x plain [p25, p75] | backward us / op | backward x plain [p25, p75] |",
           "| --- | ---: | --- | ---: | --- |"]
    for r in doc["rows"]:
        f, b = r["forward_x_plain"], r["backward_x_plain"]
        out.append(f"| {r['variant']} | {r['forward_us_per_op']:.1f} | {f['median']:.2f} [{f['p25']:.2f}, "
                   f"{f['p75']:.2f}] | {r['backward_us_per_op']:.1f} | {b['median']:.2f} [{b['p25']:.2f}, {b['p75']:.2f}] |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["xla", "cpu"], default="xla")
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--shape", type=int, nargs="+", default=[64, 64])
    p.add_argument("--json", help="write the rows (samples included) here")
    a = p.parse_args(argv)
    if a.ops < 1 or a.rounds < 1 or a.warmup < 1:
        p.error(f"--ops, --rounds and --warmup must be >= 1 (got {a.ops}, {a.rounds}, {a.warmup})")
    doc = run(a.device, a.ops, a.rounds, a.warmup, tuple(a.shape))
    print(f"chain of {a.ops} sin {tuple(a.shape)} on {a.device}, {a.rounds} interleaved rounds, medians; "
          f"load average {doc['loadavg_before']:.1f} -> {doc['loadavg_after']:.1f} on {doc['cpus']} CPUs")
    print("\n".join(table(doc)))
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
