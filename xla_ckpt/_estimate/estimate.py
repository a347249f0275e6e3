"""``estimate(model, *args, config=...)``: what a policy keeps and recomputes, without allocating anything.

The model runs on the ``meta`` device (shapes only) through the real engine: the same regions,
decisions, liveness, planning and ledger (``saved_activations``) as a run on CPU or CUDA, then its
backward, so the engine's own replay runs and its FLOPs are counted where they happen. Nothing here
models the engine a second time: on meta, a region is a region.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.flop_counter import FlopCounterMode

from xla_ckpt._hooks import saved as _saved
from xla_ckpt._api.apply import apply
from xla_ckpt._estimate.attention import FusedAttention, check_attention
from xla_ckpt._api.device_forms import DeviceForms, check_device
from xla_ckpt._estimate.hf_config import hf_config_data, hf_meta_model, is_hf_config
from xla_ckpt._base.compat import backward_keeping_function_modes
from xla_ckpt._estimate.known import KnownValues
from xla_ckpt._api.blocks import find_blocks
from xla_ckpt._hooks.report import SavedReport, recording
from xla_ckpt._api.wrap import checkpointed
from xla_ckpt._policy.registry import resolve

__all__ = ["Estimate", "estimate", "meta_copy"]


@dataclass(frozen=True)
class Estimate:
    """What one training step keeps for backward and computes, from a run on the meta device.

    Attributes:
        activation_bytes: bytes autograd keeps on the device for backward, parameters excluded:
            exactly ``saved_activations().nbytes`` of the same run on a real eager device.
        host_bytes: bytes a policy moved to host memory (``Decision.OFFLOAD``).
        by_module: ``activation_bytes`` per module (fully qualified names), largest first.
        by_op: ``activation_bytes`` per producing op, largest first.
        forward_flops, backward_flops: torch's ``FlopCounterMode`` count of the forward and of the
            backward without the recomputation; ``recompute_flops``: the recomputation alone.
        by_tag: ``activation_bytes`` per ``xla_ckpt.tag`` name of the kept values (empty: nothing kept
            was tagged, e.g. a name policy on a model that tags nothing).
    """

    activation_bytes: int
    host_bytes: int
    by_module: Mapping[str, int] = field(hash=False)
    by_op: Mapping[str, int] = field(hash=False)
    forward_flops: int
    backward_flops: int
    recompute_flops: int
    by_tag: Mapping[str, int] = field(default_factory=dict, hash=False)

    @property
    def recompute_share(self) -> float:
        """Recompute FLOPs over the step's FLOPs without checkpointing (forward + backward)."""
        step = self.forward_flops + self.backward_flops
        return self.recompute_flops / step if step else 0.0


