"""The compiled differential fuzz under ``torch.compile(backend="openxla")`` on XLA:CPU: a hunt, not a test.

``tests/fuzz/test_fuzz_compiled.py`` fuzzes the compiled lowering under ``aot_eager`` on the CPU. This
probe runs the same generator's programs on XLA through torch_xla's dynamo bridge, in one process:
plain and inside ``xla_ckpt.checkpoint`` under a random policy, compared as the compiled fuzz compares
(the first law, ``XLA_TOL``); where the plain compile is off the lazy run, ours must equal the lazy run.
A mismatch is then told apart: the same two programs under ``aot_eager`` on XLA (our graphs, run as
FX code) and in the lazy engine, each against the CPU, and whether the XLA graph hash of the failing
run was first compiled for an earlier, different program (torch_xla reuses a compiled graph by hash).

The CI's share of it, with such collisions told apart, is ``tests/fuzz/test_fuzz_openxla.py``. Measured
(docs/correctness.md, "The fuzz under torch.compile"): seed 1, 300 programs, about 9 minutes.

    PJRT_DEVICE=CPU python tests/probes/openxla_fuzz_probe.py 300 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import sys
from typing import Any

os.environ.setdefault("PJRT_DEVICE", "CPU")
# As the tests compare (tests/conftest.py, _EXACT_BF16): bf16 rounded where a graph materialises it, so
# a recomputed bf16 value is not read in f32 where the saved one was rounded.
if "xla_allow_excess_precision" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_allow_excess_precision=false".strip()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "fuzz")]

import torch  # noqa: E402
import torch_xla  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import xla_ckpt  # noqa: E402
from fuzz_programs import policy_specs, programs, resolve, run  # noqa: E402
from test_fuzz import _same  # noqa: E402
from test_fuzz_compiled import COMPILED_KINDS, INPUT_WRITE  # noqa: E402

XLA_TOL = dict(rtol=1e-5, atol=1e-5)  # XLA:CPU fuses and reorders sums (tests/regressions/test_module_zoo.py)
CPU = torch.device("cpu")
# Graph hashes the bridge computed, per example: hash -> {IR text digest: (example, length)}.
_XC = torch_xla._XLAC
_graph_hash = _XC._get_graph_hash
HASHES: dict[Any, dict[str, tuple[int, int]]] = {}
NOW: dict[str, Any] = {"example": 0, "hashes": []}


def _hash(tensors: list[torch.Tensor]) -> Any:
    h = _graph_hash(tensors)
    text = _XC._get_xla_tensors_text(tensors)  # node numbers in post-order: the wiring shows
    HASHES.setdefault(h, {}).setdefault(hashlib.md5(text.encode()).hexdigest(), (NOW["example"], len(text)))
    NOW["hashes"].append(h)
    return h


def _diffs(a: Any, b: Any) -> list[tuple[str, float]]:
    return [(n, round((x - y).abs().max().item(), 4)) for n, x, y in zip(a.names, a.values, b.values)
            if x is not None and y is not None and x.shape == y.shape and not torch.equal(x, y)]


def check(steps: Any, spec: Any, quiet: bool, dev: torch.device) -> str:
    try:
        ref = run(steps, dev, compiled="openxla", quiet=quiet)
    except AssertionError:  # torch_xla's bridge asserts (a None backward input after a BatchNorm's graph break)
        return "plain compile failed"
    if ref.error is not None:
        return "plain compile failed"
    got = run(steps, dev, resolve(spec), compiled="openxla", quiet=quiet)
    if isinstance(got.error, xla_ckpt.CheckpointError) and INPUT_WRITE in str(got.error):
        return "checkpoint error (input write)"
    try:
        return _same(ref, got, dev, XLA_TOL, spec=True, steps=steps)
    except AssertionError:
        lazy = run(steps, dev, quiet=quiet)
        try:
            _same(lazy, ref, dev, XLA_TOL, spec=False)
        except AssertionError:  # the plain compile is off the lazy run: ours must equal the lazy run
            return _same(lazy, got, dev, XLA_TOL, spec=True, steps=steps) + " (as lazy)"
        raise


def explain(steps: Any, spec: Any, quiet: bool, dev: torch.device) -> None:
    """Which run is off, against the CPU: plain / ours under openxla, ours under aot_eager, ours lazy."""
    cpu = run(steps, CPU, quiet=quiet)
    rows = {"openxla plain": run(steps, dev, compiled="openxla", quiet=quiet),
            "openxla ours": run(steps, dev, resolve(spec), compiled="openxla", quiet=quiet),
            "aot_eager ours": run(steps, dev, resolve(spec), compiled=True, quiet=quiet),
            "lazy ours": run(steps, dev, resolve(spec), quiet=quiet)}
    for name, r in rows.items():
        print(f"  {name:15s} vs CPU: {_diffs(r, cpu) or 'equal'}", flush=True)
    for h in dict.fromkeys(NOW["hashes"]):
        texts = HASHES[h]
        first = min(i for i, _ in texts.values())
        if first < NOW["example"]:
            print(f"  graph {h.hex()[:12]} first compiled for example {first}, {len(texts)} distinct IR text(s)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("examples", type=int)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    dev = torch_xla.device()
    _XC._get_graph_hash = _hash  # restored below
    stats: collections.Counter = collections.Counter()

    @seed(a.seed)
    @settings(max_examples=a.examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(steps=programs(only=COMPILED_KINDS), spec=policy_specs(), quiet=st.booleans())
    def hunt(steps: Any, spec: Any, quiet: bool) -> None:
        NOW["example"] += 1
        NOW["hashes"] = []
        try:
            stats[check(steps, spec, quiet, dev)] += 1
        except AssertionError as e:
            stats["FAIL"] += 1
            print(f"FAIL at example {NOW['example']}: {steps!r} {spec!r} quiet={quiet}\n  {str(e)[:300]}", flush=True)
            explain(steps, spec, quiet, dev)

    try:
        hunt()
    finally:
        _XC._get_graph_hash = _graph_hash
    print(dict(stats))


if __name__ == "__main__":
    main()
