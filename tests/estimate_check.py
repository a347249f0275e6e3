"""Exactness checks of ``xla_ckpt.estimate`` against a real step, shared by the estimate tests.

``check_exact``: the meta-device estimate equals a real CPU step to the byte and the FLOP under every preset,
budget and policy (``tests/unit/_estimate/test_estimate.py`` says how the reference is taken). ``check_forms``: the
estimate for a device (``"cpu"``, ``"cuda"``, ``"xla"``) equals ``saved_activations()`` of a real step of the
demo GPT or HF GPT-2 (``gpt``, ``gpt2``) there. Example::

    check_forms(gpt, torch.bfloat16, "full", "cpu")
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import xla_ckpt
from xla_ckpt import hf_models, policies
from xla_ckpt.models import GPT, GPTConfig

BUDGETS = (0.1, 0.5)
PRESETS = tuple(xla_ckpt.presets())


def _user_policy(call: xla_ckpt.OpCall) -> xla_ckpt.Decision:
    """A user policy: keep matmul outputs larger than 2 KiB and softmax outputs, recompute the rest."""
    big_mm = call.op.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm) and call.nbytes > 2048
    keep = big_mm or call.op.overloadpacket is torch.ops.aten._softmax
    return xla_ckpt.Decision.SAVE if keep else xla_ckpt.Decision.RECOMPUTE


def _variants() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [(p, {"config": p}) for p in PRESETS]
    out += [(f"budget{f}", {"config": {"checkpoint": [{"blocks": True, "budget": f}]}}) for f in BUDGETS]
    out += [("user", {"policy": _user_policy}), ("dots_policy", {"policy": policies.dots_saveable})]
    return out


def _real(model: torch.nn.Module, args: tuple, kwargs: dict, how: dict[str, Any]) -> tuple[int, dict, int, int]:
    m = copy.deepcopy(model)
    if "config" in how:
        xla_ckpt.apply(m, how["config"])
    elif "policy" in how:
        for name in xla_ckpt.find_blocks(m):
            xla_ckpt.checkpointed(m.get_submodule(name), policy=how["policy"])
    with sdpa_kernel(SDPBackend.MATH):
        with xla_ckpt.saved_activations() as report, FlopCounterMode(display=False) as fwd:
            out = m(*args, **kwargs)
        loss = out.loss if hasattr(out, "loss") else out
        with FlopCounterMode(display=False) as bwd:
            loss.backward()
    for p in m.parameters():
        assert p.grad is not None or not p.requires_grad
    return report.nbytes, report.by_module(), fwd.get_total_flops(), bwd.get_total_flops()


def check_exact(model: torch.nn.Module, args: tuple, kwargs: dict, only: tuple[str, ...] = ()) -> dict[str, int]:
    """``estimate`` of ``model`` under every preset, budget and policy variant (or ``only`` those named) equals
    a real CPU step to the byte (in total and per module) and the FLOP; the activation bytes of each."""
    base = _real(model, args, kwargs, {})
    kept = {}
    for name, how in _variants():
        if only and name not in only:
            continue
        nbytes, by_module, fwd, bwd = _real(model, args, kwargs, how)
        est = xla_ckpt.estimate(model, *args, **how, **kwargs)
        assert est.activation_bytes == nbytes, name
        assert dict(est.by_module) == by_module, name
        assert est.forward_flops == fwd, name
        assert est.recompute_flops == bwd - base[3], name
        assert est.backward_flops == base[3], name
        kept[name] = est.activation_bytes
    # The policies did something, and the estimate sees it.
    assert kept["full"] < kept["megatron_selective"] < kept["none"] == base[0], kept
    return kept


# ---------------------------------------------------------------------------- the device's forms

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def gpt(dtype: torch.dtype) -> tuple[torch.nn.Module, tuple, dict]:
    """The demo GPT: LayerNorm, written-out attention, four dropouts (p=0.1) a block."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=4, d_model=64, seq_len=32, dropout=0.1)).to(dtype)
    idx = torch.randint(0, 512, (2, 32))
    return model, (idx, idx), {}


def gpt2(dtype: torch.dtype) -> tuple[torch.nn.Module, tuple, dict]:
    """HF GPT-2: LayerNorm, SDPA with dropout 0.1 inside, residual and embedding dropout."""
    model = hf_models.build("gpt2", d_model=64, n_layer=2, n_head=4, seq_len=64).to(dtype)
    idx = torch.randint(0, 128, (2, 64), generator=torch.Generator().manual_seed(0))
    return model, (idx,), {"labels": idx, "use_cache": False}


def real(model: torch.nn.Module, args: tuple, kwargs: dict, config: str,
         device: Any = "cpu") -> tuple[int, dict[str, int]]:
    """``saved_activations()`` of one real training step of a copy of ``model`` under ``config`` on ``device``."""
    m = copy.deepcopy(model)
    xla_ckpt.apply(m, config)
    m = m.to(device)
    args = tuple(a.to(device) for a in args)
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    with sdpa_kernel(SDPBackend.MATH):
        with xla_ckpt.saved_activations() as report:
            out = m(*args, **kwargs)
        (out.loss if hasattr(out, "loss") else out).backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)
    return report.nbytes, report.by_module()


def check_forms(build: Any, dtype: torch.dtype, config: str, device: str, where: Any = "cpu") -> int:
    """``estimate(device=device)`` of ``build(dtype)`` under ``config`` equals a real step on ``where`` to the
    byte (in total and per module); the bytes kept."""
    model, args, kwargs = build(dtype)
    nbytes, by_module = real(model, args, kwargs, config, where)
    est = xla_ckpt.estimate(model, *args, config=config, device=device, **kwargs)
    assert est.activation_bytes == nbytes, (config, est.activation_bytes - nbytes)
    assert dict(est.by_module) == by_module, config
    return nbytes
