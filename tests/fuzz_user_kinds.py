"""Step kinds for the differential fuzz modelled on what users train (``fuzz_programs.MENU`` draws them).

- ``moe``: top-k routing (softmax over a router linear, topk) in three forms: Hugging Face Mixtral's
  (one_hot expert mask, ``torch.where`` per expert, index the tokens, ``index_add_`` back), a static-shape
  one (gather each assignment's expert weight, bmm, ``scatter_add`` back) and a dense one (the gates
  scattered into a (tokens, experts) matrix, every expert on every token); top-1 or top-2.
- ``custom_fn``: a ``torch.autograd.Function`` with its own backward, saving its inputs, its output, or
  an intermediate with ``ctx.save_for_backward`` (and a Python float on ``ctx``).
- ``no_grad_stat``: a statistic computed under ``torch.no_grad()`` scaling x (fp8 amax scaling): a
  global amax, a per-row amax with a straight-through rounding, an amax read back as a Python float.
- ``lora``: a frozen base weight (``requires_grad=False``) plus low-rank A/B adapters: unmerged, with
  dropout on the adapter's input, merged into the weight.
- ``nested``: a small sub-function checkpointed again inside the region (``xla_ckpt.checkpoint`` under
  ``nothing_saveable``, ``dots_saveable`` or ``everything_saveable``), with or without dropout; the
  plain run calls it plainly.
- ``wrapper``: a wrapper tensor subclass inside the region (``wrapper_tensor.Pair``, built as DTensor
  and torchao's tensors are: no storage of its own), entered and left differentiably: elementwise ops,
  a matmul with views of its result, an in-place write and a dropout (two draws under one op). On XLA,
  where torch_xla refuses wrapper subclasses without the library too, the same step runs on plain x.
- ``autocast``: mixed precision inside the region (``torch.autocast`` to bfloat16 on x's device, as
  TPU training runs): a linear and a gelu, matmuls with a dropout between them, an fp32 softmax under
  ``autocast(enabled=False)`` inside the bf16 block; the result cast back to x's dtype. On XLA the
  comparison holds only with ``--xla_allow_excess_precision=false`` (tests/conftest.py says why).

Each step is ``(variant, x, params) -> Tensor`` of x's shape, deterministic given the parameters
``user_params`` creates from the program's seeded generator; ``run`` compares each one's grad.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import xla_ckpt
from wrapper_tensor import from_pair, to_pair

aten = torch.ops.aten
N = 4
EXPERTS = 3
RANK = 2
INNER_POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")

# (kind, number of operands, number of variants)
USER_MENU: list[tuple[str, int, int]] = [
    ("moe", 1, 6), ("custom_fn", 1, 3), ("no_grad_stat", 1, 3), ("lora", 1, 3), ("nested", 1, 6),
    ("autocast", 1, 3), ("wrapper", 1, 3),
]
USER_KINDS = tuple(m[0] for m in USER_MENU)
# The ops these kinds run, for the policies that decide by op (``fuzz_programs._PACKETS``).
USER_PACKETS = [aten.topk, aten.index_add, aten.scatter_add, aten.scatter, aten.amax, aten.abs, aten._to_copy]
# Parameters with grads (compared by ``run``), by the kinds that read them; "lora_base" is frozen.
USES = {"moe": ("router", "experts"), "custom_fn": ("w_fn",), "lora": ("lora_a", "lora_b"), "nested": ("w_inner",),
        "autocast": ("w_ac",), "wrapper": ("w_pair",)}


def user_params(gen: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """The parameters these kinds read, drawn from ``gen`` (after the program's own draws)."""
    def leaf(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, generator=gen)).to(device).requires_grad_()

    return {
        "router": leaf(EXPERTS, N), "experts": leaf(EXPERTS, N, N, scale=0.5), "w_fn": leaf(N, N, scale=0.5),
        "lora_base": torch.randn(N, N, generator=gen).to(device), "lora_a": leaf(RANK, N), "lora_b": leaf(N, RANK),
        "w_inner": leaf(N, N, scale=0.5), "w_ac": leaf(N, N, scale=0.5), "w_pair": leaf(N, N, scale=0.5),
    }


