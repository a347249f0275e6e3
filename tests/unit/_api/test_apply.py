"""checkpointed() forms and apply(model, config): same gradients, same state, proof of effect."""

from __future__ import annotations

from helpers import ROOT_DIR

import copy
import os
import pickle

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt.models import GPT, Block, GPTConfig, llama_hf

ROOT = ROOT_DIR
POL = os.path.join(ROOT, "policies")


def _gpt(device):
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, seq_len=8, n_layer=3, n_head=2, d_model=16)).to(device)


def _idx(device, vocab=64):
    return torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(1)).to(device)


def _grads(model, idx):
    return grads_of(lambda: model(idx, idx) if isinstance(model, GPT) else model(idx, labels=idx).loss,
                    [], list(model.parameters()))


def _kept(model, idx):
    with xla_ckpt.saved_activations() as r:
        model(idx)
    return r.nbytes


@pytest.mark.parametrize("form", ["instance", "class", "function"])
def test_decorator_forms(device, form):
    model = _gpt(device)
    idx = _idx(device)
    keys = list(model.state_dict())
    ref = _grads(model, idx)
    before = _kept(model, idx)
    if form == "instance":
        for blk in model.layers:
            assert xla_ckpt.checkpointed(blk, policy="nothing_saveable") is blk
    elif form == "class":
        class CBlock(Block):
            pass

        xla_ckpt.checkpointed(policy="nothing_saveable")(CBlock)
        for blk in model.layers:
            blk.__class__ = CBlock
    else:
        originals = [blk.forward for blk in model.layers]
        for blk, fwd in zip(model.layers, originals, strict=True):
            blk.forward = xla_ckpt.checkpointed(policy="nothing_saveable")(fwd)
    got = _grads(model, idx)
    assert_same(ref, got)
    assert list(model.state_dict()) == keys
    assert _kept(model, idx) < before  # the wrapping did something
    if form == "instance":
        assert "Block(" in repr(model)
        clone = copy.deepcopy(model)
        assert clone.layers[0].forward.module is clone.layers[0]
        assert_same(ref, _grads(clone, idx))
        for blk in model.layers:
            xla_ckpt.uncheckpointed(blk)
            assert "forward" not in blk.__dict__
        assert _kept(model, idx) == before


def test_pickle_and_train_eval():
    model = _gpt("cpu")
    xla_ckpt.checkpointed(model.layers[0], policy="dots_saveable")
    restored = pickle.loads(pickle.dumps(model))
    assert restored.layers[0].forward.module is restored.layers[0]
    model.eval()
    assert not model.layers[0].training
    model.train()
    assert model.layers[0].training


def test_wrapped_forward_is_method_like():
    """torch_xla's FSDPv2 requires ``module.forward.__func__`` (a method) on the module it wraps."""
    blk = Block(GPTConfig(d_model=16, n_head=2))
    xla_ckpt.checkpointed(blk, policy="dots_saveable")
    assert blk.forward.__self__ is blk and blk.forward.__func__ is Block.forward
    assert blk.forward.__func__ is not nn.Module.forward


def test_double_wrap():
    blk = Block(GPTConfig(d_model=16, n_head=2))
    xla_ckpt.checkpointed(blk, policy="dots_saveable")
    inner = blk.forward
    xla_ckpt.checkpointed(blk, policy="dots_saveable")
    assert blk.forward is inner  # no-op, never a double checkpoint
    with pytest.raises(ValueError, match="already checkpointed with dots_saveable; call xla_ckpt.uncheckpointed"):
        xla_ckpt.checkpointed(blk, policy="nothing_saveable")


def test_uncheckpointed_class_restores_forward():
    class B(Block):
        pass

    original = B.forward
    xla_ckpt.checkpointed(B, policy="dots_saveable")
    assert B.forward is not original
    xla_ckpt.uncheckpointed(B)
    assert B.forward is original and "forward" not in B.__dict__


def test_apply_overrides_every_and_report(tmp_path):
    model = _gpt("cpu")
    cfg = {"checkpoint": [
        {"match": "layers.*", "policy": "dots_saveable"},
        {"match": ["layers.1"], "enabled": False},
        {"classes": ["Block"], "every": 2, "policy": "nothing_saveable"},
        {"classes": ["NoSuchLayer"], "policy": "dots_saveable"},
    ]}
    with pytest.warns(UserWarning, match=r"checkpoint\[3\] \(classes=NoSuchLayer\)"):
        report = xla_ckpt.apply(model, cfg)
    assert [(w.name, w.policy) for w in report.wrapped] == [("layers.0", "nothing_saveable"),
                                                            ("layers.2", "nothing_saveable")]
    assert report.unmatched_rules and "NoSuchLayer" in report.unmatched_rules[0]
    assert "layers.1" not in str(report)
    assert xla_ckpt._api.wrap.checkpoint_policy(model.layers[1]) is None


