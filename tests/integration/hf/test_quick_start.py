"""The README's Hugging Face quick start, as a user runs it: no warning at all (the default LlamaConfig trains
with use_cache=True), the gradients of the model without xla_ckpt, fewer bytes kept, and generation after it
(eval, no grad) the same tokens as the plain model's."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import xla_ckpt
from helpers import assert_same, grads_of

transformers = pytest.importorskip("transformers")


def _llama() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    assert config.use_cache  # the default a user meets
    return transformers.LlamaForCausalLM(config)


def _kept(model: torch.nn.Module, ids: torch.Tensor) -> int:
    with xla_ckpt.saved_activations() as kept:
        loss = model(input_ids=ids, labels=ids).loss
    del loss
    return kept.nbytes


# The XLA case compiles the Llama step (about 20 s here): slow tier; the CPU case runs in the fast tier.
@pytest.mark.parametrize("where", ["cpu", pytest.param("xla", marks=[pytest.mark.xla, pytest.mark.slow])])
def test_quick_start_prints_no_warning(where, request):
    device = request.getfixturevalue("xla_device") if where == "xla" else torch.device("cpu")
    plain = _llama()
    model = copy.deepcopy(plain)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = xla_ckpt.apply(model, "megatron_selective")
        text = str(report)
        if device.type == "xla":
            plain = xla_ckpt.hf_models.to_device(plain, device)  # the README's XLA line, after `import xla_ckpt`
            model = xla_ckpt.hf_models.to_device(model, device)
        ids = ids.to(device)
        params = list(plain.parameters()), list(model.parameters())
        ref = grads_of(lambda: plain(input_ids=ids, labels=ids).loss, [], params[0])
        got = grads_of(lambda: model(input_ids=ids, labels=ids).loss, [], params[1])
        kept, kept_plain = _kept(model, ids), _kept(plain, ids)
    assert [str(w.message) for w in caught] == []
    assert "model.layers.1" in text and "XLA" not in text
    assert_same(ref, got)
    assert 0 < kept < kept_plain, (kept, kept_plain)


def test_generation_after_apply_is_the_plain_models():
    """Eval without grad: nothing is checkpointed and the KV cache works (the same tokens), quietly."""
    plain = _llama().eval()
    model = copy.deepcopy(plain)
    xla_ckpt.apply(model, "megatron_selective")
    model.eval()
    ids = torch.randint(0, 128, (1, 5), generator=torch.Generator().manual_seed(2))
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        out = model.generate(ids, max_new_tokens=4, do_sample=False)
    ref = plain.generate(ids, max_new_tokens=4, do_sample=False)
    assert [str(w.message) for w in caught if "xla_ckpt" in str(w.message)] == []
    assert torch.equal(out, ref) and out.shape[1] == 9
