"""``scan_layers``: torch_xla's scan over identical layers, the policy deciding what the body saves.

torch_xla traces one layer with AOTAutograd and compiles that body once for every layer (a while
loop in HLO), so trace and compile time stay flat in depth. What the body keeps for backward is
chosen by the AOTAutograd partition function; here it is the min-cut partitioner with every
forward node of the body marked by our policy (SAVE -> ``MUST_SAVE``, RECOMPUTE ->
``PREFER_RECOMPUTE``, OFFLOAD -> ``MUST_SAVE`` with a warning: no offload mark exists), the same
marks the compiled lowering (``_compile.marks``) gives torch.

What the policy sees in the body: ``op``, ``args``, ``kwargs`` and ``out`` as fake tensors (shapes,
no values), ``nbytes`` and ``flops``; ``module`` is "" and ``tag`` None (the body is traced without
module information). The ops are those torch_xla traces for the body: a ``Linear`` is ``mm`` + ``add``
and a ``LayerNorm`` a batch norm on XLA, so op-based policies (``dots_saveable``) match as on XLA.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Optional

import torch
from torch import nn
from torch.fx import GraphModule, Node
from torch.utils._pytree import tree_map

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._compile.lowering import mark_of
from xla_ckpt._compile.opcall import CompiledOpCall, skipped
from xla_ckpt._policy.plan import plans
from xla_ckpt._record.opcall import Decision, Policy
from xla_ckpt._policy.decide import Why, decide
from xla_ckpt._policy.registry import resolve

__all__ = ["scan_layers", "partition_fn"]

_PARTITIONS: dict[int, tuple[Policy, Any]] = {}


def _forward_nodes(joint: GraphModule, num_fwd_outputs: int) -> set[Node]:
    """Nodes the forward outputs are computed from (the rest of the joint graph is backward)."""
    out = next(n for n in joint.graph.nodes if n.op == "output")
    todo = [a for a in out.args[0][:num_fwd_outputs] if isinstance(a, Node)]
    seen: set[Node] = set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(n.all_input_nodes)
    # Multi-output ops: every output of a forward op is forward (a norm's mean and rstd too).
    for n in list(seen):
        seen.update(u for u in n.users if u.target is operator.getitem)
    return seen


def mark(joint: GraphModule, num_fwd_outputs: int, policy: Policy) -> dict[str, Decision]:
    """Write the policy's marks on the forward nodes of ``joint``; returns the decisions by node name."""
    forward = _forward_nodes(joint, num_fwd_outputs)
    from torch.utils.checkpoint import CheckpointPolicy  # noqa: PLC0415

    _no_random_ops(n for n in joint.graph.nodes if n in forward)
    val = lambda a: a.meta.get("val") if isinstance(a, Node) else a  # noqa: E731
    decided: dict[str, Decision] = {}
    for n in joint.graph.nodes:
        if n.op != "call_function" or n not in forward:
            continue
        n.meta["ac_graph_id"] = 0
        if n.target is operator.getitem:
            continue  # marked with its producer below
        if not isinstance(n.target, torch._ops.OpOverload) or skipped(n.target):
            n.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
            continue
        args, kwargs = tree_map(val, (n.args, n.kwargs))
        call = CompiledOpCall(n.target, tuple(args), dict(kwargs), n.meta.get("val"))
        # Random ops are refused above and planning policies by ``_per_op``: only the write rule and the policy.
        decision, why = decide(policy, call, keep=False, writes=n.target._schema.is_mutable, planning=False,
                               where="scan_layers")
        if why is Why.WRITES:
            n.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            continue
        decided[n.name] = decision
        n.meta["recompute"] = mark_of(decision)
        for u in n.users:
            if u.target is operator.getitem:
                u.meta["recompute"] = n.meta["recompute"]
    return decided


_FIX = ("Turn the random ops off in the scanned layers (dropout p=0, e.g. attention_dropout=0.0 and "
        "hidden_dropout=0.0 in a Hugging Face config, or model.eval()), or checkpoint the layers without scan "
        "(xla_ckpt.apply(model, preset) or xla_ckpt.checkpointed(layer): the eager engine replays the RNG).")


def _random_error(what: str) -> CheckpointError:
    # Recomputed, the min-cut partitioner wraps a random op in run_and_save_rng_state, which torch_xla
    # cannot run ("could not find kernel ... at dispatch key Functionalize"); saved, torch_xla 2.9's scan
    # fails to stack its boolean mask ("Dynamic update slice ... PRED vs F32"). Neither is a gradient.
    return CheckpointError(
        f"xla_ckpt.scan_layers: {what} in the scanned layer body: torch_xla's scan cannot run random ops in "
        f"a layer body (recomputed or saved, on torch_xla 2.9), and nothing ran. {_FIX}")


def _no_random_ops(nodes: Iterable[Node]) -> None:
    """Raise before the traced body runs if it draws random numbers (functional dropout, ``torch.rand``)."""
    for n in nodes:
        if n.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()):
            name = str(n.target.overloadpacket)  # type: ignore[union-attr]
            what = f"random op {name} ({'dropout' if 'dropout' in name or 'bernoulli' in name else 'random'})"
            raise _random_error(what)


