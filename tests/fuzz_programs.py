"""Random programs for the differential fuzz test: a menu of ops, run with and without checkpointing.

A program is a list of steps over a pool of (4, 4) tensors. The menu covers what breaks checkpoint
engines: matmuls, activations, norms, dropout, rrelu (an op filling a tensor its autograd node
saved) and other random ops, views (among them unfold,
view_as_complex / view_as_real, which XLA functionalizes as ``*_copy`` ops), in-place ops on fresh
intermediates (right after the op that made them, also through those views) and on region inputs,
region inputs sharing memory (``alias_input``: views of b passed alongside it, read or written), cat/split, index ops,
tags, Python-side state read by fn (a scale, a tensor constant built from it), tensors from outside fn
read through views, tuple/dict outputs,
keyword arguments, inputs without grad, an unused and an int64 region input, a frozen parameter;
tensors made inside the region
(``FRESH_MENU``: factory ops, tensor constants, a copy from the CPU, index_put into a fresh tensor)
with chains of views over them and over the region's values (``_fresh_step``), written in place through
several views, some reading views of region values (``_view_writes``); custom ops returning
``(Tensor, int)`` (one always saved, which must never run again) and a dispatch mode around backward;
modules with hooks and buffers (``MODULES``, one writing its buffer through a view), whose hook records
and buffers are compared too;
what users train (``fuzz_user_kinds``: MoE top-k routing, a custom ``autograd.Function``, a ``no_grad``
amax scaling, LoRA over a frozen weight, a nested checkpoint), each new parameter's grad compared too.
Policies (``policy_specs``) decide by name, by op, by the op's position in the region, by its output's
values, or plan the whole region, alone or combined.
``run`` executes one program (its forward inside the library's saved-tensor hooks, a parameter or
input modified after it, as drawn), returns everything the comparison needs (each forward output
among them), and reports an exception instead of raising it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from hypothesis import strategies as st
from torch.utils import _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import xla_ckpt
from fuzz_user_kinds import USER_KINDS, USER_MENU, USER_PACKETS, user_grads, user_params, user_step
from helpers import seed_all, sync
from xla_ckpt import Decision, OpCall, policies

aten = torch.ops.aten
N = 4
NAMES = ("qkv", "up", "attn")
INDEX = (3, 1, 0, 2)

# Tensors made inside the region and views over them (on XLA, a factory op under a dispatch mode
# can return a tensor outside functionalization, whose views read wrong elements).
# A variant is a seed: it picks the factory and a chain of views (see _fresh_chain).
FACTORIES = ("arange", "full_written", "eye", "linspace", "one_hot", "constant", "from_cpu", "randn", "new_full",
             "zeros_index_put")
CHAINS = 4096
# "view_writes": several in-place writes through different views of one fresh tensor (slice, select,
# narrow, as_strided, slice and select assignment), some reading views of a second region value. On XLA
# functionalization writes each view back into its base with a ``*_scatter`` op; torch tags
# ``slice_scatter`` as a view copy, and the engine took it for one: with a scatter saved (everything_saveable,
# memory_budget), the replay read a stand-in of the input instead (silently wrong grads, 8.02 off).
VIEW_WRITES = 3 * 10 ** 3 * 8  # (fresh kind, three writes of ten kinds, what the writes read)
FRESH_MENU: list[tuple[str, int, int]] = [
    ("factory", 1, len(FACTORIES) * CHAINS), ("view_chain", 1, CHAINS), ("index_put_fresh", 1, 4),
    ("view_writes", 2, VIEW_WRITES),
]
FRESH_KINDS = tuple(m[0] for m in FRESH_MENU)

# (kind, number of operands, number of variants)
MENU: list[tuple[str, int, int]] = [
    ("linear", 1, 2), ("matmul", 2, 1), ("act", 1, 6), ("norm", 1, 1), ("softmax", 1, 1),
    ("dropout", 1, 2), ("rand_mask", 1, 4), ("view", 1, 6), ("inplace_last", 0, 6), ("inplace_input", 0, 1),
    ("cat_split", 2, 1), ("index", 1, 3), ("tag_last", 0, 3), ("add", 2, 1), ("counter", 1, 1),
    ("state_index", 1, 1), ("outside_view", 1, 3), ("gates", 1, 1),
] + FRESH_MENU
# What a user observes besides values and grads: modules called inside the region with
# hooks that record values (a forward hook and a pre-hook), a hook that changes its module's output,
# BatchNorm (momentum 0.1, and the cumulative average that reads the count it just advanced), a
# module counting its calls in a buffer it reads. ``run`` compares every hook record (each call, its
# values) and every buffer after backward, and a global forward hook records each module call.
# "written": a forward hook that writes its module's output in place and returns None (the replay skipped
# the write and the grads were silently wrong); with ``inplace_last`` fn writes a hook's result in place.
# "buffer_unfold" / "buffer_t": a module writing its own buffer through a view (unfold, a row of its
# transpose) and reading it (on XLA the unfold write was taken for a new value; a false CheckpointError).
# "bw_hooked": a full backward pre-hook that records and halves grad_output, and a full backward hook
# recording grad_input; "grad_hooked": a forward hook registering a tensor hook on the output that records
# and doubles its grad (hooks in backward fire on the forward's graph, once, with the plain run's grads).
# "orthogonal": a Linear under ``parametrizations.orthogonal`` applied twice (the weight read twice: once
# computed under ``parametrize.cached()``, the "parametrize_cached" entry of ``HOOKS``).
# "dropped": a Linear and an ``nn.Dropout`` (0.5), whose draw depends on its ``training`` flag (``AFTER``'s
# "eval" switches every module to eval mode between forward and backward). "instance_norm": running
# statistics written back through ``alias(running_mean).copy_`` (on XLA torch_xla's functional ``copy``
# returns its argument's tensor id: the write went unnoted, a false CheckpointError at the replay).
# "attributes": Python-side state a forward keeps (``_Attributes``); fn run again in backward must not change it a
# second time (a counter, a stored output's retained grad, an appended list, a parameter hook fired twice).
MENU += [("module", 1, 14)]
MODULES = ("logged", "shifted", "bn", "bn_cumulative", "counting", "written", "buffer_unfold", "buffer_t",
           "bw_hooked", "grad_hooked", "orthogonal", "dropped", "instance_norm", "attributes")
# Region inputs that share memory (``bt = b.t()``, ``bs = b[1:3]``, passed only to programs with an
# "alias_input" step): variants 0-1 read them (exact), 2-4 write one of them (a view of b, or b itself);
# fn writing an input that shares memory with another is a CheckpointError naming both ("share memory";
# on XLA it was silently wrong grads). ``Outcome.aliased_written`` says whether the plain run wrote one.
MENU += [("alias_input", 1, 5)]
# XLA: ``xm.all_reduce(reduce_type, [t], scale=0.5)`` writes a value (an input or an intermediate) in place
# outside the dispatcher (the list form tensor-parallel layers use: a recorded program that recomputed
# the value from before it would give silently wrong grads). Variant 0 reads it right after, 1 leaves it
# to later steps. Read again, a CheckpointError naming the IR node; never read again, exact. Eager has no
# such write: there the step reads the value only.
MENU += [("bypass", 1, 2)]
STATEFUL = ("counter", "state_index")  # read Python-side state that changes between forward and recompute
# Custom ops returning (Tensor, int): "pair" under the drawn policy, "pair_saved" always
# saved (``run`` adds it to the policy) and never run again in backward (``run`` checks).
NON_TENSOR_MENU: list[tuple[str, int, int]] = [("pair", 1, 2), ("pair_saved", 1, 2)]
NON_TENSOR_KINDS = tuple(m[0] for m in NON_TENSOR_MENU)
MENU += NON_TENSOR_MENU
# What users train (``fuzz_user_kinds``): MoE routing, a custom autograd.Function, a no_grad statistic
# scaling x, LoRA over a frozen weight, a nested checkpoint.
MENU += USER_MENU
KINDS = [m[0] for m in MENU]


@dataclass(frozen=True)
class Step:
    kind: str
    operands: tuple[int, ...]
    variant: int


# Program lengths: a hunt by hand (profile ``hunt``, tests/conftest.py) draws longer programs than CI's.
_HUNT = os.environ.get("XLA_CKPT_FUZZ") == "hunt"
MAX_STEPS, MAX_FOCUSED_STEPS = (14, 12) if _HUNT else (9, 7)


@st.composite
def programs(draw: Callable[..., Any], allow_state: bool = True, only: Optional[tuple[str, ...]] = None
             ) -> tuple[Step, ...]:
    """Random programs; ``only``: draw from these kinds only (a focused fuzz)."""
    kinds = [m for m in MENU if (allow_state or m[0] not in STATEFUL) and (only is None or m[0] in only)]
    steps = []
    for _ in range(draw(st.integers(2, MAX_STEPS))):
        kind, arity, variants = draw(st.sampled_from(kinds))
        ops = tuple(draw(st.integers(0, 63)) for _ in range(arity))
        steps.append(Step(kind, ops, draw(st.integers(0, variants - 1))))
    return tuple(steps)


@st.composite
def focused_programs(draw: Callable[..., Any], kinds: tuple[str, ...]) -> tuple[Step, ...]:
    """Random programs over ``kinds`` only (a focused fuzz)."""
    menu = [m for m in MENU if m[0] in kinds]
    steps = []
    for _ in range(draw(st.integers(2, MAX_FOCUSED_STEPS))):
        kind, arity, variants = draw(st.sampled_from(menu))
        steps.append(Step(kind, tuple(draw(st.integers(0, 63)) for _ in range(arity)),
                          draw(st.integers(0, variants - 1))))
    return tuple(steps)


@dataclass(frozen=True)
class TablePolicy:
    """A random per-op policy: a fixed decision per op packet, a default for the rest."""

    table: tuple[tuple[Any, Decision], ...]
    default: Decision

    def __call__(self, call: OpCall) -> Decision:
        for packet, decision in self.table:
            if call.op.overloadpacket is packet:
                return decision
        return self.default


_PACKETS = [aten.mm, aten.addmm, aten.sin, aten.tanh, aten.gelu, aten.native_layer_norm, aten._softmax,
            aten.native_dropout, aten.rand_like, aten.mul, aten.add, aten.cat, aten.index_select, aten.bmm, aten.div]
_PACKETS += USER_PACKETS


# Policies that decide by position or by value (on XLA, saving the div and mul after a dropout leaves
# its mask unread, and the replay must not draw it again). They count the calls of one region: ``run``
# restarts every such policy before it runs a program.
_COUNTING: "weakref.WeakSet[Any]" = weakref.WeakSet()


@dataclass(frozen=True, eq=False)
class PositionPolicy:
    """A random per-position policy: the n-th call of an op packet in the region (from 1) decides."""

    table: tuple[tuple[Any, int, Decision], ...]
    default: Decision
    seen: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        _COUNTING.add(self)

    def restart(self) -> None:
        self.seen.clear()

    def __call__(self, call: OpCall) -> Decision:
        packet = call.op.overloadpacket
        n = self.seen[packet] = self.seen.get(packet, 0) + 1
        for p, k, decision in self.table:
            if p is packet and k == n:
                return decision
        return self.default


@dataclass(frozen=True, eq=False)
class ValuePolicy:
    """A random per-value policy: a floating output of ``packets`` whose mean is above ``threshold`` gets
    ``above``, the others ``below``; other ops ``default``. At most ``READS`` reads per region: on XLA
    each one runs the graph traced so far (the fuzz's cost)."""

    packets: tuple[Any, ...]
    threshold: float
    above: Decision
    below: Decision
    default: Decision
    reads: list = field(default_factory=list, repr=False)
    READS = 3

    def __post_init__(self) -> None:
        _COUNTING.add(self)

    def restart(self) -> None:
        self.reads.clear()

    def __call__(self, call: OpCall) -> Decision:
        out = call.out
        if (call.op.overloadpacket in self.packets and isinstance(out, torch.Tensor) and out.is_floating_point()
                and len(self.reads) < self.READS):
            self.reads.append(float(out.detach().float().mean()))
            return self.above if self.reads[-1] > self.threshold else self.below
        return self.default


def _restart_counting() -> None:
    for policy in list(_COUNTING):
        policy.restart()


_EXAMPLE = {
    "save_only_these_names": {"names": ["qkv", "up"]},
    "save_any_names_but_these": {"names": ["attn"]},
    "save_ops": {"ops": [aten.mm, aten.rand_like]},
    "recompute_ops": {"ops": [aten.sin, aten.native_dropout]},
    "any_of": {"policies": ["dots_saveable", policies.save_ops(aten.rand_like)]},
    "all_of": {"policies": ["everything_saveable", policies.recompute_ops(aten.gelu)]},
    "from_torch": {"fn": lambda ctx, op, *a, **k: _torch_dots(op)},
    "offload": {"policy": "dots_saveable"},
    "save_and_offload_only_these_names": {"names_which_can_be_saved": ["qkv"], "names_which_can_be_offloaded": ["up"]},
    "memory_budget": {"fraction": 0.5},
}
# Planning policies decide a whole region: they cannot be combined op by op (any_of / all_of).
_PER_OP = [n for n in policies.names() if n != "memory_budget"]


def _torch_dots(op: Any) -> Any:
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.MUST_SAVE if op in (aten.mm.default, aten.addmm.default) else CheckpointPolicy.PREFER_RECOMPUTE


def builtin(name: str) -> Any:
    return policies.get(name, **_EXAMPLE.get(name, {}))


@st.composite
def policy_specs(draw: Callable[..., Any]) -> Any:
    choice = draw(st.integers(0, 4))
    if choice <= 1:
        return draw(st.sampled_from(policies.names()))
    if choice == 4:  # region planning at a drawn budget (the engine applies its plan at the end of forward)
        return policies.memory_budget(draw(st.sampled_from([0.01, 0.1, 0.3, 0.5, 0.8, 1.0])))
    decisions = st.sampled_from([Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE])
    by = draw(st.sampled_from(["op", "position", "value"]))
    if by == "position":
        cells = draw(st.lists(st.tuples(st.sampled_from(_PACKETS), st.integers(1, 3)), unique=True, max_size=8))
        table_policy: Any = PositionPolicy(tuple((p, n, draw(decisions)) for p, n in cells), draw(decisions))
    elif by == "value":
        packets = tuple(draw(st.lists(st.sampled_from(_PACKETS), unique=True, min_size=1, max_size=4)))
        table_policy = ValuePolicy(packets, draw(st.sampled_from([-0.5, 0.0, 0.5])), draw(decisions),
                                   draw(decisions), draw(decisions))
    else:
        table = tuple((p, draw(decisions)) for p in draw(st.lists(st.sampled_from(_PACKETS), unique=True, max_size=6)))
        table_policy = TablePolicy(table, draw(decisions))
    if choice == 2:
        return table_policy
    other = draw(st.sampled_from(_PER_OP))
    return policies.any_of(table_policy, builtin(other)) if draw(st.booleans()) else policies.all_of(
        table_policy, builtin(other))


def resolve(spec: Any) -> Any:
    return builtin(spec) if isinstance(spec, str) else spec


class _Counter:
    """Python-side state read by fn: a different value each call (forward and recompute differ)."""

    def __init__(self) -> None:
        self.it = itertools.count(1)

    def next(self) -> float:
        return 1.0 + 0.25 * (next(self.it) % 3)


class _Counting(torch.nn.Module):
    """Counts its calls in a buffer and reads the count: a forward result that depends on a buffer it writes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return x * (1.0 + 0.25 * self.count)


class _BufferView(torch.nn.Module):
    """Writes its own buffer through a view (``unfold`` or a row of its transpose), then reads it."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.register_buffer("buf", torch.arange(N * N, dtype=torch.float32).reshape(N, N) * 0.125)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "unfold":
            self.buf.unfold(1, 2, 2).add_(1.0)
            return x * self.buf + x  # the mul saves the buffer: a second call's write is autograd's error
        self.buf.t()[0].add_(1.0)
        return x + self.buf.t()


class _Attributes(torch.nn.Module):
    """Python-side state a forward keeps, as users' modules do: it counts its calls in an int, stores its
    output with its grad retained (to plot it), appends a statistic to a list and puts a grad-scaling hook
    on its weight. ``observed`` is what ``run`` compares after backward: all as without the library."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(N, N)
        self.calls = 0
        self.aux: list[torch.Tensor] = []
        self.last: Optional[torch.Tensor] = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = torch.tanh(self.lin(x))
        if out.requires_grad:
            out.retain_grad()
            self.lin.weight.register_hook(lambda g: g * 0.5)
        self.last = out
        self.aux.append(out.detach().sum())
        return out

    def observed(self) -> list[tuple[str, Optional[torch.Tensor]]]:
        last_grad = self.last.grad if self.last is not None else None
        return [("calls", torch.tensor(float(self.calls))), ("aux", torch.stack(self.aux)), ("last.grad", last_grad)]


class _Orthogonal(torch.nn.Module):
    """A Linear under an orthogonal parametrization, applied twice: its weight is read twice per call."""

    def __init__(self) -> None:
        super().__init__()
        lin = torch.nn.Linear(N, N, bias=False)
        with torch.no_grad():  # the trivialization's base buffer is made from it: not from the global RNG
            lin.weight.copy_(torch.eye(N).flip(0))
        self.lin = torch.nn.utils.parametrizations.orthogonal(lin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(self.lin(x)))


def _modules(gen: torch.Generator, device: torch.device, log: list, quiet: bool = False
             ) -> tuple[dict[str, torch.nn.Module], dict[str, torch.nn.Module]]:
    """The modules programs call (``MODULES``), with the hooks whose records ``run`` compares, and the
    models they were deep-copied from (XLA; none on CPU), whose buffers ``run`` compares too.

    On XLA the modules are deep copies of synced originals, as users copy a model (an EMA, a
    reference): the copy shares the original's device buffers until written, and a replay's restore
    of a written buffer let the step's graph donate, and delete, the original's (the module zoo).
    """
    mods: dict[str, torch.nn.Module] = {
        "logged": torch.nn.Linear(N, N), "shifted": torch.nn.Linear(N, N), "bn": torch.nn.BatchNorm1d(N),
        "bn_cumulative": torch.nn.BatchNorm1d(N, momentum=None), "counting": _Counting(),
        "written": torch.nn.Linear(N, N), "buffer_unfold": _BufferView("unfold"), "buffer_t": _BufferView("t"),
        "bw_hooked": torch.nn.Linear(N, N), "grad_hooked": torch.nn.Linear(N, N), "orthogonal": _Orthogonal(),
        "dropped": torch.nn.Sequential(torch.nn.Linear(N, N), torch.nn.Dropout(0.5)),
        "instance_norm": torch.nn.InstanceNorm1d(N, affine=True, track_running_stats=True),  # x: (C, L)
        "attributes": _Attributes(),
    }
    with torch.no_grad():
        for m in mods.values():
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))
    mods = {k: m.to(device) for k, m in mods.items()}
    originals: dict[str, torch.nn.Module] = {}
    if device.type == "xla":
        import copy

        import torch_xla

        torch_xla.sync()
        originals, mods = mods, copy.deepcopy(mods)
    # quiet: the hooks keep their effect on values and grads but record nothing, so Dynamo traces them
    # into a compiled region (a record is a side effect it refuses inside torch's checkpoint).
    record = (lambda t: None) if quiet else log.append
    mods["logged"].register_forward_pre_hook(lambda m, args: record(args[0].detach().clone()))
    mods["logged"].register_forward_hook(lambda m, args, out: record(out.detach().clone()))

    def shift(m: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
        record(out.detach().sum())
        return out * 0.5 + 0.25

    mods["shifted"].register_forward_hook(shift)

    def write(m: Any, args: Any, out: torch.Tensor) -> None:
        record(out.detach().sum())
        out.mul_(0.5)

    mods["written"].register_forward_hook(write)

    def halve_grad_output(m: Any, grad_output: tuple) -> tuple:
        record(grad_output[0].detach().clone())
        return (grad_output[0] * 0.5,)

    def record_grad_input(m: Any, grad_input: tuple, grad_output: tuple) -> None:
        g = grad_input[0]
        record(g.detach().clone() if g is not None else torch.zeros((), device=device))

    mods["bw_hooked"].register_full_backward_pre_hook(halve_grad_output)
    mods["bw_hooked"].register_full_backward_hook(record_grad_input)

    def double_output_grad(m: Any, args: Any, out: torch.Tensor) -> None:
        def on_grad(g: torch.Tensor) -> torch.Tensor:
            record(g.detach().clone())
            return g * 2.0
        out.register_hook(on_grad)

    mods["grad_hooked"].register_forward_hook(double_output_grad)
    return mods, originals


@contextlib.contextmanager
def _global_hook(mods: dict[str, torch.nn.Module], log: list) -> Any:
    """A global forward hook (as a logger installs) recording each call of the program's modules."""
    ours = {id(m) for m in mods.values()}

    def hook(m: Any, args: Any, out: Any) -> None:
        if id(m) in ours and isinstance(out, torch.Tensor):
            log.append(out.detach().clone())

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _body(steps: tuple[Step, ...], params: dict[str, torch.Tensor], counter: _Counter,
          mods: Optional[dict[str, torch.nn.Module]] = None, inner: bool = False) -> Callable[..., Any]:
    """The region's function; ``inner``: it runs checkpointed (``nested`` steps checkpoint again)."""
    def fn(a: torch.Tensor, *, b: torch.Tensor, unused: Any = None, ids: Optional[torch.Tensor] = None,
           bt: Optional[torch.Tensor] = None, bs: Optional[torch.Tensor] = None) -> Any:
        pool: list[torch.Tensor] = [a, b]
        fresh = [False, False]  # pool[i] is an intermediate made by fn (not an input)
        for s in steps:
            x = [pool[i % len(pool)] for i in s.operands]
            k = s.kind
            if k == "linear":
                y = F.linear(x[0], params["w" if s.variant == 0 else "frozen"], params["bias"] if s.variant == 0 else None)
            elif k == "matmul":
                y = x[0] @ x[1]
            elif k == "act":
                y = [torch.sin, torch.tanh, F.gelu, torch.relu, torch.sigmoid, lambda t: t.clamp(-3, 3).exp()][s.variant](x[0])
            elif k == "norm":
                y = F.layer_norm(x[0], (N,), params["ln"], None)
            elif k == "softmax":
                y = torch.softmax(x[0], dim=-1)
            elif k == "dropout":  # variant 1: rrelu, whose op fills a noise tensor its autograd node saved
                # (on XLA the engine refuses that write, in eval mode too, a named CheckpointError: there
                # the leaky_relu rrelu's eval mode computes)
                y = (F.dropout(x[0], 0.5, training=True) if s.variant == 0 else F.rrelu(x[0], training=True)
                     if x[0].device.type != "xla" else F.leaky_relu(x[0], (1 / 8 + 1 / 3) / 2))
            elif k == "rand_mask":
                # 2-3: ops torch_xla runs on the CPU, drawing from torch's CPU generator, not its seed (Gamma's
                # rsample, Poisson): the replay set the XLA seed and drew other numbers (silently wrong grads).
                y = [lambda t: t * (torch.rand_like(t) > 0.5), lambda t: t * torch.randn_like(t),
                     lambda t: t * torch._standard_gamma(t.detach().abs() + 0.5),
                     lambda t: t * torch.poisson(t.detach().abs() * 2)][s.variant](x[0])
            elif k == "view":
                y = _view(s.variant, x[0])
            elif k == "inplace_last":
                if not fresh[-1]:
                    continue
                t = pool[-1]
                [lambda u: u.mul_(0.5), lambda u: u.add_(1.0), lambda u: u.sigmoid_(), lambda u: u.clamp_(-1, 1),
                 # written through views XLA sees as view_as_complex_copy and unfold_copy
                 lambda u: torch.view_as_complex(u.reshape(N, N // 2, 2)).mul_(1j),
                 lambda u: u.unfold(1, 2, 2).add_(1.0)][s.variant](t)
                continue
            elif k == "bypass":
                if x[0].device.type == "xla" and x[0].is_floating_point():
                    _reduce_in_place(x[0])
                if s.variant == 1:
                    continue
                y = x[0] * 2.0
            elif k == "inplace_input":
                b.add_(0.5)
                continue
            elif k == "gates":
                # torch's GRU on CPU: pieces of one ``unsafe_chunk`` (one storage, no shared version
                # counter) written in place, one after another was saved. The engine keyed the write by
                # storage: a false CheckpointError (the module zoo found it in nn.GRUCell).
                g = x[0] * 1.5
                r, z = torch.unsafe_chunk(g, 2, dim=1)
                r.sigmoid_()  # saves its result, a piece of g
                z.mul_(0.5)
                z.tanh_()  # writes g's storage two ops later: not r's elements, not r's version
                y = torch.cat([r * z, z], dim=1)
            elif k == "cat_split":
                left, _ = x[0].split(2, dim=1)
                _, right = x[1].split(2, dim=1)
                y = torch.cat([right, left], dim=1)
            elif k == "index":
                idx = torch.tensor(INDEX, device=x[0].device)
                rows = idx if ids is None else ids  # the region's int64 input
                pick = [lambda t, i, r: t.index_select(0, i), lambda t, i, r: t.gather(1, i.expand(N, N)),
                        lambda t, i, r: t[r]]
                y = pick[s.variant](x[0], idx, rows)
            elif k == "tag_last":
                xla_ckpt.tag(pool[-1], NAMES[s.variant])
                continue
            elif k == "add":
                y = x[0] + 0.5 * x[1]
            elif k == "outside_view":
                # A tensor from outside fn read through a view by an op autograd saves nothing of (the
                # add): on XLA a view is a new buffer, so the replay must check its read of a parameter
                # modified after the forward (unchecked: a wrong gradient; state_index's constant likewise).
                y = [lambda t: t + params["ln"].view(1, N), lambda t: t - params["bias"].expand(N, N),
                     lambda t: t + params["frozen"].t()[1:].sum(0)][s.variant](x[0])
            elif k == "counter":
                y = x[0] * counter.next()
            elif k == "state_index":
                # A tensor constant built afresh from Python state: only its values tell the calls apart.
                r = int(4 * counter.next()) % N
                idx = torch.tensor(INDEX[r:] + INDEX[:r], device=x[0].device)
                y = x[0].index_select(0, idx)
            elif k == "alias_input":
                assert bt is not None and bs is not None
                y = _alias_step(s.variant, x[0], b, bt, bs)
            elif k == "module":
                assert mods is not None
                y = mods[MODULES[s.variant]](x[0])
            elif k == "view_writes":
                y = _view_writes(s.variant, x[0], x[1])
            elif k in FRESH_KINDS:
                y = _fresh_step(k, s.variant, x[0])
            elif k in NON_TENSOR_KINDS:
                y = _non_tensor_step(k, s.variant, x[0])
            elif k in USER_KINDS:
                y = user_step(k, s.variant, x[0], params, inner)
            else:  # pragma: no cover
                raise AssertionError(k)
            pool.append(y)
            fresh.append(True)
        last = pool[-3:]
        if len(steps) % 3 == 0:
            return {"out": last[-1], "rest": tuple(last[:-1])}
        if len(steps) % 3 == 1:
            return tuple(last)
        return last[-1]

    return fn


def _view(variant: int, t: torch.Tensor) -> torch.Tensor:
    """A (4, 4) view of ``t`` (a copy where reshape must copy); 3-5 pass through the views XLA
    functionalizes as ``unfold_copy``, ``view_as_complex_copy`` and ``view_as_real_copy``."""
    if variant == 0:
        return t.t()
    if variant == 1:
        return t.reshape(2, 8).reshape(N, N)
    if variant == 2:
        return t[1:].sum(0).expand(N, N)
    if variant == 3:
        return t.unfold(1, 2, 2).flatten(1)
    if variant == 4:
        return t.unfold(0, N, 1)[0]  # (1, 4, 4): t transposed
    return torch.view_as_real(torch.view_as_complex(t.reshape(N, N // 2, 2))).reshape(N, N)


def _alias_step(variant: int, x: torch.Tensor, b: torch.Tensor, bt: torch.Tensor, bs: torch.Tensor) -> torch.Tensor:
    """Reads (0-1) or writes (2: ``bt``, 3: ``bs``, 4: ``b``) the region inputs that share memory."""
    if variant == 0:
        return x + bt
    if variant == 1:
        return x * bs.repeat(2, 1)
    if variant == 2:
        bt.mul_(0.5)
        return x * bt
    if variant == 3:
        bs.add_(1.0)
        return x + b
    b.add_(0.5)
    return x - bt


ALIAS_WRITES = (2, 3, 4)


def uses_alias(steps: tuple[Step, ...]) -> bool:
    """Whether the program gets the inputs sharing memory with b (``bt``, ``bs``)."""
    return any(s.kind == "alias_input" for s in steps)


def _fresh_step(kind: str, variant: int, x: torch.Tensor) -> torch.Tensor:
    """One step of a fresh-tensor kind: a (4, 4) result that depends on ``x`` (so grads flow)."""
    if kind == "factory":
        t = _factory(FACTORIES[variant // CHAINS], x)
        return x * _fresh_chain(variant % CHAINS)(t) + x
    if kind == "view_chain":
        # Over a value of the region (an input or an intermediate): expanded to (2, 4, 4) and viewed.
        base = x.unsqueeze(0).expand(2, N, N) if variant % 2 else x.expand(2, N, N)
        return _fresh_chain(variant)(base)
    return _index_put_fresh(variant, x)


def reads_region(variant: int) -> bool:
    """Whether a ``view_writes`` step of ``variant`` writes a view of a region value (else only constants)."""
    return (variant // 3) % 8 != 0


def _view_writes(variant: int, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """A fresh copy of ``x`` written in place through three views, each decoded from ``variant``; a write
    reads a constant or a view of ``r`` (a region input or intermediate). The result reads every write."""
    v, fresh = divmod(variant, 3)
    v, reads = divmod(v, 8)  # bit i: write i reads a view of r (else a constant)
    h = [lambda: x * 1.0, lambda: x.clone(), lambda: torch.zeros_like(x) + x][fresh]()
    for i in range(3):
        v, kind = divmod(v, 10)
        src = (lambda a, b: r[a:b]) if reads >> i & 1 else None
        if kind == 0:
            h[:, 1:3].add_(src(0, N)[:, 2:4] if src else 0.5)
        elif kind == 1:
            h[1].mul_(src(2, 3)[0] if src else -1.5)
        elif kind == 2:
            h.narrow(1, 0, 2).mul_(src(0, N).narrow(1, 2, 2) if src else 2.0)
        elif kind == 3:
            h.select(1, 3).add_(src(0, N).select(1, 0) if src else 1.0)
        elif kind == 4:
            h.as_strided((2, 2), (N, 1), 1).add_(src(1, 3)[:, :2] if src else 0.25)
        elif kind == 5:
            h[2:] = src(0, 2) * 0.5 if src else -0.75
        elif kind == 6:
            h[:, 0] = src(0, N)[:, 3] if src else 3.0
        elif kind == 7:
            h.t()[2].sub_(src(0, N)[1] if src else 0.5)
        elif kind == 8:
            h[::2, ::3].mul_(src(0, 2)[:, ::3] if src else 0.5)
        else:
            h.diagonal().add_(src(0, N).diagonal() if src else 1.0)
    return h * h + x


def _factory(name: str, x: torch.Tensor) -> torch.Tensor:
    """A (2, 4, 4)-shaped tensor (any order of those sizes) made inside the region by a factory op."""
    dev, dt = x.device, x.dtype
    if name == "arange":
        return torch.arange(32, device=dev, dtype=dt).reshape(2, N, N) * 0.125
    if name == "full_written":  # written through views of the fresh tensor
        t = torch.full((N, 2, N), 0.5, device=dev, dtype=dt)
        t[1, 0] = 2.0
        t[:, 1, 2:] = -1.0
        t.select(2, 0).mul_(3.0)
        return t
    if name == "eye":
        return torch.eye(N, 2 * N, device=dev, dtype=dt).reshape(N, 2, N) + torch.ones(N, 2, N, device=dev, dtype=dt)
    if name == "linspace":
        return torch.linspace(-1.0, 1.0, 32, device=dev, dtype=dt).reshape(N, N, 2)
    if name == "one_hot":  # Hugging Face Mixtral's expert mask: one_hot(...).permute(2, 1, 0)
        idx = torch.tensor([[0, 3, 1, 2], [2, 2, 0, 1]], device=dev)
        return F.one_hot(idx, N).to(dt)  # (2, 4, 4)
    if name == "constant":
        return torch.tensor([[[float(i * 4 + j) - 7.5 for j in range(N)] for i in range(N)]] * 2,
                            device=dev, dtype=dt).mul_(torch.tensor([1.0, -0.5], device=dev, dtype=dt).view(2, 1, 1))
    if name == "from_cpu":  # a copy from the CPU inside the region
        return torch.arange(32, dtype=dt).reshape(N, 2, N).to(dev) - 16.0
    if name == "randn":
        return torch.randn(2, N, N, device=dev, dtype=dt)
    if name == "new_full":  # from x's options (passes through functionalization on XLA)
        return x.new_full((2, N, N), 0.25) + x.new_tensor([1.0, 2.0, 3.0, 4.0])
    if name == "zeros_index_put":
        t = torch.zeros(2, N, N, device=dev, dtype=dt)
        t[torch.tensor([0, 1, 1], device=dev), torch.tensor([3, 0, 2], device=dev)] = torch.tensor(
            [1.0, 2.0, 3.0], device=dev, dtype=dt).unsqueeze(-1)
        return t
    raise AssertionError(name)  # pragma: no cover


_PERMS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))


def _fresh_chain(seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A chain of views decoded from ``seed``: 3-d views (permute, transpose, movedim, flip, unsqueeze),
    then a 2-d result picked on the size-2 dimension (select, slicing, unbind, narrow), then a 2-d view."""
    r = seed

    def digit(n: int) -> int:
        nonlocal r
        r, d = divmod(r, n)
        return d

    ops3 = [digit(6) for _ in range(2)]
    pick = digit(4)
    last = digit(6)
    perms = [_PERMS[digit(6)] for _ in range(2)]

    def chain(t: torch.Tensor) -> torch.Tensor:
        for op, perm in zip(ops3, perms, strict=True):
            if op == 0:
                t = t.permute(perm)
            elif op == 1:
                t = t.transpose(perm[0], perm[1])
            elif op == 2:
                t = t.movedim(perm[0], perm[2])
            elif op == 3:
                t = t.flip(perm[0])
            elif op == 4:
                t = t.unsqueeze(perm[1]).select(perm[1], 0)
            # op == 5: no view at this step
        d = list(t.shape).index(2)
        if pick == 0:
            y = t.select(d, 1)
        elif pick == 1:
            y = t[(slice(None),) * d + (slice(1, 2),)].squeeze(d)
        elif pick == 2:
            y = t.unbind(d)[0]
        else:
            y = t.narrow(d, 1, 1).movedim(d, 0)[0]
        if last == 0:
            y = y.t()
        elif last == 1:
            y = y[:, 1:2].expand(N, N)
        elif last == 2:
            y = y.flip(1)
        elif last == 3:
            y = y.unsqueeze(0)[0, 2:].expand(2, 2, N).reshape(N, N)
        elif last == 4:
            y = y.transpose(0, 1)[::2].repeat_interleave(2, dim=0)
        return y

    return chain


def _index_put_fresh(variant: int, x: torch.Tensor) -> torch.Tensor:
    """A fresh zeros tensor written with values from ``x`` (index_put, slice and select assignment)."""
    t = torch.zeros(N, N, device=x.device, dtype=x.dtype)
    rows = torch.tensor(INDEX, device=x.device)
    if variant == 0:
        t[rows] = x * 2.0
    elif variant == 1:
        t.index_put_((rows, rows.flip(0)), x[0], accumulate=True)
        t.index_put_((rows, rows.flip(0)), x[1], accumulate=True)
    elif variant == 2:
        t[1:3] = x[:2].flip(1)
    else:
        t[:, 2] = x[0]
        t.t()[0] = x[:, 3]
    return t.permute(1, 0) * x + t


# Backward-phase calls of the always-saved custom op: a saved op is never run again (torch's SAC runs
# it once, and so must the library). Module-level: XLA runs backward on another thread.
_PHASE = {"backward": False, "reruns": 0}


@torch.library.custom_op("xla_ckpt_fuzz::pair", mutates_args=())
def _pair(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    return x.sin(), x.shape[-1] - 1


@torch.library.custom_op("xla_ckpt_fuzz::pair_saved", mutates_args=())
def _pair_saved(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    if _PHASE["backward"]:
        _PHASE["reruns"] += 1
    return x.cos() * 0.5, 2


def _save_input(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(inputs[0])


_pair.register_autograd(lambda ctx, g, _n: g * ctx.saved_tensors[0].cos(), setup_context=_save_input)
_pair_saved.register_autograd(lambda ctx, g, _n: g * ctx.saved_tensors[0].sin() * -0.5, setup_context=_save_input)
PAIR_SAVED = torch.ops.xla_ckpt_fuzz.pair_saved.default


def _non_tensor_step(kind: str, variant: int, x: torch.Tensor) -> torch.Tensor:
    """A custom op returning ``(Tensor, int)``; the int goes back to Python and drives the next op."""
    t, n = (_pair if kind == "pair" else _pair_saved)(x)
    if variant == 0:
        return t * n + x
    return torch.cat([t[:, :n], x[:, n:]], dim=1)  # the int as a size


def _saving_pair(steps: tuple[Step, ...], policy: Any) -> Any:
    """``policy``, with the always-saved custom op saved where the program runs it (per-op policies;
    a planning policy decides the whole region itself: it may recompute it)."""
    if policy is None or not any(s.kind == "pair_saved" for s in steps) or _planning(policy):
        return policy
    return policies.any_of(policies.save_ops(PAIR_SAVED), policy)


def _planning(policy: Any) -> bool:
    return callable(getattr(policy, "plan", None))


class _Count(TorchDispatchMode):
    """An op counter: sees every op and passes it on."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.n += 1
        return func(*args, **(kwargs or {}))


class _Decompose(TorchDispatchMode):
    """Runs an op's decomposition where it has one (the op's own kernel otherwise): other ops below it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func.decompose(*args, **kwargs)
        return func(*args, **kwargs) if out is NotImplemented else out


# A dispatch mode the caller holds around backward (on XLA the replay's stand-ins must stay in
# functionalization under it, or a false CheckpointError follows): a profiler, an op counter, a mode
# that re-dispatches ops through their decompositions.
OUTER = (None, "count", "flops", "decompose")


def _outer(kind: Optional[str]) -> Any:
    if kind == "count":
        return _Count()
    if kind == "flops":
        return FlopCounterMode(display=False)
    if kind == "decompose":
        return _Decompose()
    return contextlib.nullcontext()


@dataclass
class Outcome:
    error: Optional[BaseException]
    values: list[torch.Tensor]  # each output, loss, grad of a, grads of params, b (None -> absent)
    names: list[str]
    rng: Any  # (CPU generator state, torch_xla's running seed or None), read after backward
    aliased_written: bool = False  # fn wrote b or a view of it while it had inputs sharing b's memory


# The library's saved-tensor hooks around the forward, with or without a region: autograd skips its
# in-place check for hooked tensors, so the hooks must make it.
# "parametrize_cached": ``torch.nn.utils.parametrize.cached()`` open around the forward only, as torch's docs
# open it around a model call (the replay computed a cached parametrization at each read: the module zoo's
# second round).
# How backward runs (the same in the plain run): ``loss.backward()``; ``torch.autograd.grad`` over every
# leaf (grads returned, not accumulated; written to ``.grad`` for the comparison); backward twice over a
# retained graph (the region's saved or recomputed values read again: grads and hook records doubled);
# double backward (``create_graph``: the recompute's own graph differentiated again, the grads' squared
# norm backpropagated: second-order grads compared); two passes over a retained graph, each for half the
# leaves (``backward(inputs=...)``). Plain errors (an op without a double backward) must be errors
# checkpointed too.
BACKWARD = (None, "grad", "retain_twice", "create_graph", "inputs_split")


def _leaves(a_leaf: torch.Tensor, params: dict[str, torch.Tensor], mods: dict[str, torch.nn.Module]) -> list:
    """Every leaf a program's grads are compared on (``a``, the parameters, the modules' parameters)."""
    leaves = [a_leaf, *params.values(), *(p for m in mods.values() for p in m.parameters())]
    return [t for t in leaves if t.requires_grad]


def _backward(kind: Optional[str], loss: torch.Tensor, leaves: list) -> None:
    if kind is None:
        loss.backward()
    elif kind == "retain_twice":
        loss.backward(retain_graph=True)
        loss.backward()
    elif kind == "inputs_split":
        # Two passes over a retained graph, each for half the leaves (``backward(inputs=...)``, a GAN's
        # alternating updates): autograd runs only the part of the graph that reaches them, so a
        # region's recompute may run in either pass, or in both.
        loss.backward(inputs=leaves[::2], retain_graph=True)
        if leaves[1::2]:
            loss.backward(inputs=leaves[1::2])
    elif kind in ("grad", "create_graph"):
        grads = torch.autograd.grad(loss, leaves, allow_unused=True, create_graph=kind == "create_graph")
        if kind == "grad":
            for t, g in zip(leaves, grads, strict=True):
                t.grad = g
            return
        norm = sum((g.float().square().sum() for g in grads if g is not None and g.requires_grad),
                   torch.zeros((), device=loss.device))
        if norm.requires_grad:
            norm.backward()
    else:
        raise ValueError(f"backward={kind!r}: one of {BACKWARD}")


# "autocast": the forward under ``torch.autocast(device, bfloat16)``, as mixed-precision training runs it
# (the recompute must cast as the forward did; on XLA too). "forward_ad": the forward inside a
# ``forward_ad.dual_level()`` with the region input dual (a fixed tangent); the output tangents are
# compared too (regions run plainly there, warned).
# "lossy_pack": the forward inside a user's ``saved_tensors_hooks`` pair that packs floating tensors as
# bf16 (activation compression): the region's inner pair shadowed it, other grads than the plain run's.
# "lossy_by_reference": ``weights_by_reference()`` inside that pair (``fsdp_xla``'s step under it); the
# reference runs inside the pair only (a by-reference pair that shadowed the user's would give other grads).
HOOKS = ("none", "ledger", "by_reference", "parametrize_cached", "autocast", "forward_ad", "lossy_pack",
         "lossy_by_reference")
# Contexts that change the plain run's rounding (a cached weight is computed once: its grad sums fewer
# terms; autocast computes in bf16) or what it computes (tangents): the reference runs inside them too
# (inside ``PLAIN_OF``'s context where one is named).
PLAIN_CHANGING = ("parametrize_cached", "autocast", "forward_ad", "lossy_pack", "lossy_by_reference")
PLAIN_OF = {"lossy_by_reference": "lossy_pack"}


@contextlib.contextmanager
def _lossy_by_reference() -> Iterator[None]:
    with torch.autograd.graph.saved_tensors_hooks(_bf16_pack, _bf16_unpack), xla_ckpt.weights_by_reference():
        yield


def _hooks(kind: str, device: torch.device) -> Any:
    if kind == "autocast":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if kind == "forward_ad":
        return fwAD.dual_level()
    if kind == "ledger":
        return xla_ckpt.saved_activations()
    if kind == "by_reference":
        return xla_ckpt.weights_by_reference()
    if kind == "parametrize_cached":
        return torch.nn.utils.parametrize.cached()
    if kind == "lossy_pack":
        return torch.autograd.graph.saved_tensors_hooks(_bf16_pack, _bf16_unpack)
    if kind == "lossy_by_reference":
        return _lossy_by_reference()
    return contextlib.nullcontext()


def _bf16_pack(t: torch.Tensor) -> Any:
    return (t.to(torch.bfloat16), t.dtype) if t.dtype in (torch.float32, torch.float64) else (t, None)


def _bf16_unpack(packed: Any) -> torch.Tensor:
    t, dtype = packed
    return t if dtype is None else t.to(dtype)


# A tensor the caller modifies in place between forward and backward (None: none). Plain autograd
# raises if it saved that tensor; the recompute must not silently read the new value (parameters
# read by recomputed ops are checked too).
# "eval": not a tensor: every module of the program switched to eval mode (``model.eval()`` for an
# evaluation pass before ``loss.backward()``); plain autograd differentiates the forward's graph, and
# so must the recompute (it ran BatchNorm and dropout in eval mode: a CheckpointError). The only entry
# that excuses no CheckpointError (``EXACT_AFTER``).
AFTER = (None, "w", "bias", "ln", "frozen", "a", "b", "lora_base", "experts", "eval")
EXACT_AFTER = (None, "eval")


class _ReplayingThread:
    """Another thread replaying a checkpointed dropout region over and over while the program runs.

    Each replay sets the process-wide CPU generator to the forward's state, draws and restores it; it
    must never change the program's random numbers, nor give its own region another mask (its grad is
    compared with one computed from the forward's mask). The failure it guards against: two threads'
    replays interleaving, one op drawing the other's numbers without the check noticing.
    """

    def __init__(self) -> None:
        x = torch.randn(6, 6, requires_grad=True)
        masks: list[torch.Tensor] = []

        def fn(t: torch.Tensor) -> torch.Tensor:
            y = F.dropout(t.sin(), 0.5, training=True)
            masks.append(y != 0)
            return y.cos()

        self.y = xla_ckpt.checkpoint(fn, x, policy="nothing_saveable")
        ref_x = x.detach().clone().requires_grad_()
        self.expected = torch.autograd.grad((ref_x.sin() * masks[0] * 2.0).cos().sum(), ref_x)[0]
        self.x, self.replays, self.stop = x, 0, threading.Event()
        self.failure: Optional[BaseException] = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                g = torch.autograd.grad(self.y.sum(), self.x, retain_graph=True)[0]
                torch.testing.assert_close(g, self.expected, rtol=0, atol=0)
                self.replays += 1
                self.started.set()
        except BaseException as e:  # every draw of the checkpointed run goes through the engine's lock
            self.failure = e
            self.started.set()

    def __enter__(self) -> "_ReplayingThread":
        # torch keeps "a non-infra dispatch mode is active" in one process-wide flag that each mode
        # saves on enter and restores on exit; two threads' modes interleaving leave it set, and
        # torch.compile then skips every later frame of the process (0 graphs: a later compiled test
        # fails). torch's own race, not a value: put the flag back when this thread is done.
        self.flag = _python_dispatch._is_in_any_mode_without_ignore_compile_internals
        self.thread.start()
        self.started.wait(30)  # at least one replay before the program starts
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the replaying thread did not stop (a deadlock?)"
        _python_dispatch._is_in_any_mode_without_ignore_compile_internals = self.flag
        assert self.failure is None, f"the replaying thread failed: {self.failure!r}"
        assert self.replays > 0


def run(steps: tuple[Step, ...], device: torch.device, policy: Any = None, verify: bool = False,
        hooks: str = "none", after: Optional[str] = None, thread: bool = False, outer: Optional[str] = None,
        compiled: bool | str = False, quiet: bool = False, backward: Optional[str] = None) -> Outcome:
    """Run one program (checkpointed under ``policy``, or plainly when it is None) from fixed seeds,
    its forward inside the ``hooks`` context (``HOOKS``), then modify ``after`` (``AFTER``) in place;
    with ``thread``, another thread replays a random region all the while (``_ReplayingThread``);
    backward inside the dispatch mode ``outer`` (``OUTER``), the way ``backward`` (``BACKWARD``) says;
    ``compiled``: the call (region and all) under ``torch.compile(backend="aot_eager")`` (or the backend it
    names), from a reset Dynamo (each program its own compile); ``quiet``:
    hooks that record nothing and no global hook, so Dynamo can trace the hooked modules too."""
    policy = _saving_pair(steps, policy)
    _restart_counting()
    _PHASE["reruns"] = 0
    gen = torch.Generator().manual_seed(7)
    params = {
        "w": torch.randn(N, N, generator=gen).to(device).requires_grad_(),
        "bias": torch.randn(N, generator=gen).to(device).requires_grad_(),
        "frozen": torch.randn(N, N, generator=gen).to(device),
        "ln": (1.0 + 0.1 * torch.randn(N, generator=gen)).to(device).requires_grad_(),
    }
    a_leaf = torch.randn(N, N, generator=gen).to(device).requires_grad_()
    b = torch.randn(N, N, generator=gen).to(device)
    cot = torch.randn(3, N, N, generator=gen).to(device)
    # The region also takes a tensor it never reads and an int64 one (users' regions take such inputs).
    extra = {"unused": torch.randn(N, 2, generator=gen).to(device), "ids": torch.tensor(INDEX).to(device)}
    if uses_alias(steps):  # inputs sharing b's memory, only for programs that use them
        extra.update(bt=b.t(), bs=b[1:3])
    log: list[torch.Tensor] = []
    mods, originals = _modules(gen, device, log, quiet)
    params.update(user_params(gen, device))  # drawn last: the other kinds' values stay as they were
    fn = _body(steps, params, _Counter(), mods, inner=policy is not None)
    other = _ReplayingThread() if thread else contextlib.nullcontext()  # its forward draws before the seed
    seed_all(device)
    names = ["loss", "a.grad", "w.grad", "bias.grad", "ln.grad", "frozen.grad", "b"]
    with other:  # the RNG state is read after the other thread stopped (a replay sets it for a moment)
        try:
            a = a_leaf * 1.0  # a non-leaf, so fn may write to it as plain autograd allows
            version = b._version  # shared with its views: bumped by any write through b, bt or bs
            with _hooks(hooks, device), (contextlib.nullcontext() if quiet else _global_hook(mods, log)):
                call = fn if policy is None else functools.partial(xla_ckpt.checkpoint, fn, policy=policy,
                                                                   verify=verify)
                if compiled:
                    torch._dynamo.reset()  # a program's compile must not be another's cache hit
                    call = torch.compile(call, backend=compiled if isinstance(compiled, str) else "aot_eager")
                if hooks == "forward_ad":  # a fixed tangent, from its own generator: the other draws stay
                    tangent = torch.randn(N, N, generator=torch.Generator().manual_seed(11)).to(device)
                    out = call(fwAD.make_dual(a, tangent), b=b, **extra)
                    tangents = [fwAD.unpack_dual(t).tangent for t in torch.utils._pytree.tree_leaves(out)
                                if isinstance(t, torch.Tensor)]
                else:
                    out, tangents = call(a, b=b, **extra), []
            aliased_written = uses_alias(steps) and b._version != version
            if after == "eval":
                for m in mods.values():
                    m.eval()
            elif after is not None:
                with torch.no_grad():
                    {"a": a, "b": b}.get(after, params.get(after)).mul_(1.5)
            outs = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            loss = sum(((o.float() * cot[i % 3].expand_as(o)).sum() for i, o in enumerate(outs)),
                       torch.zeros((), device=device))
            if loss.requires_grad:
                _PHASE["backward"] = True
                try:
                    with _outer(outer):
                        _backward(backward, loss, _leaves(a_leaf, params, mods))
                finally:
                    _PHASE["backward"] = False
            # torch_xla's seed before the sync: a sync derives the next one from the base seed alone,
            # so a draw too many in backward would not show after it. Reading draws nothing.
            xla_rng = _xla_rng(device)
            sync(device)
        except RuntimeError as e:  # CheckpointError is a RuntimeError
            # Raised while AOTAutograd traced, Dynamo wraps it (BackendCompilerFailed): the error is inside.
            inner = getattr(e, "inner_exception", None)
            error = inner if compiled and isinstance(inner, RuntimeError) else e
            return Outcome(error, [], names, None, uses_alias(steps) and b._version != version)
    if policy is not None and not verify and not _planning(policy):
        assert _PHASE["reruns"] == 0, f"a saved custom op with a non-tensor output ran {_PHASE['reruns']}x in backward"
    # Forward values first, each output on its own (a wrong value the loss's weighted sum would hide).
    names = [f"output {i}" for i in range(len(outs))] + [f"tangent of output {i}" for i in range(len(tangents))] + names
    values = outs + tangents + [loss.detach(), a_leaf.grad]
    values += [params[k].grad for k in ("w", "bias", "ln", "frozen")] + [b]
    # What else a user observes: each hook record (a call more or fewer changes the names), the
    # modules' parameter grads and every buffer after backward.
    names += [f"hook record {i}" for i in range(len(log))]
    values += log
    for n, g in user_grads({s.kind for s in steps}, params):
        names.append(n)
        values.append(g)
    used = {MODULES[s.variant] for s in steps if s.kind == "module"}
    for k in sorted(used):
        for n, p in mods[k].named_parameters():
            names.append(f"{k}.{n}.grad")
            values.append(p.grad)
        for n, t in mods[k].named_buffers():
            names.append(f"{k}.{n}")
            values.append(t)
        for n, t in (originals[k].named_buffers() if originals else ()):
            names.append(f"{k}.{n} of the model it was copied from")
            values.append(t)
        for n, t in (mods[k].observed() if isinstance(mods[k], _Attributes) else ()):
            names.append(f"{k}.{n}")
            values.append(t)
    return Outcome(None, [None if v is None else v.detach().cpu() for v in values], names,
                   (torch.get_rng_state(), xla_rng), aliased_written)


def rounding_amplified(steps: tuple[Step, ...], hooks: str) -> bool:
    """A program whose grads XLA's rounding alone moves past the fuzz's tolerance: bf16 (autocast) and a
    BatchNorm over a batch of equal rows (``_view`` variant 2 expands one row; row-wise steps keep the rows
    equal): the batch variance is 0, so 1/sqrt(eps) (316x) multiplies what rounding leaves of x - mean.

    The recompute runs in XLA's backward graph, fused and so rounded otherwise in the last bits (as
    ``verify`` allows on XLA), and bf16 turns a last bit into a bf16 step. Measured on one such program
    (nothing_saveable, XLA:CPU): a.grad 0.25 off against plain, while the plain run on the CPU is 0.5 off
    against plain on XLA; with float32 steps, or rows that differ, exact within the tolerance.
    """
    bf16 = hooks == "autocast" or any(s.kind == "autocast" for s in steps)
    equal_rows = any(s.kind == "view" and s.variant == 2 for s in steps)
    batch_norm = any(s.kind == "module" and MODULES[s.variant] in ("bn", "bn_cumulative") for s in steps)
    return bf16 and equal_rows and batch_norm


def _reduce_in_place(t: torch.Tensor) -> None:
    """``xm.all_reduce``'s list form on ``t``: one device, so made to run (it returns at once otherwise)."""
    import os

    import torch_xla.core.xla_model as xm

    before = os.environ.get("XLA_ALWAYS_ALLREDUCE")
    os.environ["XLA_ALWAYS_ALLREDUCE"] = "1"
    try:
        xm.all_reduce(xm.REDUCE_SUM, [t], scale=0.5)
    finally:
        if before is None:
            del os.environ["XLA_ALWAYS_ALLREDUCE"]
        else:
            os.environ["XLA_ALWAYS_ALLREDUCE"] = before


def bypassed(steps: tuple[Step, ...], error: BaseException) -> bool:
    """The program writes outside the dispatcher (XLA) and the library said so (read again), or ``fn`` run
    again saw one op fewer (an ``aten.scalar_tensor`` torch_xla's reduction ran in the forward only): a
    divergence at it, or fewer ops in all when it was the forward's last."""
    message = str(error)
    return any(s.kind == "bypass" for s in steps) and (
        "outside PyTorch's dispatcher" in message or "aten.scalar_tensor" in message
        or ("recomputation ran" in message and "must run the same ops" in message))


def has_state(steps: tuple[Step, ...]) -> bool:
    return any(s.kind in STATEFUL for s in steps)


def _xla_rng(device: torch.device) -> Any:
    if device.type == "xla":
        import torch_xla.core.xla_model as xm

        return xm.get_rng_state(device)
    return None
