"""Helpers shared by the tests: gradient equality, the device's RNG and sync, example policies, probes.

Every test module imports shared code from here or from another support module at the top of ``tests/``
(``fuzz_programs``, ``fuzz_check``, ...), never from another test module (``test_imports.py`` checks).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any, Callable, Sequence

import torch
from torch.utils._pytree import tree_leaves

from xla_ckpt import policies

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


def loss_grads(
    loss_fn: Callable[[], torch.Tensor], tensors: Sequence[torch.Tensor], seed: int | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Clear the grads of ``tensors``, seed torch's CPU generator with ``seed`` (if given), backprop the
    scalar ``loss_fn()`` returns; return ([loss], grads of ``tensors``), the form ``assert_same`` compares.

    Example: ``assert_same(loss_grads(lambda: ref(x).sum(), list(ref.parameters())), loss_grads(...))``.
    """
    for t in tensors:
        t.grad = None
    if seed is not None:
        torch.manual_seed(seed)
    loss = loss_fn()
    loss.backward()
    return [loss.detach()], [t.grad for t in tensors]


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
    """Counts aten ops by overload packet (to prove work was or was not done)."""

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

    from switches import general_replay

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


def sync(device: torch.device) -> None:
    """Run the pending lazy XLA graph on ``device`` (nothing on an eager device)."""
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()


def seed_all(device: torch.device, seed: int = 1234) -> None:
    """Seed torch's CPU generator and, on XLA, torch_xla's generator of ``device`` with ``seed``."""
    torch.manual_seed(seed)
    if device.type == "xla":
        import torch_xla.core.xla_model as xm

        xm.set_rng_state(seed, device)


def torch_dots(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """A torch selective-checkpoint policy: save matmuls (``policies.DOT_OPS``), recompute the rest."""
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.MUST_SAVE if op.overloadpacket in policies.DOT_OPS else CheckpointPolicy.PREFER_RECOMPUTE


_aten = torch.ops.aten
# Parameters for the registered policies that need some; a newly registered policy that needs
# parameters fails test_engine's test_every_policy_is_exercised until it gets an example here.
EXAMPLE_PARAMS: dict[str, dict[str, Any]] = {
    "save_only_these_names": {"names": ["qkv", "mlp_up", "up"]},
    "save_any_names_but_these": {"names": ["attn_scores", "up"]},
    "save_ops": {"ops": [_aten.mm, _aten.addmm]},
    "recompute_ops": {"ops": [_aten.gelu, _aten.mm]},
    "any_of": {"policies": ["dots_with_no_batch_dims_saveable", policies.save_ops(_aten.gelu)]},
    "all_of": {"policies": ["dots_saveable", policies.save_ops(_aten.addmm)]},
    "from_torch": {"fn": torch_dots},
    "offload": {"policy": "dots_saveable"},
    "save_and_offload_only_these_names": {"names_which_can_be_saved": ["qkv"],
                                          "names_which_can_be_offloaded": ["mlp_up", "up", "attn_out"]},
    "memory_budget": {"fraction": 0.4},
}


def example_policy(name: str) -> Any:
    """The registered policy ``name``, built with its ``EXAMPLE_PARAMS`` (none if it takes none)."""
    return policies.get(name, **EXAMPLE_PARAMS.get(name, {}))


def free_port() -> int:
    """A TCP port free on this host now, for one torch.distributed rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A gloo rank process that aborts while tearing down (seen once on torch 2.13 under heavy load, not
# reproducible alone): a crash of the launcher, not a result. One retry; any other failure is a failure.
_TEARDOWN_CRASH = "terminate called without an active exception"


def run_probe(script: str, *args: Any, python: str | None = None) -> Any:
    """Run ``tests/probes/<script>`` in a fresh process; the JSON its last stdout line holds.

    For the gloo probes the last argument is the rendezvous port: a retry after a teardown crash gets
    a fresh one. ``python``: another interpreter (a venv with extra packages), else this one.
    Example: ``run_probe("ddp_probe.py", out, free_port())``.
    """
    env = {**os.environ, "PYTHONPATH": ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [python or sys.executable, os.path.join(PROBES_DIR, script), *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0 and _TEARDOWN_CRASH in out.stderr and script in ("fsdp2_probe.py", "ddp_probe.py"):
        out = subprocess.run(cmd[:-1] + [str(free_port())], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
