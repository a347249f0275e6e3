"""``estimate(device="xla")`` equals ``saved_activations()`` of a real PyTorch/XLA step (XLA:CPU) to the byte.

XLA's ledger differs from eager's in three ways the estimate models (xla_ckpt/_api/device_forms.py):
LayerNorm runs as ``math_native_layer_norm`` (batch norm over ``[1, rows, n]``, statistics in the input
dtype, the normalized output kept by ``addcmul``), and every XLA tensor is its own buffer (a Linear's
transposed weight and the loss's flattened targets count). Dropout keeps its noise, as on CPU. The real
step builds the graph only (no ``sync``): the ledger is complete after the forward, nothing compiles.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from estimate_check import DTYPES, check_forms, gpt, gpt2

pytestmark = pytest.mark.xla


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_xla_forms_exact_gpt(xla_device: torch.device, dtype: str) -> None:
    kept = {c: check_forms(gpt, DTYPES[dtype], c, "xla", xla_device) for c in ("none", "megatron_selective", "full")}
    assert kept["full"] < kept["megatron_selective"] < kept["none"], kept


def test_xla_forms_exact_gpt2_bf16(xla_device: torch.device) -> None:
    for c in ("none", "full"):
        check_forms(gpt2, torch.bfloat16, c, "xla", xla_device)


def test_cpu_forms_are_not_xla(xla_device: torch.device) -> None:
    """The forms matter: the CPU estimate of the bf16 demo GPT is short of XLA's ledger by exactly these bytes."""
    model, args, _ = gpt(torch.bfloat16)
    cpu = xla_ckpt.estimate(model, *args, config="none", device="cpu").activation_bytes
    xla = check_forms(gpt, torch.bfloat16, "none", "xla", xla_device)
    b, s, d, v, blocks = 2, 32, 64, 512, 2
    norm_out = 5 * b * s * d * 2  # the normalized output addcmul keeps, 5 LayerNorms (stats: bf16 on both)
    weights_t = (blocks * (d * 3 * d + d * d + d * 4 * d + 4 * d * d) + d * v) * 2  # Linear weights' transposes
    targets = b * s * 8  # the loss's flattened int64 targets, a buffer of their own on XLA
    assert xla - cpu == norm_out + weights_t + targets
