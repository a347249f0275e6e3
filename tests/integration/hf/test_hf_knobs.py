"""Hugging Face's own checkpointing knobs next to ``apply``: every_n_layers, activation_checkpointing*, policy=.

- ``every_n_layers = n`` (a config key, as in HF's ``activation_checkpointing_enable(every_n_layers=n)``)
  checkpoints blocks 0, n, 2n, ...: exact, and keeping what lies between checkpointing every block and none.
- HF's checkpointing turned on after ``apply`` (``gradient_checkpointing_enable()`` or its newer name
  ``activation_checkpointing_enable()``, which ``Trainer`` calls for either ``TrainingArguments`` flag) is
  turned off once, with one notice, and the step is exact.
- ``policy=`` in HF's checkpointing kwargs is for xla_ckpt, not torch: an error naming ``xla_ckpt.apply``.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._api.config import ConfigError

pytest.importorskip("transformers")

NOTICE = "Hugging Face gradient checkpointing was on"


def _llama(n_layer: int = 4):
    base = hf_models.build("llama", n_layer=n_layer)
    return base, hf_models.batch("llama", base, batch=2)


def _step(model: torch.nn.Module, batch: dict):
    with xla_ckpt.saved_activations() as kept:
        loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}, kept.nbytes


def _assert_exact(got, ref) -> None:
    torch.testing.assert_close(got[0], ref[0])
    assert got[1].keys() == ref[1].keys()
    for name, g in got[1].items():
        assert g is not None and ref[1][name] is not None, name
        torch.testing.assert_close(g, ref[1][name], msg=lambda m, name=name: f"{name}: {m}")


def _apply(model: torch.nn.Module, config) -> xla_ckpt.ApplyReport:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the once-per-class cache notice
        return xla_ckpt.apply(model, config)


def test_every_n_layers_checkpoints_every_nth_block_exactly():
    base, batch = _llama(n_layer=4)
    ref = _step(copy.deepcopy(base), batch)
    kept = {}
    for n in (1, 2):
        model = copy.deepcopy(base)
        report = _apply(model, {"every_n_layers": n, "checkpoint": [{"blocks": True, "policy": "nothing_saveable"}]})
        assert [w.name for w in report.wrapped] == [f"model.layers.{i}" for i in range(0, 4, n)]
        assert report.every_n_layers_skipped == [f"model.layers.{i}" for i in range(4) if i % n]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            got = _step(model, batch)
        _assert_exact(got, ref)
        kept[n] = got[2]
    # Two of four blocks keep what they keep without checkpointing: half-way, to the byte.
    assert kept[1] < kept[2] < ref[2], (kept, ref[2])
    assert kept[2] - kept[1] == (ref[2] - kept[1]) // 2


def test_every_n_layers_is_a_config_key_from_toml_and_yaml(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('every_n_layers = 3\n[[checkpoint]]\nblocks = true\npolicy = "dots_saveable"\n')
    yaml = tmp_path / "c.yaml"
    yaml.write_text("every_n_layers: 3\ncheckpoint:\n  - blocks: true\n    policy: dots_saveable\n")
    a, b = xla_ckpt.load_config(toml), xla_ckpt.load_config(yaml)
    assert a == b and a.every_n_layers == 3
    from xla_ckpt._api.config_dump import config_data, to_toml

    assert config_data(a)["every_n_layers"] == 3
    out = tmp_path / "back.toml"
    out.write_text(to_toml(a))
    assert xla_ckpt.load_config(out) == a
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match=r"<dict>: every_n_layers: expected an integer >= 1 .*got " + repr(bad)):
            xla_ckpt.load_config({"every_n_layers": bad, "checkpoint": [{"blocks": True, "policy": "dots_saveable"}]})


def test_every_n_layers_on_a_model_without_blocks_is_an_error_before_any_change():
    model = torch.nn.Linear(4, 4)
    with pytest.raises(ConfigError, match="every_n_layers: 2 counts the model's transformer blocks"):
        xla_ckpt.apply(model, {"every_n_layers": 2, "checkpoint": [{"classes": "Linear", "policy": "nothing_saveable"}]})
    assert "forward" not in model.__dict__


@pytest.mark.parametrize("name", ["gradient_checkpointing", "activation_checkpointing"])
def test_hf_checkpointing_turned_on_after_apply_is_turned_off_once(name):
    base, batch = _llama(n_layer=2)
    ref = _step(copy.deepcopy(base), batch)
    model = copy.deepcopy(base)
    _apply(model, "full")
    enable = getattr(model, f"{name}_enable", None)
    if enable is None:
        pytest.skip(f"this transformers has no {name}_enable")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the deprecated alias says so
        enable()
    assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        got = _step(model, batch)
        model.zero_grad()
        _step(model, batch)  # a second step: no second notice
    notices = [str(w.message) for w in caught if NOTICE in str(w.message)]
    assert len(notices) == 1 and "activation_checkpointing=True" in notices[0], notices
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    _assert_exact(got, ref)


@pytest.mark.parametrize("name", ["gradient_checkpointing", "activation_checkpointing"])
@pytest.mark.parametrize("when", ["after_apply", "before_apply"])
def test_a_policy_in_hf_checkpointing_kwargs_is_an_error(name, when):
    base, batch = _llama(n_layer=2)
    model = copy.deepcopy(base)
    enable = getattr(model, f"{name}_enable", None)
    if enable is None:
        pytest.skip(f"this transformers has no {name}_enable")

    def turn_on() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            enable(**{f"{name}_kwargs": {"policy": "dots_saveable"}})

    match = r"policy='dots_saveable'.*xla_ckpt\.apply\(model, 'dots_saveable'\)"
    if when == "after_apply":
        _apply(model, "full")
        turn_on()
        with pytest.raises(ValueError, match=match):
            model(**batch)
    else:
        turn_on()
        with pytest.raises(ValueError, match=match):
            xla_ckpt.apply(model, "full")
        # Nothing changed: no wrapper, HF's flag as the user left it.
        assert not any("forward" in m.__dict__ for m in model.modules())
        assert model.model.layers[0].gradient_checkpointing is True
