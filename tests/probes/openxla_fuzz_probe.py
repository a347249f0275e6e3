"""The compiled differential fuzz under ``torch.compile(backend="openxla")`` on XLA:CPU: a hunt, not a test.

``tests/fuzz/test_fuzz_compiled.py`` fuzzes the compiled lowering under ``aot_eager`` on the CPU. This
probe runs the same generator's programs on XLA through torch_xla's dynamo bridge, in one process:
plain and inside ``xla_ckpt.checkpoint`` under a random policy, compared as the compiled fuzz compares
(the first law, ``XLA_TOL``); where the plain compile is off the lazy run, ours must equal the lazy run.
The comparison is ``tests/fuzz/test_fuzz_openxla.py``'s (``fuzz_check.check_openxla``: torch_xla's graph-hash
collisions told apart); this probe runs more programs from a chosen seed and, for each failure or
collision, shows which run is off against the CPU: the two compiles, ours under ``aot_eager`` on XLA (our
graphs run as FX code) and ours in the lazy engine. Measured
(docs/correctness.md, "The fuzz under torch.compile"): seed 1, 300 programs, about 9 minutes.

    PJRT_DEVICE=CPU python tests/probes/openxla_fuzz_probe.py 300 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Any

os.environ.setdefault("PJRT_DEVICE", "CPU")
# As the tests compare (tests/conftest.py, _EXACT_BF16): bf16 rounded where a graph materialises it, so
# a recomputed bf16 value is not read in f32 where the saved one was rounded.
if "xla_allow_excess_precision" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_allow_excess_precision=false".strip()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]

import torch  # noqa: E402
import torch_xla  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzz_check import COMPILED_KINDS, UPSTREAM, GraphHashes, check_openxla  # noqa: E402
from fuzz_programs import policy_specs, programs, resolve, run  # noqa: E402

CPU = torch.device("cpu")


def _diffs(a: Any, b: Any) -> list[tuple[str, float]]:
    return [(n, round((x - y).abs().max().item(), 4)) for n, x, y in zip(a.names, a.values, b.values, strict=True)
            if x is not None and y is not None and x.shape == y.shape and not torch.equal(x, y)]


def explain(steps: Any, spec: Any, quiet: bool, dev: torch.device) -> None:
    """Which run is off, against the CPU: plain / ours under openxla, ours under aot_eager, ours lazy."""
    cpu = run(steps, CPU, quiet=quiet)
    rows = {"openxla plain": run(steps, dev, compiled="openxla", quiet=quiet),
            "openxla ours": run(steps, dev, resolve(spec), compiled="openxla", quiet=quiet),
            "aot_eager ours": run(steps, dev, resolve(spec), compiled=True, quiet=quiet),
            "lazy ours": run(steps, dev, resolve(spec), quiet=quiet)}
    for name, r in rows.items():
        print(f"  {name:15s} vs CPU: {_diffs(r, cpu) or 'equal'}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("examples", type=int)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    dev = torch_xla.device()
    hashes = GraphHashes()
    original = torch_xla._XLAC._get_graph_hash
    torch_xla._XLAC._get_graph_hash = hashes.wrap(original)  # restored below
    stats: collections.Counter = collections.Counter()
    seen = [0]

    @seed(a.seed)
    @settings(max_examples=a.examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(steps=programs(only=COMPILED_KINDS), spec=policy_specs(), quiet=st.booleans())
    def hunt(steps: Any, spec: Any, quiet: bool) -> None:
        seen[0] += 1
        try:
            outcome = check_openxla(steps, spec, quiet, dev, hashes)
        except AssertionError as e:
            outcome = "FAIL"
            print(f"FAIL at example {seen[0]}: {steps!r} {spec!r} quiet={quiet}\n  {str(e)[:300]}", flush=True)
        stats[outcome] += 1
        if outcome in ("FAIL", UPSTREAM):
            explain(steps, spec, quiet, dev)

    try:
        hunt()
    finally:
        torch_xla._XLAC._get_graph_hash = original
    print(dict(stats))


if __name__ == "__main__":
    main()
