"""``apply(..., scan=True)`` without XLA: the config switch, the refusals before any change, the CPU path.

The scan itself (XLA) is tested in ``integration/xla/test_scan_hf.py``.
"""

from __future__ import annotations

import io
import warnings

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._api import scan_stack
from xla_ckpt._api.scan_hf import plain_grads

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
    ("gemma2", 2, r"its 2 layers repeat no group of layers \(config.layer_types \[sliding_attention, full_attention\]; "
                  r"config.layer_types\[1\] is 'full_attention', \[0\]'s 'sliding_attention'\)"),
    ("gemma3", 6, r"repeat no group of layers \(config.layer_types \[sliding_attention x5, full_attention\]"),
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


def _grads(model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Loss and every parameter's grad by its plain name, in the plain order (a scanned stack's split per layer)."""
    model.zero_grad(set_to_none=True)
    loss = model(**batch, use_cache=False).loss
    loss.backward()
    return loss.detach(), plain_grads(model)


def _assert_grads(ref: tuple, got: tuple) -> None:
    torch.testing.assert_close(got[0], ref[0])
    assert list(got[1]) == list(ref[1])
    for k, r in ref[1].items():
        assert got[1][k] is not None, k
        torch.testing.assert_close(got[1][k], r, msg=lambda m, k=k: f"{k}: {m}")


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
        _assert_grads(ref, got)
    assert kept[True] == kept[False]
    assert list(model.state_dict()) == keys
    xla_ckpt.apply(model, "none")  # undoes the scan
    assert not any(isinstance(f, scan_stack.ScanForward) for f in _forwards(model))
    with xla_ckpt.saved_activations() as plain:
        _grads(model, batch)
    assert kept[True] < plain.nbytes  # the policy ran on CPU


def _decayed(model: torch.nn.Module) -> set[str]:
    """HF Trainer's weight-decay split, as plain names (a stacked ``model.layers.0.X`` covers every layer's X)."""
    from transformers import Trainer

    from xla_ckpt._api.scan_hf import scanned_stack

    names = set(Trainer.get_decay_parameter_names(None, model))  # (self is unused)
    stack = scanned_stack(model)
    stacked = {id(t) for t in stack.weights.params().values()} if stack is not None else set()
    out = set()
    for k, p in model.named_parameters():
        if k in names and p.requires_grad:
            out |= {f"model.layers.{i}.{k[15:]}" for i in range(3)} if id(p) in stacked else {k}
    return out


def test_a_scanned_model_looks_like_the_plain_one():
    """One stacked parameter per weight name, presented as the plain model: state_dict keys and values, loading a
    plain checkpoint, the optimizer's weight-decay split by name, AdamW steps; apply without scan unstacks."""
    plain = hf_models.build("llama", n_layer=3)
    model = hf_models.build("llama", n_layer=3, seed=7)
    xla_ckpt.apply(model, "megatron_selective", scan=True)
    stacked = dict(model.named_parameters())
    assert stacked["model.layers.0.mlp.up_proj.weight"].shape == (3, 64, 32)
    assert not any(k.startswith("model.layers.1.") for k in stacked)
    assert model.model.layers[2].mlp.up_proj.weight.shape == (64, 32)  # a layer reads its slice
    assert model.load_state_dict(plain.state_dict()) is not None  # a plain checkpoint, every key matched
    assert list(model.state_dict()) == list(plain.state_dict())
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v, rtol=0, atol=0)
    assert _decayed(model) == _decayed(plain) and len(_decayed(plain)) > 3
    buf = io.BytesIO()
    torch.save(model, buf)  # the whole model pickles (its modules' stacked subclasses made at run time)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    assert again.model.layers[2].mlp.up_proj.weight.shape == (64, 32)
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(again.state_dict()[k], v, rtol=0, atol=0)
    batch = hf_models.batch("llama", plain)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in (plain, model)]
    for _ in range(2):
        for m, opt in zip((plain, model), opts, strict=True):
            opt.zero_grad()
            m(**batch, use_cache=False).loss.backward()
            opt.step()
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v)
    xla_ckpt.apply(model, "full", scan=True)  # scanning again keeps the parameters the optimizer holds
    assert all(p is stacked[k] for k, p in model.named_parameters())
    xla_ckpt.apply(model, "megatron_selective")  # without scan: every layer its own parameters again
    assert [(k, p.shape) for k, p in model.named_parameters()] == [(k, p.shape) for k, p in plain.named_parameters()]
    assert type(model.model.layers[0].mlp.up_proj) is torch.nn.Linear
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v)


def test_weights_a_stack_cannot_hold_are_refused():
    tied = hf_models.build("llama")
    tied.model.layers[1].mlp.up_proj.weight = tied.model.layers[0].mlp.up_proj.weight
    frozen = hf_models.build("llama")
    frozen.model.layers[1].mlp.up_proj.weight.requires_grad_(False)
    for model, match in ((tied, r"model.layers\[0\].mlp.up_proj.weight is the same Parameter as another"),
                         (frozen, r"model.layers\[1\].mlp.up_proj.weight.requires_grad is False")):
        before = [id(p) for p in model.parameters()]
        with pytest.raises(xla_ckpt.ConfigError, match=match):
            xla_ckpt.apply(model, "full", scan=True)
        assert [id(p) for p in model.parameters()] == before
    model = hf_models.build("llama")
    xla_ckpt.apply(model, "full", scan=True)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"load_state_dict\(assign=True\)"):
        model.load_state_dict(hf_models.build("llama").state_dict(), assign=True)


def test_alternating_layers_stack_per_place_in_their_group():
    """Gemma 2 (sliding, global) x 2: each of the pair's weights stacked over the repeats, at the first pair's
    names; off XLA the layers run one by one on their slices (grads as the plain model's), state_dict plain."""
    plain = hf_models.build("gemma2", n_layer=4)
    model = hf_models.build("gemma2", n_layer=4)
    batch = hf_models.batch("gemma2", plain)
    ref = _grads(plain, batch)
    assert "2 groups of 2" in xla_ckpt.apply(model, "megatron_selective", scan=True).scanned
    names = [k for k, _ in model.named_parameters()]
    assert {k.split(".")[2] for k in names if k.startswith("model.layers.")} == {"0", "1"}
    assert dict(model.named_parameters())["model.layers.1.mlp.up_proj.weight"].shape[0] == 2
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v, rtol=0, atol=0)
    _assert_grads(ref, _grads(model, batch))
