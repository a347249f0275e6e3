"""Gradient-equality helpers shared by the tests: outputs, input grads and every parameter grad."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch
from torch.utils._pytree import tree_leaves

# The repository's root and the subprocess probes, wherever a test file sits in the tests tree.
ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBES_DIR = os.path.join(ROOT_DIR, "tests", "probes")


def grads_of(
    fn: Callable[..., Any], inputs: Sequence[torch.Tensor], params: Sequence[torch.Tensor], seed: int = 0
) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Run ``fn(*inputs)``, backprop a fixed random cotangent, return (outputs, grads of inputs+params)."""
    for t in list(inputs) + list(params):
        t.grad = None
    out = fn(*inputs)
    outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
    gen = torch.Generator().manual_seed(seed)
    cot = [torch.randn(o.shape, generator=gen, dtype=torch.float32).to(o.device, o.dtype) for o in outs]
    diff = [(o, c) for o, c in zip(outs, cot, strict=True) if o.requires_grad]
    torch.autograd.backward([o for o, _ in diff], [c for _, c in diff])
    grads = [t.grad for t in list(inputs) + list(params)]
    if any(o.device.type == "xla" for o in outs):
        import torch_xla

        # One graph for forward+backward and every grad; otherwise each later .cpu() compiles its own.
        torch_xla.sync()
    return [o.detach() for o in outs], grads


def assert_same(
    ref: tuple[list[torch.Tensor], list[torch.Tensor | None]],
    got: tuple[list[torch.Tensor], list[torch.Tensor | None]],
    names: Sequence[str] | None = None,
    **tol: Any,
) -> None:
    """Outputs and every gradient equal (``assert_close``), no ``None`` grad where the reference has one."""
    ref_out, ref_g = ref
    got_out, got_g = got
    assert len(ref_out) == len(got_out)
    for i, (r, g) in enumerate(zip(ref_out, got_out, strict=True)):
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, i=i: f"output {i}: {m}", **tol)
    assert len(ref_g) == len(got_g)
    for i, (r, g) in enumerate(zip(ref_g, got_g, strict=True)):
        label = names[i] if names else f"grad {i}"
        if r is None:
            assert g is None, f"{label}: expected no grad, got one"
            continue
        assert g is not None, f"{label}: grad is None"
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, label=label: f"{label}: {m}", **tol)


class OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts aten ops by overload packet (used to prove work was or was not done)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[Any, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.counts[func.overloadpacket] = self.counts.get(func.overloadpacket, 0) + 1
        return func(*args, **(kwargs or {}))

    def count(self, *packets: Any) -> int:
        return sum(self.counts.get(p, 0) for p in packets)


def torch_sac_context(policy_fn: Callable[..., Any], kept: list[torch.Tensor]) -> Callable[[], Any]:
    """A ``context_fn`` for torch's selective checkpoint that also records what it keeps, publicly.

    torch SAC keeps the outputs its policy marks MUST_SAVE / PREFER_SAVE (its documented contract).
    A dispatch mode entered above SAC's own forward mode sees each op's outputs and asks the same
    (pure) policy, so the kept tensors are known without reading SAC's private cache, on any torch.
    """
    from torch.utils.checkpoint import CheckpointPolicy, SelectiveCheckpointContext, create_selective_checkpoint_contexts

    class Observe(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            decision = policy_fn(SelectiveCheckpointContext(is_recompute=False), func, *args, **kwargs)
            if decision in (True, CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
                kept.extend(t for t in tree_leaves(out) if isinstance(t, torch.Tensor))
            return out

    def context_fn() -> Any:
        import contextlib

        forward, recompute = create_selective_checkpoint_contexts(policy_fn)

        @contextlib.contextmanager
        def both() -> Any:
            with forward, Observe():
                yield

        return both(), recompute

    return context_fn


def replay_kind(direct: bool) -> Any:
    """XLA regions replay their recorded program (``direct``, the default) or run ``fn`` again."""
    import contextlib

    from xla_ckpt._engine.direct import general_replay

    return contextlib.nullcontext() if direct else general_replay()


def counting_bf16_pair() -> tuple[Callable[[torch.Tensor], Any], Callable[[Any], torch.Tensor], list[int]]:
    """A user's lossy saved-tensor pair (floating tensors packed as bf16) and its [pack, unpack] call counts."""
    counts = [0, 0]

    def pack(t: torch.Tensor) -> Any:
        counts[0] += 1
        return t.to(torch.bfloat16) if t.is_floating_point() else t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        counts[1] += 1
        return t.float() if t.dtype == torch.bfloat16 else t

    return pack, unpack, counts