def user_grads(kinds: set[str], params: dict[str, torch.Tensor]) -> list[tuple[str, Any]]:
    """``(name, grad)`` of each parameter the program's ``kinds`` read (None where autograd gave none)."""
    names = sorted({p for k in kinds for p in USES.get(k, ())})
    return [(f"{n}.grad", params[n].grad) for n in names]


def user_step(kind: str, variant: int, x: torch.Tensor, params: dict[str, torch.Tensor], inner: bool) -> torch.Tensor:
    """One step of a user kind; ``inner``: the region is checkpointed (``nested`` checkpoints again)."""
    if kind == "moe":
        return _moe(variant, x, params)
    if kind == "custom_fn":
        return _custom_fn(variant, x, params["w_fn"])
    if kind == "no_grad_stat":
        return _no_grad_stat(variant, x)
    if kind == "lora":
        return _lora(variant, x, params)
    if kind == "nested":
        return _nested(variant, x, params, inner)
    if kind == "autocast":
        return _autocast(variant, x, params["w_ac"])
    if kind == "wrapper":
        return _wrapper(variant, x, params["w_pair"])
    raise AssertionError(kind)  # pragma: no cover


def _moe(variant: int, x: torch.Tensor, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """Top-k routing of x's rows (the tokens) over ``EXPERTS`` expert linears (``variant // 2``: the form,
    ``variant % 2 + 1``: k)."""
    form, k = variant // 2, variant % 2 + 1
    router, experts = params["router"], params["experts"]
    probs = torch.softmax(F.linear(x, router), dim=-1)  # (tokens, experts)
    gates, chosen = probs.topk(k, dim=-1)
    if k > 1:  # Mixtral renormalises its top-2; top-1 keeps the probability (Switch), so the router gets a grad
        gates = gates / gates.sum(-1, keepdim=True)
    if form == 0:  # Mixtral: an expert mask, the tokens routed to each expert, index_add_ back
        out = torch.zeros_like(x)
        mask = F.one_hot(chosen, EXPERTS).permute(2, 1, 0)  # (experts, k, tokens)
        for e in range(EXPERTS):
            slot, tokens = torch.where(mask[e])
            h = F.linear(x[tokens], experts[e]) * gates[tokens, slot, None]
            out.index_add_(0, tokens, h.to(x.dtype))
        return out + x
    flat = chosen.reshape(-1)  # (tokens * k,)
    tokens = torch.arange(x.shape[0], device=x.device).repeat_interleave(k)
    if form == 1:  # static shapes: each assignment's expert weight gathered, scatter_add back
        h = torch.bmm(experts[flat], x[tokens].unsqueeze(-1)).squeeze(-1) * gates.reshape(-1, 1)
        out = torch.zeros_like(x).scatter_add(0, tokens.unsqueeze(-1).expand(-1, N), h)
        return out + x
    # dense: the gates scattered into (tokens, experts), every expert on every token
    dense = torch.zeros_like(probs).scatter(1, chosen, gates)
    # matmul, not einsum: torch_xla's einsum saves both operands where it needs one, so on XLA the plain
    # run raised at an ``experts`` modified after the forward (``AFTER``) where the checkpointed run, which
    # sees einsum's decomposition, rightly returned the forward's grads (the comparison's false alarm).
    every = torch.matmul(x.unsqueeze(0), experts.transpose(1, 2))  # (experts, tokens, N)
    return (dense.t().unsqueeze(-1) * every).sum(0) + x


class _SaveInputs(torch.autograd.Function):
    """tanh(x @ w), its backward recomputing the tanh from the saved inputs."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.tanh(x @ w)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        d = g * (1 - torch.tanh(x @ w) ** 2)
        return d @ w.t(), x.t() @ d


class _SaveOutput(torch.autograd.Function):
    """sigmoid(x) * scale, saving its output (and a Python float on ctx)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        out = torch.sigmoid(x)
        ctx.save_for_backward(out)
        ctx.scale = scale
        return out * scale

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (out,) = ctx.saved_tensors
        return g * ctx.scale * out * (1 - out), None


class _SaveIntermediate(torch.autograd.Function):
    """relu(x @ w) * x, saving x, w and the pre-activation made inside forward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        ctx.save_for_backward(x, w, h)
        return torch.relu(h) * x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, Any]:
        x, w, h = ctx.saved_tensors
        dh = g * x * (h > 0).to(g.dtype)
        gx = g * torch.relu(h) + dh @ w.t() if ctx.needs_input_grad[0] else None
        gw = x.t() @ dh if ctx.needs_input_grad[1] else None
        return gx, gw


def _custom_fn(variant: int, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if variant == 0:
        return _SaveInputs.apply(x, w) + x
    if variant == 1:
        return _SaveOutput.apply(x @ w, 1.5)
    return _SaveIntermediate.apply(x, w)


def _no_grad_stat(variant: int, x: torch.Tensor) -> torch.Tensor:
    """x scaled by a statistic of it computed without grad (fp8-style amax scaling)."""
    # amax over named dims: torch_xla 2.9's amax() without dims reduces nothing (a (4, 4) result).
    if variant == 0:  # a global amax: the scale is a constant to autograd
        with torch.no_grad():
            scale = 2.0 / x.abs().amax(dim=(0, 1)).clamp(min=1e-6)
        return x * scale
    if variant == 1:  # per-row amax, rounded to a grid, a straight-through estimator for the rounding
        with torch.no_grad():
            scale = 8.0 / x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-6)
            q = torch.round(x * scale) / scale
        return x + (q - x).detach()
    with torch.no_grad():  # the amax read back as a Python float (a host sync on XLA)
        amax = float(x.detach().abs().amax(dim=(0, 1)))
    return x * (1.0 / max(amax, 1e-6))


def _lora(variant: int, x: torch.Tensor, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """A frozen base linear plus ``scaling * B @ A``: unmerged, with dropout on A's input, or merged."""
    base, a, b = params["lora_base"], params["lora_a"], params["lora_b"]
    scaling = 0.5
    if variant == 2:
        return F.linear(x, base + scaling * (b @ a))
    h = F.dropout(x, 0.25, training=True) if variant == 1 else x
    return F.linear(x, base) + scaling * F.linear(F.linear(h, a), b)


def _nested(variant: int, x: torch.Tensor, params: dict[str, torch.Tensor], inner: bool) -> torch.Tensor:
    """A sub-function checkpointed again inside the region (called plainly in the plain run)."""
    w = params["w_inner"]
    drop = variant % 2 == 1

    def sub(t: torch.Tensor) -> torch.Tensor:
        h = F.gelu(t @ w)
        if drop:
            h = F.dropout(h, 0.5, training=True)
        return h * t + t.sin()

    if not inner:
        return sub(x)
    return xla_ckpt.checkpoint(sub, x, policy=INNER_POLICIES[variant // 2])


def _autocast(variant: int, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """bfloat16 autocast on x's device inside the region; the result back in x's dtype."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        if variant == 0:  # a linear (autocast casts x and w) and a gelu in bf16
            h = F.gelu(F.linear(x, w))
        elif variant == 1:  # matmuls with a dropout between them, all in bf16
            h = F.dropout(x @ w, 0.25, training=True) @ w.t()
        else:  # attention-style: scores in bf16, the softmax upcast to fp32 with autocast off
            s = x @ w @ x.t()
            with torch.autocast(x.device.type, enabled=False):
                p = torch.softmax(s.float(), dim=-1)
            h = p @ x
    return h.to(x.dtype) + x


def _wrapper(variant: int, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Ops on a ``Pair`` made from x inside the region, back to a plain tensor at the end."""
    xla = x.device.type == "xla"
    enter, leave = (lambda t: t, lambda t: t) if xla else (to_pair, from_pair)
    if variant == 0:  # elementwise ops on the wrapper, saving wrapper tensors
        p = enter(x)
        return leave(torch.tanh(p) * p + p.sin())
    if variant == 1:  # a matmul with a plain weight, views of its result
        h = (enter(x) @ w).relu()
        h = h.t().contiguous().t()
        return leave(torch.cat([h[:, :2].sin(), h[:, 2:].exp()], -1))
    h = enter(x @ w) * 1.0  # an in-place write into a view, a dropout drawing once per wrapped tensor
    h[:, :2].mul_(2.0)
    return leave(F.dropout(h, 0.25, training=True).softmax(-1))