class _Flops(FlopCounterMode):
    """torch's flop counter, plus the share counted while a region recomputes (``_hooks.saved.state.recompute``).

    Overrides the counter's per-op hook (``_count_flops``, torch 2.9) so the recompute total uses
    exactly the formulas and decompositions of the ``FlopCounterMode`` a user would run.
    """

    def __init__(self) -> None:
        super().__init__(display=False)
        self.recompute = 0

    def _count_flops(self, func_packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
        if _saved.state.recompute is not None and func_packet in self.flop_registry:
            self.recompute += int(self.flop_registry[func_packet](*args, **kwargs, out_val=out))
        return super()._count_flops(func_packet, out, args, kwargs)


if not hasattr(FlopCounterMode, "_count_flops"):  # pragma: no cover - a torch without the hook
    raise ImportError("xla_ckpt.estimate needs torch.utils.flop_counter.FlopCounterMode._count_flops (torch >= 2.4)")


def _to_meta(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_meta else t.to("meta")


def meta_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` on the meta device (tied weights stay tied); real weights are not copied.

    Example:
        >>> shadow = xla_ckpt.meta_copy(model)   # no memory beyond Python objects
    """
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(_to_meta(p.detach()), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = _to_meta(b)
    return copy.deepcopy(model, memo)


def _wrap_blocks(model: nn.Module, policy: Any) -> None:
    blocks = find_blocks(model)
    if not blocks:
        raise ValueError("xla_ckpt.estimate: policy= checkpoints the model's transformer blocks, and "
                         f"find_blocks found none in {type(model).__name__}; pass config= with rules that name modules")
    for name in blocks:
        checkpointed(model.get_submodule(name), policy=policy)


def _backward_roots(out: Any) -> list[torch.Tensor]:
    """What the step differentiates: the loss if the model returns one, else every output needing grad."""
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        return [loss]
    if isinstance(out, torch.Tensor):
        return [out] if out.requires_grad else []
    values = out.to_tuple() if hasattr(out, "to_tuple") else out
    return [t for t in tree_leaves(values) if isinstance(t, torch.Tensor) and t.requires_grad]


def _model(model: Any) -> nn.Module:
    """``model`` itself, or the causal LM a transformers config object describes (on meta)."""
    if isinstance(model, nn.Module):
        return model
    if not is_hf_config(model):
        raise TypeError(f"xla_ckpt.estimate: model must be a torch.nn.Module or a transformers config object "
                        f"(LlamaConfig(...)), got {type(model).__module__}.{type(model).__qualname__} "
                        "(xla_ckpt.fit takes a config.json path, a dict or a Hub id, with seq= and batch=)")
    return hf_meta_model(hf_config_data(model, "xla_ckpt.estimate")[0])


def estimate(model: Any, *args: Any, config: Any = None, policy: Any = None, attention: str = "math",
             device: str = "cpu", **kwargs: Any) -> Estimate:
    """Activation bytes and FLOPs of one training step of ``model(*args, **kwargs)``, on the meta device.

    Args:
        model: any module; built under ``torch.device("meta")`` or from a config with no weights is
            the normal case (a model with real weights is copied to meta; it is never changed). Or a
            transformers config object (``LlamaConfig(...)``): the causal LM
            ``AutoModelForCausalLM.from_config`` builds from it, on meta, in training mode, cache off.
        *args, **kwargs: the model's inputs (tensors are moved to meta; their values are not read).
        config: what :func:`xla_ckpt.apply` takes (preset name, file, dict, ``Config``), applied to a copy.
        policy: a policy value or name, put on every transformer block (:func:`xla_ckpt.find_blocks`).
            Neither: the model as it is (already wrapped, or not checkpointed at all).
        attention: the kernel ``F.scaled_dot_product_attention`` is modelled as: ``"math"`` (the
            default: the probabilities kept, fp32 for bf16, as XLA lowers it) or ``"flash"`` (a fused
            kernel: Q, K, V, output and log-sum-exp kept; docs/estimate.md).
        device: whose kernels' forms are kept where devices differ (dropout's noise or mask, LayerNorm's
            statistics; ``xla_ckpt._api.device_forms``): ``"cpu"`` (the default), ``"xla"`` (PyTorch/XLA's
            ledger), both measured; ``"cuda"`` and ``"tpu"`` (as ``"xla"``) modelled.

    ``activation_bytes`` equals ``saved_activations().nbytes`` of the same step on ``device`` (measured
    for CPU and XLA:CPU); ``recompute_flops`` equals the extra backward FLOPs ``FlopCounterMode`` counts.
    What XLA's compiler then keeps after fusion differs again: see docs/estimate.md for the measured band.

    Example:
        >>> with torch.device("meta"):
        ...     model = GPT(GPTConfig(n_layer=48, d_model=1600))
        >>> est = xla_ckpt.estimate(model, idx, idx, config="megatron_selective")
        >>> est.activation_bytes, est.recompute_flops
    """
    if config is not None and policy is not None:
        raise ValueError("xla_ckpt.estimate: give config= or policy=, not both (a policy alone goes on every block)")
    pol = resolve(policy) if policy is not None else None  # bad names raise here, before any copy
    check_attention(attention, "xla_ckpt.estimate")
    check_device(device, "xla_ckpt.estimate")
    model = _model(model)
    shadow = meta_copy(model)
    if config is not None:
        import warnings  # noqa: PLC0415

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # apply's notes (HF checkpointing turned off) concern the copy
            apply(shadow, config)
    elif pol is not None:
        _wrap_blocks(shadow, pol)
    moved: dict[int, torch.Tensor] = {}  # one meta tensor per input tensor: an input passed twice stays one
    known = KnownValues()  # integer values computable without data (HF's packed-sequence check reads one)

    def to_meta(a: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            return a
        if id(a) not in moved:
            # Detached: a real input that requires grad would otherwise send its gradient back to its device
            # (a copy out of meta, which fails); on meta it is a leaf that requires grad as the input does.
            moved[id(a)] = a if a.is_meta else a.detach().to("meta").requires_grad_(a.requires_grad)
            known.know(moved[id(a)], a)
        return moved[id(a)]

    args, kwargs = tree_map(to_meta, (args, kwargs))
    counter = _Flops()
    fused = FusedAttention() if attention == "flash" else contextlib.nullcontext()
    # Both modes hold for the backward too: the engine's replay runs the forward's ops again there.
    # The device's forms outside the fused-attention mode, so that mode sees SDPA first.
    with torch.enable_grad(), known, DeviceForms(device), fused:
        # XLA's ledger: every tensor its own buffer (views, a weight's transpose), as report.py says.
        with recording(SavedReport(per_tensor=device in ("xla", "tpu"))) as report, counter:
            try:
                out = shadow(*args, **kwargs)
            except (RuntimeError, NotImplementedError) as e:
                # The meta device has shapes, not values: a forward that reads values (MoE routing's
                # nonzero / per-expert counts, a mask check's .item()) or a kernel with no meta
                # implementation cannot run there. Say so, naming the model, instead of torch's bare error.
                raise RuntimeError(
                    f"xla_ckpt.estimate: {type(model).__name__}'s forward cannot run on the meta device, where "
                    f"tensors have shapes but no values ({e}). Models whose forward depends on tensor values "
                    "(mixture-of-experts routing, padding checks that call .item()) are not estimable this way: "
                    "measure a small real run with xla_ckpt.saved_activations() instead."
                ) from e
        forward = counter.get_total_flops()
        roots = _backward_roots(out)
        backward = 0
        if roots:
            with counter:  # entering clears the counts: this is the backward alone
                backward_keeping_function_modes(roots, [torch.ones_like(r) for r in roots])
            backward = counter.get_total_flops() - counter.recompute
    return Estimate(
        activation_bytes=report.nbytes,
        host_bytes=report.host_nbytes,
        by_module=report.by_module(),
        by_op=report.by_op(),
        forward_flops=forward,
        backward_flops=backward,
        recompute_flops=counter.recompute,
        by_tag=report.by_tag(),
    )
