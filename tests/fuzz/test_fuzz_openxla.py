"""The compiled differential fuzz under ``torch.compile(backend="openxla")``, on XLA:CPU.

``test_fuzz_compiled.py`` fuzzes the compiled lowering under ``aot_eager`` on the CPU. On XLA the lowering
takes its own paths (the fence on the incoming gradient, RNG functionalization through torch_xla's bridge,
``on_xla`` marks), and torch_xla's dynamo bridge runs the graphs. Same generator, same property (the first
law to ``XLA_TOL``: values, loss, grads, hook records, buffers, both RNG states, or a ``CheckpointError``);
where the plain compile is off the lazy run, ours must equal the lazy run.

One thing is not ours and is told apart: torch_xla reuses a compiled program by a hash of the lazy IR in
which a device-data leaf counts by shape only, so two programs that differ in which same-shaped input
feeds which op share a hash and the second runs the first's program (pytorch/xla#8353, open in 2.9). The
hunt met it in 2 of 300 programs (once in the plain compile), each exact in a fresh process, under
``aot_eager`` on XLA and lazily (``tests/probes/openxla_fuzz_probe.py``). A mismatch is accepted as that
only when the graph hash of one of its runs was computed before for another IR text in this process.
An AssertionError out of the bridge in the plain compile (a BatchNorm behind a hook's graph break) is the
plain compile failing. Slow tier: about 1.8 s a program here, 20 programs in the ``full`` profile.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import xla_ckpt
from fuzz_programs import policy_specs, programs, resolve, run
from test_fuzz import XLA_TOL, _same, fuzz
from test_fuzz_compiled import COMPILED_KINDS, INPUT_WRITE, INPUT_WRITERS

pytestmark = [pytest.mark.xla, pytest.mark.slow]

UPSTREAM = "graph-hash collision (pytorch/xla#8353)"


class GraphHashes:
    """The IR text behind each graph hash torch_xla's bridge computes, and whether a hash came back
    for another text since ``start`` (the bridge then runs the other graph's program)."""

    def __init__(self) -> None:
        self.texts: dict[bytes, str] = {}
        self.collided = False

    def start(self) -> None:
        self.collided = False

    def wrap(self, graph_hash: Any) -> Any:
        import torch_xla  # noqa: PLC0415

        def hashed(tensors: list[torch.Tensor]) -> bytes:
            h = graph_hash(tensors)
            text = torch_xla._XLAC._get_xla_tensors_text(tensors)  # nodes numbered in post-order: wiring shows
            if self.texts.setdefault(h, text) != text:
                self.collided = True
            return h

        return hashed


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


def check_openxla(steps, spec, quiet: bool, device: torch.device, hashes: GraphHashes) -> str:
    """Compare one program compiled with openxla, checkpointed under ``spec``, with its plain compile."""
    hashes.start()
    try:
        ref = run(steps, device, compiled="openxla", quiet=quiet)
    except AssertionError:  # torch_xla's bridge asserts (a None backward input after a BatchNorm's graph break)
        return "plain compile failed"
    if ref.error is not None:
        return "plain compile failed"
    got = run(steps, device, resolve(spec), compiled="openxla", quiet=quiet)
    if isinstance(got.error, xla_ckpt.CheckpointError) and INPUT_WRITE in str(got.error):
        assert any(s.kind in INPUT_WRITERS for s in steps), got.error
        return "checkpoint error"
    try:
        return _same(ref, got, device, XLA_TOL, spec=True, steps=steps)
    except AssertionError as against_plain:
        if hashes.collided:  # one of the two compiles ran another graph's program
            return UPSTREAM
        lazy = run(steps, device, quiet=quiet)
        try:
            _same(lazy, ref, device, XLA_TOL, spec=False)
        except AssertionError:
            # The plain compile is off the lazy run (torch's compile of a buffer read back, XLA's draws
            # under the bridge): ours must equal the lazy run.
            return _same(lazy, got, device, XLA_TOL, spec=True, steps=steps) + " (as lazy)"
        raise against_plain


@fuzz(0.1)
@given(steps=programs(only=COMPILED_KINDS), spec=policy_specs(), quiet=st.booleans())
def test_fuzz_openxla(graph_hashes, xla_device, steps, spec, quiet):
    check_openxla(steps, spec, quiet, xla_device, graph_hashes)
