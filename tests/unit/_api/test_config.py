"""Config files: every preset loads; TOML/YAML twins are equal; every error names file and key."""

from __future__ import annotations

from helpers import ROOT_DIR

import glob
import os

import pytest

import xla_ckpt
import xla_ckpt._api.config_load
from xla_ckpt import ConfigError, policies

ROOT = ROOT_DIR
PRESETS = sorted(glob.glob(os.path.join(ROOT, "policies", "*")))


def test_at_least_six_documented_presets():
    names = {os.path.splitext(os.path.basename(p))[0] for p in PRESETS}
    assert {"none", "full", "dots", "megatron_selective", "names", "fsdp_xla"} <= names
    assert set(xla_ckpt.presets()) == names  # by name, with their descriptions
    assert xla_ckpt.presets()["fsdp_xla"].startswith("For FSDP on XLA")


@pytest.mark.parametrize("path", PRESETS, ids=os.path.basename)
def test_every_preset_selects_blocks_by_role_not_class(path):
    """A preset that named classes would wrap nothing on most architectures."""
    cfg = xla_ckpt.load_config(path)
    for rule in cfg.checkpoint:
        assert rule.blocks and not rule.classes and not rule.match, rule


def test_presets_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not from the checkout root
    by_name = xla_ckpt.load_config("megatron_selective")
    assert by_name == xla_ckpt.load_config(os.path.join(ROOT, "policies", "megatron_selective.toml"))
    assert xla_ckpt.load_config("full.yaml").source == "preset full.yaml (full.yaml)"
    assert by_name.source == "preset megatron_selective (megatron_selective.toml)"
    with pytest.raises(ConfigError, match=r"^megatron: no preset of this name; presets: dots, fsdp_xla, full"):
        xla_ckpt.load_config("megatron")
    with pytest.raises(ConfigError, match=r"^cfg/x\.toml: no such config file; .* preset name: dots,"):
        xla_ckpt.load_config("cfg/x.toml")
    (tmp_path / "full.toml").write_text('[[checkpoint]]\nmatch = ["a"]\npolicy = "dots_saveable"\n')
    assert xla_ckpt.load_config("full.toml").checkpoint[0].match == ("a",)  # an existing file wins


def test_blocks_key():
    cfg = xla_ckpt.load_config({"checkpoint": [{"blocks": True, "policy": "dots_saveable"}]})
    assert cfg.checkpoint[0].blocks and cfg.checkpoint[0].describe() == "blocks"
    with pytest.raises(ConfigError, match=r"checkpoint\[0\]\.blocks: expected true or false, got 'yes'"):
        xla_ckpt.load_config({"checkpoint": [{"blocks": "yes", "policy": "dots_saveable"}]})
    with pytest.raises(ConfigError, match=r"checkpoint\[0\]: a rule needs 'blocks = true'"):
        xla_ckpt.load_config({"checkpoint": [{"blocks": False, "policy": "dots_saveable"}]})


@pytest.mark.parametrize("path", PRESETS, ids=os.path.basename)
def test_preset_loads_and_validates(path):
    cfg = xla_ckpt.load_config(path)
    assert cfg.description, f"{path}: presets are documented by their description"
    for rule in cfg.checkpoint:
        assert rule.policy.name in policies.names()
        assert callable(rule.policy.build())


@pytest.mark.parametrize("name", ["full", "megatron_selective"])
def test_toml_and_yaml_twins_are_equal(name):
    toml = xla_ckpt.load_config(os.path.join(ROOT, "policies", f"{name}.toml"))
    yaml = xla_ckpt.load_config(os.path.join(ROOT, "policies", f"{name}.yaml"))
    assert toml == yaml and toml.source != yaml.source


def test_json_and_dict_load_to_the_same_config(tmp_path):
    data = {"patch_linear": True, "checkpoint": [{"match": "layers.*", "every": 2,
                                                   "policy": {"name": "save_ops", "ops": ["aten.mm", "aten.addmm.default"]}}]}
    path = tmp_path / "c.json"
    import json

    path.write_text(json.dumps(data))
    assert xla_ckpt.load_config(path) == xla_ckpt.load_config(data)
    built = xla_ckpt.load_config(data).checkpoint[0].policy.build()
    import torch

    assert built.ops == frozenset({torch.ops.aten.mm, torch.ops.aten.addmm.default})


def _write(tmp_path, text, ext=".toml"):
    p = tmp_path / f"bad{ext}"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, key, fragment",
    [
        ("paatch_linear = true\n", "paatch_linear", "unknown key 'paatch_linear'; allowed keys: checkpoint,"),
        ('[[checkpoint]]\nclasses = ["Block"]\npolicy = "dots_saveabel"\n', "checkpoint[0].policy",
         "unknown policy 'dots_saveabel'; allowed: all_of, any_of, dots_saveable"),
        ('[[checkpoint]]\nclasses = ["Block"]\npolicy = "dots_saveable"\n[[checkpoint]]\nmatch = "x"\npolicy = 3\n',
         "checkpoint[1].policy", "expected a policy name"),
        ('[[checkpoint]]\nmatch = ["layers.[0"]\npolicy = "dots_saveable"\n', "checkpoint[0].match", "bad glob"),
        ('[[checkpoint]]\nmatch = ["layers.*"]\nevery = 0\npolicy = "dots_saveable"\n', "checkpoint[0].every",
         "expected an integer >= 1, got 0"),
        ('patch_linear = "yes"\n', "patch_linear", "expected true or false, got 'yes'"),
        ('[[checkpoint]]\nmatch = ["a"]\npolicy = "dots_saveable"\ncolour = 1\n', "checkpoint[0].colour",
         "unknown key 'colour'"),
        ('[[checkpoint]]\nmatch = ["a"]\npolicy = { name = "save_ops", ops = ["aten.nope"] }\n',
         "checkpoint[0].policy", "unknown op 'aten.nope'"),
    ],
)
def test_config_errors_name_file_and_key(tmp_path, text, key, fragment):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        xla_ckpt.load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {key}: "), msg
    assert fragment in msg, msg


def test_yaml_errors_name_the_yaml_file(tmp_path):
    path = _write(tmp_path, "checkpoint:\n  - classes: [Block]\n    every: -1\n    policy: full\n", ".yaml")
    with pytest.raises(ConfigError, match=r"bad\.yaml: checkpoint\[0\]\.every"):
        xla_ckpt.load_config(path)


def test_config_is_data_only(tmp_path):
    path = _write(tmp_path, '[[checkpoint]]\nmatch = ["a"]\npolicy = "__import__(\'os\').system(\'echo hi\')"\n')
    with pytest.raises(ConfigError, match="unknown policy"):
        xla_ckpt.load_config(path)