def spmd_error(who: str) -> Optional[str]:
    """Why torch_xla's scan cannot run under SPMD here (jax / torchax missing), or None."""
    from xla_ckpt._base import xla as _xla  # noqa: PLC0415

    missing = _xla.spmd_scan_missing()
    if missing is None:
        return None
    return (f"xla_ckpt.{who}: SPMD is on (torch_xla.runtime.use_spmd()) and {missing} cannot be imported: "
            "torch_xla's scan shards each layer's gradients like its inputs with shard_as, a JAX function "
            "(torch_xla[pallas] installs jax and torchax; pip install torchax jax==0.7.1 jaxlib==0.7.1 for "
            "torch_xla 2.9); nothing ran or changed. Install them, or run without scan.")


def _dropout_modules(layers: list[nn.Module]) -> None:
    """Raise, before torch_xla traces anything, on a dropout module that draws (training, p > 0)."""
    for i, layer in enumerate(layers):
        for name, m in layer.named_modules():
            if isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0:
                where = f"layers[{i}].{name}" if name else f"layers[{i}]"
                raise _random_error(f"dropout: {where} is {type(m).__name__}(p={m.p}) in training mode (random op "
                                    "aten.native_dropout / aten.bernoulli)")


def partition_fn(policy: Any) -> Any:
    """The AOTAutograd partition function that saves what ``policy`` saves (one per policy, reused).

    torch_xla caches a traced layer by ``id(partition_fn)``, so the same policy gets the same function.
    """
    pol = _per_op(policy)
    cached = _PARTITIONS.get(id(pol))
    if cached is not None and cached[0] is pol:
        return cached[1]

    def partition(joint: GraphModule, joint_inputs: Any, *, num_fwd_outputs: int, **kw: Any) -> Any:
        from torch._functorch.partitioners import min_cut_rematerialization_partition  # noqa: PLC0415

        mark(joint, num_fwd_outputs, pol)
        return min_cut_rematerialization_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kw)

    partition.policy = pol  # type: ignore[attr-defined]
    _PARTITIONS[id(pol)] = (pol, partition)
    return partition


def _per_op(policy: Any) -> Policy:
    pol = resolve(policy, where="scan_layers policy")
    if plans(pol):
        raise TypeError(f"xla_ckpt.scan_layers: {pol!r} plans a whole eager region; the scan body is marked op "
                        "by op, so use a per-op policy here (e.g. dots_with_no_batch_dims_saveable)")
    return pol


def scan_layers(layers: Iterable[nn.Module], x: torch.Tensor, *, policy: Any = "nothing_saveable") -> torch.Tensor:
    """Run ``layers`` in sequence on ``x`` with torch_xla's scan, ``policy`` deciding what each saves.

    Args:
        layers: modules of identical structure (same parameter shapes, same computation), not
            wrapped with :func:`xla_ckpt.checkpointed` (the scan body is traced once, not run).
        x: the first layer's input, on an XLA device.
        policy: a registered policy name or any ``(OpCall) -> Decision`` (``module`` is "" and
            ``tag`` None in the scan body).

    Equivalent to ``for layer in layers: x = layer(x)`` with equal gradients; one layer body is
    traced and compiled for all layers. Needs torch_xla. Random ops (dropout with p > 0 in training)
    cannot run in torch_xla's scan body: a ``CheckpointError`` names them before anything runs.

    Example:
        >>> y = xla_ckpt.scan_layers(model.layers, x, policy="dots_saveable")
    """
    from xla_ckpt._api import wrap as _wrap
    from xla_ckpt._base import xla as _xla  # noqa: PLC0415

    layers = list(layers)
    if not isinstance(x, torch.Tensor) or not _xla.is_xla(x):
        # (An XLA tensor implies torch_xla; asking find_spec first would break Dynamo's graph.)
        if not _xla.available():
            raise RuntimeError("xla_ckpt.scan_layers needs torch_xla: pip install -e '.[xla]'")
        raise ValueError(f"xla_ckpt.scan_layers: x must be a tensor on an XLA device, got {_describe(x)}")
    for i, layer in enumerate(layers):
        if not isinstance(layer, nn.Module):
            raise TypeError(f"xla_ckpt.scan_layers: layers[{i}] is {type(layer).__name__}, not an nn.Module")
        if _wrap.checkpoint_policy(layer) is not None:
            raise ValueError(
                f"xla_ckpt.scan_layers: layers[{i}] ({type(layer).__name__}) is wrapped with checkpointed(); "
                "scan traces the layer body once, so pass the policy to scan_layers and unwrap the layers "
                "with xla_ckpt.uncheckpointed(layer)"
            )
    if _compat.is_compiling():
        # torch_xla's scan traces and compiles the body itself, which Dynamo cannot trace. Under
        # torch.compile the layers run as a loop of compiled regions with the policy's marks
        # (``_compile.marks``): the same saves, one graph (Dynamo unrolls the loop), equal gradients.
        from xla_ckpt._compile import marks as _compiled  # noqa: PLC0415

        pol = _per_op(policy)
        for layer in layers:
            x = _compiled.checkpoint(layer, (x,), {}, pol)
        return x
    _dropout_modules(layers)
    why = spmd_error("scan_layers")
    if why is not None:
        raise CheckpointError(why)
    fn = partition_fn(policy)
    from torch_xla.experimental.scan_layers import scan_layers as xla_scan_layers  # noqa: PLC0415

    return xla_scan_layers(layers, x, partition_fn=fn)


def _describe(x: Any) -> str:
    return f"a tensor on {x.device}" if isinstance(x, torch.Tensor) else type(x).__name__
