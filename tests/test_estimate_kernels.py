"""``estimate`` for the call docs/huggingface.md recommends, and the attention kernel it models.

HF models in training without a cache and without an ``attention_mask`` read a value of
``position_ids`` (transformers 5's packed-sequence check); the meta device knows it exactly
(``xla_ckpt._api.known``). References are real CPU steps, as in ``test_estimate.py``.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._api.known import KnownValues

from test_estimate import _check


def test_hf_without_cache_or_mask_estimates_exactly() -> None:
    model = hf_models.build("llama")
    batch = {**hf_models.batch("llama", model), "use_cache": False}  # no attention_mask
    kept = _check(model, (), batch, only=("none", "full", "megatron_selective"))
    assert kept["full"] > 0


def test_hf_packed_position_ids_are_read_from_the_callers_values() -> None:
    """Packed sequences (positions restart inside a row): HF builds a block-diagonal mask from the real
    position values; the estimate reads the same values and keeps exactly what the real step keeps."""
    model = hf_models.build("llama")
    batch = {**hf_models.batch("llama", model), "use_cache": False}
    batch["position_ids"] = torch.cat([torch.arange(6), torch.arange(10)]).expand(2, 16)
    _check(model, (), batch, only=("none", "full", "megatron_selective"))


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
