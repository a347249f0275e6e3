"""Where a lazy XLA step's host time goes: the engine's steps, against no checkpointing and an empty mode.

Default GPT (``xla_ckpt.models.GPTConfig()``, batch 8) on XLA, host time only (step start until
``backward()`` returns; the sync and the device run are outside). Two parts, in one process:

- ``split``: per variant, the forward, the blocks, the end of forward, the backward and the recompute,
  timed with ``perf_counter`` around the engine's own functions (medians of ``--steps`` steps).
- ``floor``: ``none``, the same blocks each under an empty ``TorchDispatchMode`` (the per-op floor of
  a dispatch-mode engine), under a mode that only checks each op against the block's known program
  (``checking_floor``: the forward of an engine that reuses a region's recorded program after the
  first step, with nothing decided, cached or recomputed), the same with what the first law asks per op
  of any forward (``checking_kept``: each output's version and lazy identity, the kept matmuls' outputs
  detached), and the presets, interleaved (``--rounds`` rounds, order reversed every other round), as
  per-round ratios to ``none``.
- ``--captured``: the floor also times the design that leaves the per-op mode: the GPT
  captured by ``torch.compile`` with a backend that only traces (AOTAutograd, no-op compilers, the
  library's fenced min-cut), so the captured forward and backward graphs still run lazily op by op.

Used for docs/benchmarks.md ("Where a lazy step's host time goes"); not part of ``make bench``.

    PJRT_DEVICE=CPU python bench/trace_split.py --rounds 20
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import time
from typing import Any, Callable

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch  # noqa: E402

import xla_ckpt  # noqa: E402
from xla_ckpt._engine import region as _region  # noqa: E402
from xla_ckpt.models import GPT, GPTConfig  # noqa: E402
from floors import CheckingFloor, CheckingKept, Empty  # noqa: E402  (bench/, the script's folder)

PRESETS = ("megatron_selective", "full")


def _under_empty_mode(model: GPT) -> GPT:
    for block in model.layers:
        def forward(*a: Any, _f: Callable[..., Any] = block.forward, **k: Any) -> Any:
            with Empty():
                return _f(*a, **k)
        block.forward = forward
    return model


def _under_checking(model: GPT, mode: type[CheckingFloor]) -> GPT:
    for block in model.layers:
        known: list[Any] = []

        def forward(*a: Any, _f: Callable[..., Any] = block.forward, _known: list[Any] = known, **k: Any) -> Any:
            saved: list[Any] = []  # what autograd saves, held by index as a region's slots are

            def pack(t: Any) -> int:
                saved.append(t)
                return len(saved) - 1

            with torch.autograd.graph.saved_tensors_hooks(pack, saved.__getitem__), mode(_known):
                return _f(*a, **k)
        block.forward = forward
    return model


def _lazy_backend() -> Any:
    """A ``torch.compile`` backend that captures but compiles nothing: its graphs run lazily, op by op."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._functorch import partitioners

    def partition(*a: Any, **k: Any) -> Any:  # looked up per compile: the library fences it for XLA regions
        return partitioners.min_cut_rematerialization_partition(*a, **k)

    return aot_autograd(fw_compiler=boxed_nop, bw_compiler=boxed_nop, partition_fn=partition)


def _timed(acc: dict[str, float], name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    def g(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[name] = acc.get(name, 0.0) + time.perf_counter() - t0
    return g


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--captured", action="store_true", help="also time none and the presets captured by Dynamo")
    a = p.parse_args()
    import torch_xla
    import torch_xla.core.xla_model as xm

    dev = torch_xla.device()
    torch.manual_seed(0)
    base = GPT(GPTConfig())
    idx = torch.randint(0, GPTConfig().vocab_size, (8, GPTConfig().seq_len)).to(dev)

    def step(m: GPT, run: Callable[..., Any] | None = None) -> tuple[float, float]:
        t0 = time.perf_counter()
        m.zero_grad(set_to_none=True)
        loss = (run or m)(idx, idx)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch_xla.sync()
        xm.wait_device_ops()
        return t1 - t0, t2 - t1

    models = {"none": copy.deepcopy(base).to(dev), "empty_mode": _under_empty_mode(copy.deepcopy(base).to(dev)),
              "checking_floor": _under_checking(copy.deepcopy(base).to(dev), CheckingFloor),
              "checking_kept": _under_checking(copy.deepcopy(base).to(dev), CheckingKept)}
    for v in PRESETS:
        models[v] = copy.deepcopy(base).to(dev)
        xla_ckpt.apply(models[v], v)
    runs: dict[str, Callable[..., Any]] = {}
    if a.captured:
        for v in ("none", *PRESETS):
            m = copy.deepcopy(base).to(dev)
            if v != "none":
                xla_ckpt.apply(m, v)
            models["captured:" + v] = m
            runs["captured:" + v] = torch.compile(m, backend=_lazy_backend())
    for n, m in models.items():
        for _ in range(3):
            step(m, runs.get(n, m))

    # split: the engine's own steps, timed in place (restored afterwards)
    acc: dict[str, float] = {}
    saved = (_region._Region.end_forward, _region._recompute.recompute)
    _region._Region.end_forward = _timed(acc, "end_forward", saved[0])
    _region._recompute.recompute = _timed(acc, "recompute", saved[1])
    try:
        print(f"{'variant':20s} {'forward':>8s} {'end_fwd':>8s} {'backward':>8s} {'recompute':>9s}  (ms, median step)")
        for v in ("none", *PRESETS):
            fw, bw, ends, recs = [], [], [], []
            for _ in range(a.steps):
                acc.clear()
                gc.collect()
                f, b = step(models[v])
                fw.append(f)
                bw.append(b)
                ends.append(acc.get("end_forward", 0.0))
                recs.append(acc.get("recompute", 0.0))
            med = [statistics.median(x) * 1e3 for x in (fw, ends, bw, recs)]
            print(f"{v:20s} {med[0]:8.2f} {med[1]:8.2f} {med[2]:8.2f} {med[3]:9.2f}")
    finally:
        _region._Region.end_forward, _region._recompute.recompute = saved

    # floor: interleaved host time, per-round ratios to none
    names = list(models)
    host: dict[str, list[float]] = {n: [] for n in names}
    for r in range(a.rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            gc.collect()
            host[n].append(sum(step(models[n], runs.get(n))))
    print(f"\n{'variant':20s} {'host ms':>8s}  x none [p25, p75]   (load {os.getloadavg()[0]:.1f})")
    for n in names:
        r = sorted(x / y for x, y in zip(host[n], host["none"], strict=True))
        print(f"{n:20s} {statistics.median(host[n]) * 1e3:8.2f}  {statistics.median(r):.2f} "
              f"[{r[len(r) // 4]:.2f}, {r[3 * len(r) // 4]:.2f}]")


if __name__ == "__main__":
    main()
