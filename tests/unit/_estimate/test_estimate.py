"""``xla_ckpt.estimate``: the meta-device step equals a real CPU step to the byte and the FLOP.

Reference: the same model with real weights on CPU, ``saved_activations()`` around the forward and
``FlopCounterMode`` around the backward; its recompute FLOPs are the backward FLOPs beyond the
unchecked model's. Attention runs the math SDPA path in the reference, as on meta and on XLA
(docs/estimate.md says why).
"""

from __future__ import annotations

import re

import pytest
import torch

import xla_ckpt
from estimate_check import check_exact
from xla_ckpt import hf_models
from xla_ckpt.models import GPT, GPTConfig

def _gpt() -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=4, d_model=64, seq_len=32, dropout=0.1))
    idx = torch.randint(0, 512, (2, 32))
    return model, (idx, idx)


def test_gpt_exact() -> None:
    model, args = _gpt()
    check_exact(model, args, {}, only=("none", "full", "megatron_selective", "budget0.5", "user"))


@pytest.mark.slow
def test_gpt_every_policy_exact() -> None:
    model, args = _gpt()
    check_exact(model, args, {})
    for p in model.parameters():
        assert not p.is_meta  # the user's model is never moved or wrapped
    assert xla_ckpt.find_blocks(model) and not any(
        "forward" in model.get_submodule(n).__dict__ for n in xla_ckpt.find_blocks(model))


def test_hf_llama_exact() -> None:
    model = hf_models.build("llama")
    check_exact(model, (), hf_models.batch("llama", model), only=("none", "full", "megatron_selective"))


# Forwards that read tensor values, which the meta device does not have: the MoE decoders' routing
# (nonzero / per-expert counts; grouped_mm's meta kernel wants bf16 before torch 2.15) and BART's
# padding-mask check (.item()). estimate() says so or is exact (test below); the table's bytes come
# from a real small run.
DATA_DEPENDENT = {"bart", "mixtral", "olmoe", "qwen2_moe", "qwen3_moe", "phimoe", "granitemoe", "gpt_oss",
                  "deepseek_v3"}


@pytest.mark.slow
@pytest.mark.parametrize("arch", [a for a in hf_models.ARCHS if a not in DATA_DEPENDENT])
def test_hf_table_every_policy_exact(arch: str) -> None:
    model = hf_models.build(arch)
    check_exact(model, (), hf_models.batch(arch, model))


@pytest.mark.parametrize("arch", ["mixtral", pytest.param("bart", marks=pytest.mark.slow)])
def test_data_dependent_forward_is_named_or_exact(arch: str) -> None:
    """A forward the meta device may not run: estimate() names the cause, or, where it runs, it is exact.

    Mixtral's routing changes no shape (grouped_mm over all routed tokens); only grouped_mm's meta
    kernel stopped it (bf16 only before torch 2.15). On torch 2.15 it runs, and every preset equals
    the real CPU run to the byte and the FLOP. Either outcome is right; a wrong number never is.
    """
    model = hf_models.build(arch)
    kwargs = hf_models.batch(arch, model)
    try:
        xla_ckpt.estimate(model, **kwargs, config="full")
    except RuntimeError as e:
        assert re.search(r"cannot run on the meta device.*saved_activations", str(e)), str(e)
        return
    check_exact(model, (), kwargs, only=("none", "full", "megatron_selective"))


def test_meta_model_allocates_nothing_and_matches() -> None:
    """A model built under torch.device("meta") gives the same estimate as its real twin."""
    model, args = _gpt()
    with torch.device("meta"):
        torch.manual_seed(0)
        shadow = GPT(GPTConfig(n_layer=2, n_head=4, d_model=64, seq_len=32, dropout=0.1))
    meta_args = tuple(a.to("meta") for a in args)
    meta_args = (meta_args[0], meta_args[0])  # the same tensor twice, as in the real call
    for preset in ("none", "megatron_selective"):
        a = xla_ckpt.estimate(model, *args, config=preset)
        b = xla_ckpt.estimate(shadow, *meta_args, config=preset)
        assert a == b


def test_input_passed_twice_counts_once() -> None:
    """Targets that are the inputs (idx, idx) are one buffer; moving each to meta alone would count two."""
    model, (idx, _) = _gpt()
    same = xla_ckpt.estimate(model, idx, idx, config="full")
    other = xla_ckpt.estimate(model, idx, idx.clone(), config="full")
    assert other.activation_bytes == same.activation_bytes + idx.numel() * idx.element_size()


def test_bad_arguments_raise_before_anything() -> None:
    model, args = _gpt()
    with pytest.raises(ValueError, match="config= or policy="):
        xla_ckpt.estimate(model, *args, config="full", policy="dots_saveable")
    with pytest.raises(ValueError, match="unknown checkpoint policy"):
        xla_ckpt.estimate(model, *args, policy="no_such_policy")
    with pytest.raises(TypeError, match="torch.nn.Module"):
        xla_ckpt.estimate(lambda x: x, *args)
    with pytest.raises(ValueError, match="find_blocks found none"):
        xla_ckpt.estimate(torch.nn.Linear(4, 4), torch.randn(2, 4), policy="dots_saveable")


def test_estimate_page_counts_come_from_the_code() -> None:
    """docs/estimate.md's counts are the code's: the architectures exact on meta, those that cannot run
    there, and the policies ``fit`` tries (every preset and the default budgets)."""
    import os

    from helpers import ROOT_DIR
    from xla_ckpt._estimate.fit import DEFAULT_BUDGETS
    from xla_ckpt._base.presets import preset_names

    with open(os.path.join(ROOT_DIR, "docs", "estimate.md"), encoding="utf-8") as f:
        text = f.read()
    total, exact = len(hf_models.ARCHS), len(hf_models.ARCHS) - len(DATA_DEPENDENT)
    claims = re.findall(r"(\d+) of the (\d+) architectures", text)
    assert len(claims) >= 2 and set(claims) == {(str(exact), str(total))}, claims
    assert not re.search(r"\ball \d+ architectures", text)
    assert re.findall(r"BART and (\d+) mixture-of-experts", text) == [str(len(DATA_DEPENDENT - {"bart"}))]
    assert set(re.findall(r"(\d+) policies", text)) == {str(len(preset_names()) + len(DEFAULT_BUDGETS))}
