"""``estimate`` for the call docs/huggingface.md recommends, and the attention kernel it models.

HF models in training without a cache and without an ``attention_mask`` read a value of
``position_ids`` (transformers 5's packed-sequence check); the meta device knows it exactly
(``xla_ckpt._estimate.known``). References are real CPU steps, as in ``test_estimate.py``.
"""

from __future__ import annotations

import copy

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._estimate.known import KnownValues

from estimate_check import check_exact


def test_hf_without_cache_or_mask_estimates_exactly() -> None:
    model = hf_models.build("llama")
    batch = {**hf_models.batch("llama", model), "use_cache": False}  # no attention_mask
    kept = check_exact(model, (), batch, only=("none", "full", "megatron_selective"))
    assert kept["full"] > 0


def test_hf_packed_position_ids_are_read_from_the_callers_values() -> None:
    """Packed sequences (positions restart inside a row): HF builds a block-diagonal mask from the real
    position values; the estimate reads the same values and keeps exactly what the real step keeps."""
    model = hf_models.build("llama")
    batch = {**hf_models.batch("llama", model), "use_cache": False}
    batch["position_ids"] = torch.cat([torch.arange(6), torch.arange(10)]).expand(2, 16)
    check_exact(model, (), batch, only=("none", "full", "megatron_selective"))


def test_known_values_never_guess() -> None:
    with KnownValues() as known:
        pos = torch.arange(8, device="meta")
        assert bool(((pos.diff() == 1)).all()) and int(pos.sum()) == 28
        real = torch.tensor([3, 1, 2])
        ids = real.to("meta")
        known.know(ids, real)
        assert int(ids.max()) == 3
        hidden = torch.empty(4, device="meta")  # no values: anything from it stays unknown
        with pytest.raises(RuntimeError, match="meta tensors"):
            bool((hidden > 0).any())
        with pytest.raises(RuntimeError, match="meta tensors"):
            int(hidden.to(torch.long).sum() + pos.sum())  # an integer op with one unknown input
        view = pos[:4]
        pos.copy_(hidden.to(torch.long).repeat(2))  # a known tensor written from unknown data
        with pytest.raises(RuntimeError, match="meta tensors"):
            int(view.sum())  # forgotten, views included
    with pytest.raises(RuntimeError, match="meta tensors"):
        int(torch.arange(3, device="meta").sum())  # nothing outside the mode


def test_flash_kernel_keeps_what_a_fused_kernel_keeps() -> None:
    """attention="flash" against a real CPU step under torch's flash kernel: the same bytes, module by module,
    but for the 24 bytes of RNG state (seed, offset) the CUDA flash kernel also keeps per call."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = hf_models.build("llama")  # grouped K/V (2 of 4 heads): kept grouped, as the kernel keeps them
    batch = {**hf_models.batch("llama", model), "use_cache": False}
    for cfg in ("none", "megatron_selective", "full"):
        est = xla_ckpt.estimate(model, config=cfg, attention="flash", **batch)
        math = xla_ckpt.estimate(model, config=cfg, **batch)
        real = copy.deepcopy(model)
        xla_ckpt.apply(real, cfg)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), xla_ckpt.saved_activations() as report:
            out = real(**batch)
        out.loss.backward()
        rng = {name: 24 for name in report.by_module() if name.endswith("self_attn") and cfg == "none"}
        assert dict(est.by_module) == {k: v + rng.get(k, 0) for k, v in report.by_module().items()}, cfg
        assert est.activation_bytes == report.nbytes + sum(rng.values()), cfg
        # The same matmul FLOPs as the math path (torch's formulas), fewer bytes where attention is kept.
        assert (est.forward_flops, est.recompute_flops) == (math.forward_flops, math.recompute_flops), cfg
        assert est.activation_bytes < math.activation_bytes if cfg == "none" else True


def test_math_path_keeps_fp32_probabilities_for_bf16_and_flash_the_log_sum_exp() -> None:
    b, a, s, d = 2, 4, 64, 16
    model = _Attention(a * d, a).to(torch.bfloat16)
    x = torch.zeros(b, s, a * d, dtype=torch.bfloat16, requires_grad=True)
    math = xla_ckpt.estimate(model, x)
    flash = xla_ckpt.estimate(model, x, attention="flash")
    assert math.by_op["SafeSoftmaxBackward0"] == 4 * b * a * s * s  # fp32, not bf16's 2 bytes
    assert "SafeSoftmaxBackward0" not in flash.by_op
    # The linear's input, Q, K, V and O in bf16, the fp32 log-sum-exp, and the CUDA kernel's 24 bytes of RNG state.
    qkvo = 2 * b * a * s * d
    assert flash.by_op["ScaledDotProductFlashAttentionBackward0"] == qkvo  # the output
    assert flash.activation_bytes == qkvo + 3 * qkvo + qkvo + 4 * b * a * s + 24
    assert math.activation_bytes == qkvo + 3 * 2 * qkvo + 4 * b * a * s * s  # Q, K, V and the probabilities, all fp32
    with pytest.raises(ValueError, match=r"attention='xformers'; allowed: 'math', 'flash'"):
        xla_ckpt.estimate(model, x, attention="xformers")


class _Attention(torch.nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum()