def test_apply_raises_before_changing_anything():
    model = _gpt("cpu")
    xla_ckpt.checkpointed(model.layers[0], policy="everything_saveable")
    with pytest.raises(ValueError, match="'layers.0' is already checkpointed"):
        xla_ckpt.apply(model, {"patch_linear": True, "checkpoint": [{"match": "layers.*", "policy": "dots_saveable"}]})
    assert "forward" not in model.layers[1].__dict__  # nothing else was wrapped
    assert not any("forward" in m.__dict__ for m in model.modules() if isinstance(m, nn.Linear))
    with pytest.raises(xla_ckpt.ConfigError):
        xla_ckpt.apply(model, {"checkpoint": [{"match": "layers.*", "policy": "nope"}]})


def _llama(device):
    torch.manual_seed(0)
    return llama_hf(vocab_size=64, d_model=32, n_layer=3, n_head=4, seq_len=8).to(device)


@pytest.mark.slow_on_xla  # every preset compiled on XLA; test_hf_models runs Llama on XLA in the fast tier
def test_apply_on_hf_llama(device):
    idx = _idx(device)
    kept, grads = {}, {}
    for preset in ["none", "megatron_selective", "dots", "full", "fsdp_xla"]:
        model = _llama(device)
        report = xla_ckpt.apply(model, os.path.join(POL, f"{preset}.toml"))
        if preset != "none":
            assert [w.name for w in report.wrapped] == ["model.layers.0", "model.layers.1", "model.layers.2"]
        kept[preset] = _kept(model, idx)
        grads[preset] = _grads(model, idx)
    for preset in grads:
        assert_same(grads["none"], grads[preset])
    assert kept["none"] > kept["dots"] > kept["megatron_selective"] > kept["full"], kept
    assert kept["none"] > kept["fsdp_xla"], kept


def test_explain_cli(capsys):
    from xla_ckpt.__main__ import main

    assert main(["explain", os.path.join(POL, "megatron_selective.toml"), "--layers", "2", "--d-model", "32",
                 "--seq", "16"]) == 0
    out = capsys.readouterr().out
    assert "layers.0" in out and "dots_with_no_batch_dims_saveable" in out
    assert "without checkpointing" in out
    assert main(["explain", "/nonexistent.toml"]) == 2


def test_config_in_python_holds_a_policy_object_but_writes_only_data():
    """A dict config may hold the policy object or function itself; it cannot be written as TOML (data only),
    and a value that is no policy is still an error naming the key."""
    from xla_ckpt._api.config_dump import to_toml

    for policy in (xla_ckpt.policies.dots_saveable, lambda call: xla_ckpt.Decision.SAVE):
        model = _gpt("cpu")
        report = xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "policy": policy}]})
        assert [w.policy for w in report.wrapped] == [repr(policy)] * 3
        assert all(xla_ckpt._api.wrap.checkpoint_policy(b) is policy for b in model.layers)
        with pytest.raises(xla_ckpt.ConfigError, match="cannot be written as data"):
            to_toml(xla_ckpt.load_config({"checkpoint": [{"blocks": True, "policy": policy}]}))
    model = _gpt("cpu")
    with pytest.raises(xla_ckpt.ConfigError, match="checkpoint\\[0\\].policy: expected a policy name"):
        xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "policy": 3}]})
    assert not any("forward" in m.__dict__ for m in model.modules())


def test_no_blocks_found_says_why_and_what_to_write():
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(4, 8)
            self.mixer = nn.Sequential(nn.Linear(8, 8), nn.GELU())
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            return self.head(self.mixer(self.embed(x)))

    seq = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4))
    assert xla_ckpt.find_blocks(seq) == []  # single layers are not blocks (each would keep its input anyway)
    with pytest.warns(UserWarning, match="rule matched no module") as w:
        report = xla_ckpt.apply(seq, "full")
    assert report.wrapped == [] and not any("forward" in m.__dict__ for m in seq.modules())
    msg = str(w[0].message)
    assert "children are single layers (Linear)" in msg and "xla_ckpt.checkpointed(model, policy=" in msg, msg
    with pytest.warns(UserWarning, match="rule matched no module") as w:
        xla_ckpt.apply(Net(), "full")
    msg = str(w[0].message)
    assert "find_blocks found no repeated blocks in Net" in msg, msg
    assert "{'match': ['embed', 'mixer', 'head']" in msg and "{'classes': ['Sequential']" in msg, msg


def test_preset_name_as_policy_is_its_blocks_policy():
    m = xla_ckpt.checkpointed(nn.Linear(2, 2), policy="dots")
    assert xla_ckpt._api.wrap.checkpoint_policy(m) is xla_ckpt.policies.dots_saveable
    with pytest.raises(ValueError) as e:  # inside a config rule a preset is no policy
        xla_ckpt.load_config({"checkpoint": [{"blocks": True, "policy": "dots"}]})
    assert "Did you mean 'dots_saveable'" in str(e.value) and "xla_ckpt.apply(model, 'dots')" in str(e.value)
    with pytest.raises(xla_ckpt.ConfigError, match="Did you mean 'dots_saveable'"):
        xla_ckpt.apply(_gpt("cpu"), {"checkpoint": [{"blocks": True, "policy": "dots"}]})
