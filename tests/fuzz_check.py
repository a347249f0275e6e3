"""The differential fuzz's comparison: a program checkpointed under a policy against its plain run.

Shared by the fuzz tests (``tests/fuzz/``), the regressions that replay a program the fuzz found, and
``tests/probes/openxla_fuzz_probe.py``. The property is the first law: the checkpointed run gives the
plain run's forward values, loss, grads, final inputs and RNG states, or raises a ``CheckpointError``
where it must (``same`` says where). Example::

    check(steps, "dots_saveable", torch.device("cpu"), EXACT)  # "exact", "both raised" or "checkpoint error"
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import assume, settings

import xla_ckpt
from fuzz_programs import (EXACT_AFTER, KINDS, NON_TENSOR_KINDS, PLAIN_CHANGING, PLAIN_OF, Step, bypassed, has_state,
                           resolve, rounding_amplified, run)

EXACT = {"rtol": 0.0, "atol": 0.0}
# XLA:CPU fuses the checkpointed and the plain graph differently: float32 reductions round differently.
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}
# The loaded profile's count is the CPU fuzz's; the others are fixed shares of it (full: 200/40/60).
CPU_EXAMPLES = settings.default.max_examples


def fuzz(share: float = 1.0) -> settings:
    """The profile's settings with ``share`` of its example count (at least 3)."""
    return settings(max_examples=max(3, round(CPU_EXAMPLES * share)))


def check(steps: tuple[Step, ...], spec, device: torch.device, tol: dict, hooks: str = "none",
          after=None, thread: bool = False, outer=None, backward=None) -> str:
    """Compare one program checkpointed under ``spec`` (its forward inside ``hooks``, ``after``
    modified in place after it, another thread replaying a random region all the while if
    ``thread``, backward inside the dispatch mode ``outer``) with its plain run (backward inside
    ``outer`` too), run as ``backward`` says (``BACKWARD``); return the outcome kind. With hooks, the plain
    run inside them must equal it too."""
    if device.type == "xla":  # not a difference of ours, but of XLA's fusion (see rounding_amplified)
        assume(not rounding_amplified(steps, hooks))
    if hooks.startswith("lossy"):  # plain autograd under a copying pair: rrelu's noise is packed before its op
        # fills it (the plain run reads uninitialised memory), and a write after a save goes unchecked
        assume(not any((s.kind == "dropout" and s.variant == 1) or s.kind.startswith("inplace") for s in steps))
    ref = run(steps, device, after=after, outer=outer, hooks=PLAIN_OF.get(hooks, hooks if hooks in PLAIN_CHANGING else "none"),
              backward=backward)
    if hooks not in ("none", *PLAIN_CHANGING):
        same(ref, run(steps, device, hooks=hooks, after=after, outer=outer, backward=backward), device,
              EXACT if device.type == "cpu" else tol, spec=False)
    got = run(steps, device, resolve(spec), hooks=hooks, after=after, thread=thread, outer=outer, backward=backward)
    return same(ref, got, device, tol, spec=True, steps=steps, after=after)


def same(ref, got, device, tol, spec: bool, steps=(), after=None) -> str:
    if ref.error is not None:
        assert got.error is not None, f"the plain run raised {ref.error!r}; the checkpointed one returned values"
        return "both raised"
    if got.error is not None:
        # Allowed where the recompute cannot see the forward's values: Python-side state fn reads,
        # or a tensor modified after the forward that a recomputed op reads (plain autograd did not
        # save it, so it does not raise).
        # Or fn wrote a region input that shares memory with another one (the plain run wrote b, bt
        # or bs, ``Outcome.aliased_written``): the library refuses it, naming both.
        shared = ref.aliased_written and "share memory" in str(got.error)
        assert spec and isinstance(got.error, xla_ckpt.CheckpointError) and (
            has_state(steps) or after not in EXACT_AFTER or shared or bypassed(steps, got.error)), (
            f"checkpointing raised where the plain run did not: {got.error!r}"
        )
        return "checkpoint error"
    assert ref.names == got.names, f"outputs differ: {ref.names} vs {got.names}"
    for name, r, g in zip(ref.names, ref.values, got.values, strict=True):
        if r is None:
            assert g is None, f"{name}: the plain run has no grad, the checkpointed one has"
            continue
        assert g is not None, f"{name} is None"
        # equal_nan: a program that overflows (exp of a large value, then inf * 0) has NaN in the plain
        # run too; the checkpointed one must have it at the same places (the hunt profile draws such programs).
        torch.testing.assert_close(g, r, msg=lambda m, name=name: f"{name} differs: {m}", equal_nan=True, **tol)
    assert torch.equal(got.rng[0], ref.rng[0]), "the CPU RNG state after backward differs"
    assert got.rng[1] == ref.rng[1], (f"torch_xla's RNG state after backward differs: {got.rng[1]} vs {ref.rng[1]} "
                                      "plain (read before the sync)")
    return "exact"


# ---------------------------------------------------------------------------- under torch.compile

# assert_close's defaults, not bit for bit: aot_eager runs each op as eager does, but the partitioned
# backward is another graph once recompute nodes join it, and it sums a gradient's terms in its own
# order (seen: 2.4e-7 on the input grad of a chain of linears, 1 ulp).
COMPILED_TOL: dict = {}
# Custom ops with no fake implementation (the (Tensor, int) pairs): torch cannot compile them at all.
COMPILED_KINDS = tuple(k for k in KINDS if k not in NON_TENSOR_KINDS)
# Kinds that write a tensor the region did not make (an input, a buffer), and the error that a read of
# it, recomputed, before the write gets under compile (``xla_ckpt._compile.input_writes``).
INPUT_WRITERS = ("inplace_input", "alias_input", "module",
                 "inplace_last")  # through a view of the input a, which needs grad (torch < 2.15)
INPUT_WRITE = "writes in place to an input of the compiled graph"


# Under ``torch.compile(backend="openxla")`` on XLA: a mismatch whose run hit a graph hash computed before for
# another IR text is torch_xla's, not ours (``tests/fuzz/test_fuzz_openxla.py`` says how it shows).
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
        return same(ref, got, device, XLA_TOL, spec=True, steps=steps)
    except AssertionError as against_plain:
        if hashes.collided:  # one of the two compiles ran another graph's program
            return UPSTREAM
        lazy = run(steps, device, quiet=quiet)
        try:
            same(lazy, ref, device, XLA_TOL, spec=False)
        except AssertionError:
            # The plain compile is off the lazy run (torch's compile of a buffer read back, XLA's draws
            # under the bridge): ours must equal the lazy run.
            return same(lazy, got, device, XLA_TOL, spec=True, steps=steps) + " (as lazy)"
        raise against_plain
