"""The compiled differential fuzz under ``torch.compile(backend="openxla")``, on XLA:CPU.

``test_fuzz_compiled.py`` fuzzes the compiled lowering under ``aot_eager`` on the CPU. On XLA the lowering
takes its own paths (the fence on the incoming gradient, RNG functionalization through torch_xla's bridge,
``on_xla`` marks), and torch_xla's dynamo bridge runs the graphs. Same generator, same property (the first
law to ``XLA_TOL``: values, loss, grads, hook records, buffers, both RNG states, or a ``CheckpointError``);
where the plain compile is off the lazy run, ours must equal the lazy run.

One thing is not ours and is told apart: torch_xla reuses a compiled program by a hash of the lazy IR in
which a device-data leaf counts by shape only, so two programs that differ in which same-shaped input
feeds which op share a hash and the second runs the first's program (pytorch/xla#8353, open in 2.9). A
hunt meets it in about 2 of 300 programs (in the plain compile too), each exact in a fresh process, under
``aot_eager`` on XLA and lazily (``tests/probes/openxla_fuzz_probe.py``). A mismatch is accepted as that
only when the graph hash of one of its runs was computed before for another IR text in this process.
An AssertionError out of the bridge in the plain compile (a BatchNorm behind a hook's graph break) is the
plain compile failing. Slow tier: about 1.8 s a program here, 20 programs in the ``full`` profile.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz_check import COMPILED_KINDS, GraphHashes, check_openxla, fuzz
from fuzz_programs import policy_specs, programs

pytestmark = [pytest.mark.xla, pytest.mark.slow]


@pytest.fixture(scope="module")
def graph_hashes(xla_device) -> Iterator[GraphHashes]:
    import torch_xla  # noqa: PLC0415

    hashes = GraphHashes()
    original = torch_xla._XLAC._get_graph_hash  # looked up by the bridge at each compile
    torch_xla._XLAC._get_graph_hash = hashes.wrap(original)
    try:
        yield hashes
    finally:
        torch_xla._XLAC._get_graph_hash = original


@fuzz(0.1)
@given(steps=programs(only=COMPILED_KINDS), spec=policy_specs(), quiet=st.booleans())
def test_fuzz_openxla(graph_hashes, xla_device, steps, spec, quiet):
    check_openxla(steps, spec, quiet, xla_device, graph_hashes)
