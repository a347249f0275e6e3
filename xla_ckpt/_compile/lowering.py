"""The lowering of one region under ``torch.compile``: torch's ``policy_fn`` asks our policy per op.

``Lowering.policy_fn`` is what torch's selective checkpoint calls while AOTAutograd traces a region
(``_compile.marks`` builds the ``context_fn`` around it): each ATen op becomes a ``CompiledOpCall``
the policy decides on, and the decision becomes torch's mark (``mark_of``). Random ops, mutations, a
planning policy (``_compile.budget``) and ``tag()`` names (an ``alias`` node annotated with
``TAG_KEY``) are handled here, as the eager engine handles them per op.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._base.warn import warn_once
from xla_ckpt._compile.budget import register_region
from xla_ckpt._compile.deferred import Deferred
from xla_ckpt._compile.input_writes import InputWrites
from xla_ckpt._compile.names import call_site_name, child, module_entries
from xla_ckpt._compile.opcall import CompiledOpCall, skipped
from xla_ckpt._record.opcall import Decision, OpCall, Policy
from xla_ckpt._record.record import draws, op_info
from xla_ckpt._policy.decide import Why, decide
from xla_ckpt._policy.plan import plans

_WHERE = "checkpoint policy (torch.compile)"

__all__ = ["Lowering", "mark_of", "warn_old_torch", "TAG_KEY"]

aten = torch.ops.aten
TAG_KEY = "xla_ckpt_tag"  # the custom node-meta key ``tag()`` writes under compile (torch >= 2.13)


def warn_old_torch() -> None:
    warn_once(
        ("compiled", "old-torch"),
        f"xla_ckpt under torch.compile on torch {torch.__version__}: policies see OpCall.out=None (nbytes "
        "and flops still work) and no xla_ckpt.tag names (tag=None), because this torch asks a selective-"
        "checkpoint policy before the op runs and has no torch.fx.traceback.annotate. Name-based policies "
        "(save_only_these_names, ...) therefore recompute every tagged value. Use torch >= 2.13 for tags.",
    )


# --------------------------------------------------------------------------- the lowering

@dataclass(eq=False)
class _Decided:
    """One decision made while tracing (kept for tests and the report)."""

    call: OpCall
    decision: Decision
    nodes: list[Any] = field(default_factory=list)


class Lowering:
    """One checkpoint region being traced: asks the policy for each op, as the eager engine would."""

    def __init__(self, policy: Policy, module: Optional[nn.Module], direct: bool, on_xla: bool = False,
                 save_all: bool = False) -> None:
        self.policy = policy
        self.planner = plans(policy)
        self.on_xla = on_xla
        self.module = module
        # Module entries of the region's call site: ops run below them. A wrapped module is on the
        # call site's stack already; a module passed as ``fn`` (``direct``), or the first module a
        # plain function calls, is the first entry below, and named as the region's root (as eager).
        site = module_entries(_compat.current_node_meta())
        self.base_depth = len(site)
        self.skip_root = direct or module is None
        self.prefix = call_site_name(site, None if direct else module)
        self.decided: list[_Decided] = []
        self.pending: Optional[_Decided] = None
        # The traced graph's length when the previous op was asked about: the nodes after it are the next
        # op's. From the region's start, so the first op has its nodes too (a write to an input there).
        self.graph_len: Optional[int] = self._graph_len()
        self.deferred = Deferred()  # a forward-time error, raised as the forward exits (see _compile.deferred)
        # the region's in-place writes to graph inputs (_compile.input_writes)
        self.input_writes = InputWrites(statistics_recomputable=not on_xla)
        self.save_all = save_all  # a user's saved-tensor pair is open around the compile (``_compile.marks``)

    # -- module names -----------------------------------------------------------------------------
    def module_name(self, meta: dict[str, Any]) -> str:
        below = module_entries(meta)[self.base_depth:]
        if self.skip_root and below:
            root_path = below[0][0]
            below = below[1:]
        else:
            root_path = ""
        names, cur, parent_path = [], self.module, root_path
        for path, typ in below:
            found = child(cur, path, typ) if cur is not None else None
            if found is not None:
                name, cur = found
            else:  # no module object to walk (a plain function's region): the path below its root
                name, cur = path[len(parent_path):].lstrip(".") if path.startswith(parent_path) else path, None
            names.append(name)
            parent_path = path
        return ".".join(p for p in [self.prefix, *names] if p)

    # -- the policy_fn torch calls --------------------------------------------------------------
    def policy_fn(self, ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
        from torch.utils.checkpoint import CheckpointPolicy  # noqa: PLC0415

        if ctx.is_recompute:  # torch's recompute is a plain ``with``: an error leaves it cleanly
            return self._mark(ctx, op, args, kwargs)
        if self.deferred.error is not None:
            return CheckpointPolicy.PREFER_RECOMPUTE  # the step fails as the forward exits
        try:
            return self._mark(ctx, op, args, kwargs)
        except Exception as e:  # raised out of torch's forward it would leave torch's mode installed
            self.deferred.keep(e)
            return CheckpointPolicy.PREFER_RECOMPUTE

    def _mark(self, ctx: Any, op: Any, args: tuple, kwargs: dict) -> Any:
        from torch.utils.checkpoint import CheckpointPolicy  # noqa: PLC0415

        new_nodes = self._new_nodes()
        if isinstance(op, torch._ops.OpOverload) and op.is_view and self.input_writes.views_input(args):
            return CheckpointPolicy.MUST_SAVE  # a view of a written input's clone (torch < 2.15; _compile.input_writes)
        if not isinstance(op, torch._ops.OpOverload) or skipped(op):
            if op is aten.alias.default:
                self._maybe_tag(new_nodes)
            return CheckpointPolicy.PREFER_RECOMPUTE
        info = op_info(op)
        keep = False  # rule 1 of ``decide``: the forward's values must be kept
        if info.random:  # the op's tag; whether this call draws is ``draws`` (SDPA at dropout_p=0 does not)
            if not _traced(args, kwargs) and draws(info, args, kwargs):
                # Real tensors: torch's SAC runs at step time (backend="eager", no AOTAutograd), and
                # torch 2.9 runs that checkpoint with preserve_rng_state=False (its
                # tag_activation_checkpoint sets it for tracing): the recompute would draw fresh
                # numbers, a wrong gradient (max 3.3 on a 2-block MLP with dropout). Saving the op
                # does not help there (eager dropout is bernoulli_ then div_ in place on the saved
                # tensor). The first law: say so instead.
                where = self.module_name(_compat.current_node_meta()) or "(the region root)"
                raise CheckpointError(
                    f"xla_ckpt: random op {op} in module '{where}' "
                    "cannot be checkpointed under torch.compile with a backend that runs torch's selective "
                    "checkpoint eagerly (backend='eager'): torch recomputes it with fresh random numbers, "
                    "a wrong gradient. Compile with backend='aot_eager', 'inductor' or 'openxla', or run "
                    "the model uncompiled (the eager engine replays the RNG)."
                )
            if self.on_xla:
                # A random op marked for recompute makes the min-cut partitioner functionalise its
                # RNG (run_and_save_rng_state), which torch_xla's openxla bridge cannot run ("could
                # not find kernel ... Functionalize"). On XLA it is saved instead: the same values,
                # where the eager engine replays the RNG. (Dropout's output is what the next op
                # reads anyway.) By the op's tag, not the call's: the partitioner functionalises every
                # tagged op marked for recompute (functionalize_rng_ops), drawing or not.
                keep = True
            # No backward (nothing the region returns needs a gradient): nothing is recomputed, but newer
            # torch (2.15) runs its forward-loss-backward remat pass on such a graph, which refuses a random
            # op marked for recompute (a RuntimeError where the plain compile runs; torch's own checkpoint
            # too). Saved, the op just runs: the same numbers.
            keep = keep or _inference_graph()
        meta = _compat.current_node_meta()
        mutable = op._schema.is_mutable
        # Never recomputed from the input it wrote (``_compile.input_writes``).
        keep = keep or (mutable and self.input_writes.writes_input(op, args, kwargs, self.module_name(meta), new_nodes))
        # Unmarked for the min-cut: partitioned as the plain compile (``_compile.marks``).
        if self.save_all and not keep:
            return CheckpointPolicy.PREFER_SAVE
        call = CompiledOpCall(op, args, kwargs, getattr(ctx, "op_output", None), self.module_name(meta))
        decision, why = decide(self.policy, call, keep, mutable, self.planner, _WHERE)
        if why is Why.KEEP:
            return CheckpointPolicy.MUST_SAVE
        if why is Why.WRITES:
            return CheckpointPolicy.MUST_RECOMPUTE  # a mutation must re-run on the recomputed tensors
        if why is Why.PLANNED:
            # Decided with the whole region, on the joint graph before the min-cut (``_compile.budget``):
            # PREFER_SAVE until then, a mark the min-cut ignores (unplanned, the region runs unmarked).
            # Whether it is recomputed is not known yet: its reads count as a recomputed op's.
            register_region(meta.get("ac_graph_id"), self.policy)
            self.input_writes.read(op, args, kwargs, call.module)
            return CheckpointPolicy.PREFER_SAVE
        decided = _Decided(call, decision, new_nodes)
        self.decided.append(decided)
        self.pending = decided
        if not decision.keeps:
            self.input_writes.read(op, args, kwargs, call.module)
        return mark_of(decision)

    def _new_nodes(self) -> list[Any]:
        """FX nodes traced since the previous op (torch >= 2.13 asks after the op: they are its nodes)."""
        if not _compat.SAC_GIVES_OP_OUTPUT:
            return []
        mode = _proxy_mode()
        if mode is None:
            return []
        nodes = list(mode.tracer.graph.nodes)
        start = self.graph_len if self.graph_len is not None else len(nodes)
        self.graph_len = len(nodes)
        return nodes[start:] if self.graph_len >= start else []

    @staticmethod
    def _graph_len() -> Optional[int]:
        mode = _proxy_mode() if _compat.SAC_GIVES_OP_OUTPUT else None
        return None if mode is None else len(mode.tracer.graph.nodes)

    def _maybe_tag(self, alias_nodes: list[Any]) -> None:
        """``tag()`` under compile is an ``alias`` annotated with the name: name the op that made its input."""
        name = (_compat.current_node_meta().get("custom") or {}).get(TAG_KEY)
        pending = self.pending
        if name is None or pending is None or not alias_nodes:
            return
        # Walk back through the ops the policy is never asked about (views, detach, ``_unsafe_view``:
        # ``skipped``), as eager names the op that made the value. torch 2.15 traces a 3-D
        # ``nn.Linear``'s output reshape as ``aten._unsafe_view`` (2.13: ``aten.view``), which is no
        # view by its schema: stopping there lost ``tag(self.qkv(x), "qkv")`` under compile.
        src = next((n for n in alias_nodes if n.op == "call_function"), None)
        while src is not None and isinstance(getattr(src, "target", None), torch._ops.OpOverload):
            if src in pending.nodes:
                break
            through = src.target.is_view or skipped(src.target)
            src = src.args[0] if (through and src.args and isinstance(src.args[0], torch.fx.Node)) else None
        if src is None or src not in pending.nodes:
            return  # the tagged value was not made by the latest op (as in eager: the tag is ignored)
        pending.call = replace(pending.call, tag=name)
        pending.decision = decide(self.policy, pending.call, False, False, False, _WHERE)[0]
        # torch marked the op's nodes already; the decision with the tag replaces that mark.
        for n in pending.nodes:
            if "recompute" in n.meta:
                n.meta["recompute"] = mark_of(pending.decision)


def mark_of(decision: Decision) -> Any:
    """torch's SAC mark for a decision; OFFLOAD has none, so it is kept on the device (warned once)."""
    from torch.utils.checkpoint import CheckpointPolicy  # noqa: PLC0415

    if decision is Decision.OFFLOAD:

        warn_once(("compiled", "offload"), "xla_ckpt: Decision.OFFLOAD under torch.compile (and scan_layers): torch's "
                  "selective checkpointing has no offload mark, so offloaded values are saved on the device "
                  "(MUST_SAVE). To offload, run the model uncompiled (the eager and XLA engines offload); to keep "
                  "the device memory down under compile, recompute more instead "
                  "(e.g. dots_with_no_batch_dims_saveable).")
    return CheckpointPolicy.MUST_SAVE if decision.keeps else CheckpointPolicy.PREFER_RECOMPUTE


def _proxy_mode() -> Any:
    from torch.fx.experimental.proxy_tensor import get_proxy_mode  # noqa: PLC0415

    return get_proxy_mode()


def _inference_graph() -> bool:
    """Whether AOTAutograd is tracing a forward-only graph: one without tangents (torch names a joint
    graph's gradient inputs ``tangents_*``, which its partitioner's RNG pass looks for too)."""
    mode = _proxy_mode()
    if mode is None:
        return False
    return not any(n.name.startswith("tangents") for n in mode.tracer.graph.find_nodes(op="placeholder"))


def _traced(args: tuple, kwargs: dict) -> bool:
    """Whether AOTAutograd is tracing (fake tensors), not torch's SAC running at step time. A factory
    op (``randn(shape)``, ``randperm(n)``) has no tensor to look at: the fake mode on the stack says it
    (judged by the arguments alone, such an op would be refused as if the backend were ``eager``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake  # noqa: PLC0415
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: PLC0415

    if any(is_fake(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)):
        return True
    return any(isinstance(m, FakeTensorMode) for m in _get_current_dispatch_mode_stack())
