"""The differential fuzz under ``torch.compile``: random programs, compiled, against the same compile without xla_ckpt.

The lazy and eager engine are fuzzed in ``test_fuzz.py``; under ``torch.compile`` a region lowers to torch's
selective-checkpoint marks instead (``xla_ckpt._compile``), a different path with its own ways to go wrong
(an in-place write to a region input was recomputed from the written input: silently wrong gradients).
Each program runs twice under ``torch.compile(backend="aot_eager")`` on the CPU (AOTAutograd and the
min-cut partitioner, as inductor and torch_tpu use them; the graphs run as FX code, no code generation,
about half a second a program here): plain, and inside ``xla_ckpt.checkpoint`` under a random policy. The
property is the first law, as in ``test_fuzz.py``: the same forward values, loss, grads, hook records,
buffers and CPU RNG state (to ``COMPILED_TOL``), or a ``CheckpointError``. Where the plain compile itself fails
(torch cannot compile the program) there is nothing to compare; ``test_compiled_outcomes_are_mostly_exact``
keeps that from being most programs.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings

from fuzz_programs import NON_TENSOR_KINDS, KINDS, policy_specs, programs, resolve, run
from test_fuzz import _same, fuzz

CPU = torch.device("cpu")
# assert_close's defaults, not bit for bit: aot_eager runs each op as eager does, but the partitioned
# backward is another graph once recompute nodes join it, and it sums a gradient's terms in its own
# order (seen: 2.4e-7 on the input grad of a chain of linears, 1 ulp).
COMPILED_TOL: dict = {}
# Custom ops with no fake implementation (the (Tensor, int) pairs): torch cannot compile them at all.
COMPILED_KINDS = tuple(k for k in KINDS if k not in NON_TENSOR_KINDS)


def check_compiled(steps, spec) -> str:
    """Compare one compiled program, checkpointed under ``spec``, with its plain compile; the outcome kind."""
    ref = run(steps, CPU, compiled=True)
    if ref.error is not None:
        return "plain compile failed"
    got = run(steps, CPU, resolve(spec), compiled=True)
    return _same(ref, got, CPU, COMPILED_TOL, spec=True, steps=steps)


@fuzz(0.4)
@given(steps=programs(only=COMPILED_KINDS), spec=policy_specs())
def test_fuzz_compiled_cpu(steps, spec):
    check_compiled(steps, spec)


def test_compiled_outcomes_are_mostly_exact():
    """Most generated programs compile plainly and compare (not a fuzz of torch's own compile failures)."""
    kinds: dict[str, int] = {}

    @settings(max_examples=20)
    @given(steps=programs(only=COMPILED_KINDS), spec=policy_specs())
    def probe(steps, spec):
        k = check_compiled(steps, spec)
        kinds[k] = kinds.get(k, 0) + 1

    probe()
    assert kinds.get("exact", 0) >= 10, kinds
