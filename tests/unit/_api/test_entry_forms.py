"""One set of policy forms at every entry: apply, checkpointed, checkpoint and explain take a preset name, a
policy name, a Config, a dict, a file, a policy object or an (OpCall) -> Decision function; a wrong type is a
TypeError naming what was passed and what is accepted. Exact grads, and proof that the policy acted."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt import policies
from xla_ckpt._api.forms import as_config, as_policy
from xla_ckpt.models import Block, GPTConfig

CFG = GPTConfig(vocab_size=64, seq_len=8, n_layer=2, n_head=2, d_model=16)


class Stack(nn.Module):
    """Two transformer blocks on a float input (so the input has a grad to compare)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(CFG) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _model(device: torch.device) -> Stack:
    torch.manual_seed(0)
    return Stack().to(device)


def _x(device: torch.device) -> torch.Tensor:
    return torch.randn(2, CFG.seq_len, CFG.d_model, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()


def _kept(model: nn.Module, x: torch.Tensor) -> int:
    with xla_ckpt.saved_activations() as r:
        out = model(x)
    del out
    return r.nbytes


def _dots_by_hand(call: xla_ckpt.OpCall) -> xla_ckpt.Decision:
    """A plain function policy: keep matmul outputs, recompute the rest."""
    return xla_ckpt.Decision.SAVE if call.op.overloadpacket in policies.DOT_OPS else xla_ckpt.Decision.RECOMPUTE


@pytest.mark.parametrize("form", ["memory_budget", "function"])
def test_apply_takes_a_policy_object_or_a_function(form, device):
    policy = policies.memory_budget(0.3) if form == "memory_budget" else _dots_by_hand
    base = _model(device)
    x = _x(device)
    plain = copy.deepcopy(base)
    model = copy.deepcopy(base)
    report = xla_ckpt.apply(model, policy)
    assert [w.name for w in report.wrapped] == ["layers.0", "layers.1"], report
    assert all(xla_ckpt._api.wrap.checkpoint_policy(b) is policy for b in model.layers)
    params = list(plain.parameters()), list(model.parameters())
    assert_same(grads_of(plain, [x], params[0]), grads_of(model, [x], params[1]))
    kept, kept_none = _kept(model, x), _kept(plain, x)
    assert 0 < kept < kept_none, (kept, kept_none)


def test_every_entry_takes_every_form(tmp_path):
    """The same policy reached through each form: a name, a preset, a dict, a file, the object, a function."""
    toml = tmp_path / "mine.toml"
    toml.write_text('[[checkpoint]]\nblocks = true\npolicy = "dots_saveable"\n')
    forms = ["dots_saveable", "dots", {"checkpoint": [{"blocks": True, "policy": "dots_saveable"}]}, str(toml), toml,
             xla_ckpt.load_config("dots"), policies.dots_saveable]
    for form in forms:
        assert as_policy(form, "t") is policies.dots_saveable, form
        cfg = as_config(form, "t")
        assert [str(r.policy) for r in cfg.checkpoint] == ["dots_saveable"] and cfg.checkpoint[0].blocks, form
    assert as_policy(_dots_by_hand, "t") is _dots_by_hand
    # A dict written in Python may hold the policy object itself.
    budget = policies.memory_budget(0.5)
    assert as_config({"checkpoint": [{"blocks": True, "policy": budget}]}, "t").checkpoint[0].policy.build() is budget
    x = torch.randn(3, 4, requires_grad=True)
    ref = grads_of(lambda t: t.sin().cos(), [x], [])
    for form in forms + [_dots_by_hand, "megatron_selective"]:
        assert_same(ref, grads_of(lambda t, form=form: xla_ckpt.checkpoint(lambda u: u.sin().cos(), t, policy=form),
                                  [x], []))
    m = xla_ckpt.checkpointed(nn.Linear(4, 4), policy="dots")
    assert xla_ckpt._api.wrap.checkpoint_policy(m) is policies.dots_saveable


def test_checkpointed_and_checkpoint_keep_what_the_preset_says():
    """checkpoint(policy="dots") keeps the matmul output; "full" keeps none of the block's inner values."""
    lin = nn.Linear(4, 4)
    x = torch.randn(3, 4, requires_grad=True)
    kept = {}
    for form in ("dots", "full"):
        with xla_ckpt.saved_activations() as r:
            y = xla_ckpt.checkpoint(lambda t: lin(t).sin(), x, policy=form)
        kept[form] = r.nbytes
        del y
    assert kept["dots"] > kept["full"] > 0, kept


@pytest.mark.parametrize("bad, words", [
    (3, "got int 3"),
    (nn.Linear(2, 2), "got the module Linear"),
    (policies.save_ops, "got the class save_ops"),
    (["dots_saveable"], "got list"),
])
def test_a_wrong_type_is_a_type_error_naming_the_forms(bad, words):
    model = _model(torch.device("cpu"))
    for call in (lambda: xla_ckpt.apply(model, bad), lambda: xla_ckpt.checkpointed(nn.Linear(2, 2), policy=bad),
                 lambda: xla_ckpt.checkpoint(torch.sin, torch.randn(2, requires_grad=True), policy=bad)):
        with pytest.raises(TypeError, match="expected a preset name") as info:
            call()
        assert words in str(info.value) and "(OpCall) -> Decision function" in str(info.value)
    assert not any("forward" in m.__dict__ for m in model.modules())  # nothing changed


def test_apply_names_a_function_given_as_the_model():
    with pytest.raises(TypeError, match="expected the model \\(an nn.Module\\) first") as info:
        xla_ckpt.apply(_dots_by_hand, "full")
    assert "function" in str(info.value)


def test_an_unknown_name_lists_presets_and_policies():
    with pytest.raises(xla_ckpt.ConfigError, match="neither a preset") as info:
        xla_ckpt.apply(_model(torch.device("cpu")), "megatron")
    assert "Did you mean the preset 'megatron_selective'" in str(info.value) and "dots_saveable" in str(info.value)


def test_one_region_takes_one_policy():
    x = torch.randn(2, requires_grad=True)
    with pytest.raises(xla_ckpt.ConfigError, match="checkpoints nothing"):
        xla_ckpt.checkpoint(torch.sin, x, policy="none")
    with pytest.raises(xla_ckpt.ConfigError, match="act on a whole model"):
        xla_ckpt.checkpoint(torch.sin, x, policy="fsdp_xla")
    two = {"checkpoint": [{"blocks": True, "policy": "dots_saveable"}, {"match": "x", "policy": "nothing_saveable"}]}
    with pytest.raises(xla_ckpt.ConfigError, match="2 policies"):
        xla_ckpt.checkpointed(nn.Linear(2, 2), policy=two)


def test_explain_takes_a_policy_name(capsys):
    from xla_ckpt._cli.explain import explain

    assert explain(["dots_saveable", "--layers", "1", "--d-model", "16", "--heads", "2", "--seq", "8"]) == 0
    out = capsys.readouterr().out
    assert "plan from policy dots_saveable: 1 modules checkpointed" in out


def test_import_is_lazy_and_hf_models_is_an_attribute():
    """``import xla_ckpt`` imports neither transformers nor the example models; ``xla_ckpt.hf_models`` works after it."""
    code = ("import sys, xla_ckpt\n"
            "assert 'transformers' not in sys.modules and 'xla_ckpt.hf_models' not in sys.modules\n"
            "assert callable(xla_ckpt.hf_models.to_device) and callable(xla_ckpt.models.GPT)\n"
            "assert 'transformers' not in sys.modules\n"
            "assert 'hf_models' in dir(xla_ckpt)\n"
            "try:\n    xla_ckpt.no_such_thing\nexcept AttributeError as e:\n    assert 'no_such_thing' in str(e)\n"
            "else:\n    raise SystemExit('no AttributeError')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
