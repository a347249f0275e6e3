"""``python -m xla_ckpt explain --model``: any causal-LM architecture of the installed transformers, one
vocabulary in its tables, one Llama."""

from __future__ import annotations

import re

import pytest

from xla_ckpt.__main__ import main
from xla_ckpt._cli.explain import producer

SMALL = ["--layers", "2", "--d-model", "32", "--seq", "16"]


def _op_table(out: str) -> dict[str, str]:
    lines = out.split("kept for backward by producing op")[1].splitlines()[1:]
    rows = {}
    for line in lines:
        if line.startswith(("total:", "kept for backward by tag")):
            break
        name, size = line.strip().rsplit(None, 2)[0], line.strip().rsplit(None, 2)[1:]
        rows[name] = " ".join(size)
    return rows


def test_any_causal_lm_architecture(capsys):
    pytest.importorskip("transformers")
    assert main(["explain", "megatron_selective", "--model", "mixtral", *SMALL]) == 0  # not in hf_models.ARCHS
    out = capsys.readouterr().out
    assert "model.layers.0" in out and "model.layers.1" in out and "MixtralDecoderLayer" in out, out
    rows = _op_table(out)
    assert rows and all(re.fullmatch(r"aten\.\w+|\([\w ]+\)", name) for name in rows), rows  # one vocabulary
    assert "aten.mm" in rows and "(region input)" in rows, rows
    ratio = float(re.search(r"checkpointing: ([\d.]+)x", out).group(1))
    assert 0 < ratio < 1, out


def test_explain_shows_the_roles_apply_tags_on_a_hf_model(capsys):
    pytest.importorskip("transformers")
    assert main(["explain", "names", "--model", "llama", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "tagged by role: qkv x6 (e.g. model.layers.0.self_attn.q_proj)" in out, out
    tags = out.split("kept for backward by tag")[1].split("total:")[0]
    rows = dict(line.split(None, 1) for line in tags.splitlines()[1:])
    assert {"qkv", "mlp_up", "mlp_gate", "-"} == set(rows), out  # what names keeps, and the untagged rest


def test_llama_hf_is_llama_and_unknown_names_are_explained(capsys):
    pytest.importorskip("transformers")
    assert main(["explain", "full", "--model", "llama-hf", *SMALL]) == 0
    first = capsys.readouterr()
    assert "note: --model llama-hf is llama" in first.err
    assert main(["explain", "full", "--model", "llama", *SMALL]) == 0
    assert capsys.readouterr().out == first.out  # the same model: the same plan and bytes
    assert main(["explain", "full", "--model", "no_such_arch", *SMALL]) == 2
    err = capsys.readouterr().err
    assert "unknown --model 'no_such_arch'" in err and "causal-LM model_type" in err and "mixtral" in err


def test_producer_vocabulary():
    assert producer("aten.mm") == "aten.mm"
    assert producer("AddmmBackward0") == "aten.addmm"
    assert producer("LogSoftmaxBackward0") == "aten._log_softmax"
    assert producer("NativeLayerNormBackward0") == "aten.native_layer_norm"
    assert producer("region input") == "(region input)" and producer("") == "(input)"
    assert producer("_LinearFunctionBackward") == "(_LinearFunctionBackward)"


def test_explain_says_how_a_budget_planned_its_regions(capsys, tmp_path, monkeypatch):
    cfg = tmp_path / "budget.toml"
    cfg.write_text("[[checkpoint]]\nblocks = true\nbudget = 0.3\n")
    assert main(["explain", str(cfg), *SMALL]) == 0
    out = capsys.readouterr().out
    assert "  planned: memory_budget(0.3): 1 region structure: exact\n" in out, out  # identical blocks: one plan
    from xla_ckpt._base.warn import forgetting
    from xla_ckpt._policy import budget

    monkeypatch.setattr(budget, "EXACT_MAX_NODES", 0)  # the exact search's box: the greedy plan, said so
    with forgetting(), pytest.warns(UserWarning, match="planned greedily"):
        assert main(["explain", str(cfg), *SMALL]) == 0
    out = capsys.readouterr().out
    assert re.search(r"planned: memory_budget\(0\.3\): 1 region structure: greedy: exact search stopped at 0 "
                     r"branch points \(\d+ free ops\)\n", out), out
