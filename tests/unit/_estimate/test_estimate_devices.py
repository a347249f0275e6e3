"""``estimate(device=)``: the dropout and LayerNorm forms of the device planned for, exact against a real CPU step.

The devices differ (docs/estimate.md, "The device"): CPU keeps dropout's noise in the input dtype and
LayerNorm's statistics in the input dtype (bf16 for bf16); the meta kernels keep fp32 statistics; CUDA
keeps a 1-byte dropout mask. ``device="cpu"`` must equal ``saved_activations()`` of a real CPU step in
fp32 and bf16, with dropout > 0 and LayerNorm; ``"cuda"`` is modelled, and must differ from CPU by
exactly those forms. The XLA:CPU half is tests/integration/xla/test_estimate_xla.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import xla_ckpt
from xla_ckpt._api.device_forms import _sdpa_math
from estimate_check import DTYPES, check_forms, gpt, gpt2


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("build", [gpt, gpt2], ids=["gpt", "gpt2"])
def test_cpu_forms_exact(build: Any, dtype: str) -> None:
    kept = {c: check_forms(build, DTYPES[dtype], c, "cpu") for c in ("none", "megatron_selective", "full")}
    assert kept["full"] < kept["megatron_selective"] < kept["none"], kept


def _sites(model: torch.nn.Module, kind: type) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, kind)]


def test_cuda_differs_from_cpu_by_exactly_masks_and_statistics() -> None:
    """bf16 demo GPT: CUDA keeps fp32 LayerNorm statistics (+2 bytes a row each) and 1-byte masks (-1 a value)."""
    model, args, _ = gpt(torch.bfloat16)
    cpu = xla_ckpt.estimate(model, *args, config="none", device="cpu")
    cuda = xla_ckpt.estimate(model, *args, config="none", device="cuda")
    b, s, d, a = 2, 32, 64, 4
    norms = len(_sites(model, torch.nn.LayerNorm))  # 2 a block + ln_f
    rows = b * s
    # dropout sites: embedding (b s d), and per block attention probabilities (b a s s), residual, MLP (b s d)
    dropped = b * s * d + 2 * (b * a * s * s + 2 * b * s * d)
    assert len(_sites(model, torch.nn.Dropout)) == 1 + 2 * 3
    assert cuda.activation_bytes - cpu.activation_bytes == norms * 2 * rows * 2 - dropped * 1
    # fp32: the statistics agree (fp32 everywhere), the masks are 1 byte instead of 4.
    model32, args32, _ = gpt(torch.float32)
    diff = (xla_ckpt.estimate(model32, *args32, config="none", device="cuda").activation_bytes
            - xla_ckpt.estimate(model32, *args32, config="none", device="cpu").activation_bytes)
    assert diff == -dropped * 3


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("how", [{"is_causal": True}, {"mask": True}, {"enable_gqa": True}], ids=str)
def test_sdpa_math_replica_is_torchs_on_cpu(dtype: str, how: dict) -> None:
    """The Python math SDPA ``device="cuda"`` runs is torch's, op for op.

    With CPU's dropout it keeps what torch's math SDPA keeps on CPU, op by op and byte for byte.
    """
    dt = DTYPES[dtype]
    g = torch.Generator().manual_seed(0)
    kv_heads = 2 if how.get("enable_gqa") else 4
    q = torch.randn(2, 4, 16, 8, generator=g).to(dt).requires_grad_()
    k, v = (torch.randn(2, kv_heads, 16, 8, generator=g).to(dt).requires_grad_() for _ in range(2))
    kw = {k_: v_ for k_, v_ in how.items() if k_ != "mask"}
    if how.get("mask"):
        kw["attn_mask"] = torch.ones(16, 16, dtype=torch.bool).tril()
    with sdpa_kernel(SDPBackend.MATH), xla_ckpt.saved_activations() as theirs:
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, **kw)
    with xla_ckpt.saved_activations() as ours:
        _sdpa_math(q, k, v, dropout_p=0.1, dropout=F.dropout, **kw)
    assert ours.nbytes == theirs.nbytes and ours.by_op() == theirs.by_op()
    # CUDA's form of the same call: the fp32 noise (4 bytes a probability) becomes a bool mask (1 byte).
    meta = [t.detach().to("meta").requires_grad_() for t in (q, k, v)]
    with xla_ckpt.saved_activations() as cuda:
        _sdpa_math(*meta, dropout_p=0.1, **kw)
    assert theirs.nbytes - cuda.nbytes == 2 * 4 * 16 * 16 * (4 - 1)


def test_bad_device_raises_before_anything() -> None:
    model, args, _ = gpt(torch.float32)
    with pytest.raises(ValueError, match=r"estimate: device='gpu'; allowed: 'cpu', 'xla', 'tpu', 'cuda'"):
        xla_ckpt.estimate(model, *args, device="gpu")


def test_tpu_is_modelled_as_xla() -> None:
    model, args, kwargs = gpt2(torch.bfloat16)
    assert (xla_ckpt.estimate(model, *args, config="megatron_selective", device="tpu", **kwargs)
            == xla_ckpt.estimate(model, *args, config="megatron_selective", device="xla", **kwargs))
