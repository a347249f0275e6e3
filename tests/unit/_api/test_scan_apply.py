"""``apply(..., scan=True)`` without XLA: the config switch, the refusals before any change, the CPU path.

The scan itself (XLA) is tested in ``integration/xla/test_scan_hf.py``.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._api import scan_stack

pytest.importorskip("transformers")


def _forwards(model: torch.nn.Module) -> list[object]:
    return [m.__dict__.get("forward") for m in model.modules()]


def test_scan_is_a_config_switch(tmp_path):
    path = tmp_path / "scan.toml"
    path.write_text('scan = true\n[[checkpoint]]\nblocks = true\npolicy = "nothing_saveable"\n')
    assert xla_ckpt.load_config(str(path)).scan
    assert not xla_ckpt.load_config("full").scan
    with pytest.raises(xla_ckpt.ConfigError, match=r"scan: expected true or false, got 1"):
        xla_ckpt.load_config({"scan": 1})
    from xla_ckpt._api.config_dump import config_data

    assert config_data(xla_ckpt.load_config(str(path)))["scan"] is True
    model = hf_models.build("llama")
    assert xla_ckpt.apply(model, str(path)).scanned.startswith("model.layers: 2 LlamaDecoderLayer")
    assert not xla_ckpt.apply(model, str(path), scan=False).scanned  # the keyword wins
    assert not any(isinstance(f, scan_stack.ScanForward) for f in _forwards(model))


@pytest.mark.parametrize("arch, n_layer, match", [
    ("gemma2", 2, r"config.layer_types is not all equal \(\['full_attention', 'sliding_attention'\]"),
    ("gemma3", 6, r"config.layer_types is not all equal"),
    ("t5", 2, r"no decoder stack at model.model.layers, model.layers, model.transformer.h or model.h"),
])
def test_layers_that_differ_are_refused(arch, n_layer, match):
    model = hf_models.build(arch, n_layer=n_layer)
    before = _forwards(model)
    with pytest.raises(xla_ckpt.ConfigError, match=match):
        xla_ckpt.apply(model, "megatron_selective", scan=True)
    assert _forwards(model) == before  # nothing changed


def test_gpt2_layers_scaled_by_their_index_are_refused():
    """GPT-2's ``scale_attn_by_inverse_layer_idx`` gives each layer its own scaling: one body cannot run both."""
    model = hf_models.build("gpt2")
    model = type(model)(model.config.__class__(**{**model.config.to_dict(), "scale_attn_by_inverse_layer_idx": True}))
    with pytest.raises(xla_ckpt.ConfigError, match=r"transformer.h\[1\].attn.scaling is 0.17"):
        xla_ckpt.apply(model, "full", scan=True)
    assert xla_ckpt.apply(hf_models.build("gpt2"), "full", scan=True).scanned.startswith("transformer.h: 2 GPT2Block")


def test_layers_with_a_backward_hook_are_refused():
    """FSDPv2 around each layer adds a full backward hook (its optimization barrier); a scan cannot run it."""
    model = hf_models.build("llama")
    model.model.layers[1].mlp.register_full_backward_hook(lambda *a: None)
    before = _forwards(model)
    with pytest.raises(xla_ckpt.ConfigError, match=r"model.layers\[1\].mlp \(LlamaMLP\) has a backward hook"):
        xla_ckpt.apply(model, "full", scan=True)
    assert _forwards(model) == before


def test_a_layer_attribute_that_differs_is_named():
    model = hf_models.build("llama")
    model.model.layers[1].self_attn.sliding_window = 8  # as a sliding-window layer among global ones
    with pytest.raises(xla_ckpt.ConfigError, match=r"model.layers\[1\].self_attn.sliding_window is 8, "
                                                   r"model.layers\[0\]'s is None"):
        xla_ckpt.apply(model, "full", scan=True)


@pytest.mark.parametrize("config, match", [
    ("fsdp_xla", "cannot be combined with patch_linear"),
    ({"checkpoint": [{"blocks": True, "budget": 0.3}]}, "per-op policy"),
    ({"checkpoint": [{"blocks": True, "every": 2, "policy": "nothing_saveable"}]}, "checkpointed unevenly"),
    ({"checkpoint": [{"match": "model.layers.*.mlp", "policy": "nothing_saveable"}]}, "inside a scanned layer"),
    ({"checkpoint": [{"match": "model", "policy": "nothing_saveable"}]}, "around the scanned stack"),
])
def test_configs_scan_cannot_run_are_refused(config, match):
    model = hf_models.build("llama")
    before = _forwards(model)
    with pytest.raises(xla_ckpt.ConfigError, match=match):
        xla_ckpt.apply(model, config, scan=True)
    assert _forwards(model) == before


def _grads(model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(**batch, use_cache=False).loss
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def test_off_xla_the_layers_run_checkpointed_one_by_one():
    """On CPU the scan does not exist: each layer runs as apply without scan would (same grads, same saves)."""
    model = hf_models.build("llama")
    batch = hf_models.batch("llama", model)
    ref = _grads(model, batch)
    keys = list(model.state_dict())
    kept = {}
    for scan in (False, True):
        xla_ckpt.apply(model, "megatron_selective", scan=scan)
        with xla_ckpt.saved_activations() as report, warnings.catch_warnings():
            warnings.simplefilter("error")
            got = _grads(model, batch)
        kept[scan] = report.nbytes
        torch.testing.assert_close(got[0], ref[0])
        for r, g in zip(ref[1], got[1], strict=True):
            assert g is not None
            torch.testing.assert_close(g, r)
    assert kept[True] == kept[False]
    assert list(model.state_dict()) == keys
    xla_ckpt.apply(model, "none")  # undoes the scan
    assert not any(isinstance(f, scan_stack.ScanForward) for f in _forwards(model))
    with xla_ckpt.saved_activations() as plain:
        _grads(model, batch)
    assert kept[True] < plain.nbytes  # the policy ran on CPU
