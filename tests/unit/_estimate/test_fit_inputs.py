"""What ``fit`` and ``estimate`` take and assume: config objects, Hub ids, the chip's attention, the ranking.

A transformers config object gives exactly what the ``config.json`` it saves gives; a Hub id that cannot be
fetched is one error naming the local-path alternative; the attention kernel defaults to the chip's and the
report says so; ``none`` is recommended whenever it fits; the ``names`` row of a model that tags nothing
says so, without a warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import huggingface_hub
import pytest
import torch
import transformers

import xla_ckpt
from xla_ckpt.__main__ import main
from xla_ckpt._estimate.attention import default_attention
from xla_ckpt._estimate.chips import CHIPS, GIB
from xla_ckpt._estimate.fit import fit
from xla_ckpt._estimate.hf_config import hf_config_data
from xla_ckpt._base.warn import forgetting

from helpers import ROOT_DIR

SEQ = 64


def _config() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=256)


def _rows(report) -> list[tuple]:  # noqa: ANN001
    return [(r.policy, r.activation_bytes, r.working_bytes, r.total_bytes, r.recompute_flops, r.fits, r.note)
            for r in report.rows]


@pytest.fixture(scope="module")
def on_v5e():  # noqa: ANN201
    with forgetting(), warnings.catch_warnings():
        warnings.simplefilter("error")  # fit's own forward: no use_cache notice, no untagged-names notice
        return fit(_config(), seq=SEQ, chip="v5e", budgets=(0.25,))


def test_config_object_gives_a_recommendation_equal_to_its_file(on_v5e, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    assert on_v5e.recommended is not None and on_v5e.recommended_policy == "none", str(on_v5e)
    _config().save_pretrained(tmp_path)  # the config.json the object saves
    from_file = fit(str(tmp_path / "config.json"), seq=SEQ, chip="v5e", budgets=(0.25,))
    assert _rows(from_file) == _rows(on_v5e) and from_file.recommended == on_v5e.recommended
    assert from_file.n_params == on_v5e.n_params == sum(
        p.numel() for p in transformers.AutoModelForCausalLM.from_config(_config()).parameters())
    data, _ = hf_config_data(str(tmp_path / "config.json"))
    assert hf_config_data(tmp_path) == hf_config_data(str(tmp_path)) == (data, "llama")  # the folder: its file
    # A Hub id goes through AutoConfig.from_pretrained (here a stand-in: no network in tests).
    asked = []
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", lambda repo: asked.append(repo) or _config())
    from_hub = fit("acme/llama-tiny", seq=SEQ, chip="v5e", budgets=(0.25,))
    assert asked == ["acme/llama-tiny"] and from_hub.model == "acme/llama-tiny"
    assert _rows(from_hub) == _rows(on_v5e)


def test_wrong_config_type_names_what_was_passed_and_what_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"fit: expected a transformers config object .* Hub id.*; got builtins\.int"):
        fit(42, seq=SEQ, chip="v5e")
    with pytest.raises(TypeError, match=r"fit: expected .*; got .*LlamaForCausalLM"):
        fit(transformers.AutoModelForCausalLM.from_config(_config()), seq=SEQ, chip="v5e")
    with pytest.raises(FileNotFoundError, match=r"fit: no file or folder 'no/such/config\.json'"):
        fit("no/such/config.json", seq=SEQ, chip="v5e")
    with pytest.raises(TypeError, match=r"estimate: model must be a torch.nn.Module or a transformers config "
                                        r"object .*got builtins\.str"):
        xla_ckpt.estimate("meta-llama/Meta-Llama-3-8B")


def test_estimate_takes_a_config_object() -> None:
    """The causal LM from_config builds, on meta, cache off: the same bytes and FLOPs as that model itself."""
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(_config()).train()
    ids = torch.zeros(2, SEQ, dtype=torch.long, device="meta")
    for preset in ("none", "full"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = xla_ckpt.estimate(_config(), input_ids=ids, labels=ids, config=preset)
        want = xla_ckpt.estimate(model, input_ids=ids, labels=ids, use_cache=False, config=preset)
        assert got == want and got.activation_bytes > 0


def test_hub_id_offline_is_an_error_naming_the_local_alternative(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets
    with pytest.raises(OSError, match=r"^fit: 'xla-ckpt-tests/no-such-model' is not a file or folder here, and the "
                                      r"Hugging Face Hub did not give its config \(.*\)\. Pass a local path instead: "
                                      r"the model's config\.json or a folder holding it"):
        fit("xla-ckpt-tests/no-such-model", seq=SEQ, chip="h100")


@pytest.mark.slow
def test_hub_id_offline_cli_prints_that_error_and_nothing_else(tmp_path) -> None:  # noqa: ANN001
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PJRT_DEVICE": "CPU",
           "PYTHONPATH": ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-m", "xla_ckpt", "fit", "--hf-config", "meta-llama/Meta-Llama-3-8B",
                          "--seq", "128", "--chip", "h100"], capture_output=True, text=True, env=env, timeout=300,
                         cwd=str(tmp_path))
    assert run.returncode == 2 and run.stdout == "", (run.stdout, run.stderr)
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr  # the error and nothing else (no retries, no traceback)
    assert lines[0].startswith("error: fit: 'meta-llama/Meta-Llama-3-8B' is not a file or folder here")
    assert "Pass a local path instead: the model's config.json or a folder holding it" in lines[0]


def test_attention_defaults_to_the_chips_kernel_and_says_so(on_v5e) -> None:  # noqa: ANN001
    assert on_v5e.attention == "math" and "attention: math" in str(on_v5e)
    assert "(assumed for an XLA chip: PyTorch/XLA lowers SDPA" in str(on_v5e)
    assert [default_attention(c)[0] for c in CHIPS] == ["flash" if not CHIPS[c].xla else "math" for c in CHIPS]
    assert default_attention("h200")[0] == "flash" and default_attention("v5p")[0] == "math"
    kernel, why = default_attention(None)
    assert kernel == "math" and why.startswith("assumed: no chip named")
    assert default_attention(None, on_xla=True)[1].startswith("assumed for an XLA chip")
    gpu = fit(_config(), seq=SEQ, chip="h100", budgets=())
    assert gpu.attention == "flash" and "(the default on h100: PyTorch's SDPA runs a fused kernel" in str(gpu)
    given = fit(_config(), seq=SEQ, chip="h100", budgets=(), attention="math")
    assert given.attention == "math" and "(as given)" in str(given)
    none = {r.policy: r for r in gpu.rows}["none"]
    assert none.activation_bytes < {r.policy: r for r in given.rows}["none"].activation_bytes  # the kernel counts


def test_none_is_recommended_whenever_it_fits(on_v5e) -> None:  # noqa: ANN001
    rows = {r.policy: r for r in on_v5e.rows}
    # What made it a question: another row recomputes no FLOPs either (elementwise ops only) and keeps less.
    assert rows["dots"].recompute_flops == rows["none"].recompute_flops == 0
    assert rows["dots"].total_bytes < rows["none"].total_bytes and rows["dots"].fits
    assert on_v5e.recommended_policy == "none" and on_v5e.rows[0].policy == "none"
    # A chip too small for `none`: the recommendation is the least-recompute row among those that fit.
    small = fit(_config(), seq=SEQ, hbm_gib=(rows["none"].total_bytes - 1) / GIB, xla=True, budgets=(0.25,),
                reserve=0.0)
    fitting = [r for r in small.rows if r.fits and not r.note]
    assert not {r.policy: r for r in small.rows}["none"].fits and fitting, str(small)
    best = min(fitting, key=lambda r: (r.recompute_flops, -r.activation_bytes))
    assert small.recommended_policy == best.policy != "none"


def test_names_row_of_an_hf_model_keeps_its_roles(on_v5e) -> None:  # noqa: ANN001
    """apply tags HF projections by role: the names row keeps them, recomputes less than full, no note."""
    rows = {r.policy: r for r in on_v5e.rows}
    names, full = rows["names"], rows["full"]
    assert names.note == ""
    assert names.activation_bytes > full.activation_bytes and names.recompute_flops < full.recompute_flops


def test_names_row_of_an_untagged_model_says_so_without_a_warning(monkeypatch) -> None:  # noqa: ANN001
    """A model whose projections have no known role: names keeps what full keeps, says so, is not recommended."""
    import xla_ckpt._api.apply as apply_module

    monkeypatch.setattr(apply_module, "tag_roles", lambda model, wrapped: {})
    with forgetting(), warnings.catch_warnings():
        warnings.simplefilter("error")  # fit's own forward: no untagged-names notice
        report = fit(_config(), seq=SEQ, chip="v5e", budgets=())
    names = {r.policy: r for r in report.rows}["names"]
    full = {r.policy: r for r in report.rows}["full"]
    assert names.note.startswith("no value of this model is tagged") and names.note in str(report)
    assert (names.activation_bytes, names.recompute_flops) == (full.activation_bytes, full.recompute_flops)
    with forgetting():  # a process where the engine's notice is due
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tiny = fit(_config(), seq=SEQ, hbm_gib=(full.total_bytes + 1) / GIB, xla=True, budgets=(), reserve=0.0)
        assert tiny.recommended_policy == "full", str(tiny)  # names fits as well, but means nothing here
        # fit kept the notice due: the user's own untagged model still hears it.
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(_config()).train()
        ids = torch.zeros(1, 8, dtype=torch.long, device="meta")
        with pytest.warns(UserWarning, match="selects values by tag name"):
            xla_ckpt.estimate(model, input_ids=ids, labels=ids, use_cache=False, config="names")


def test_names_row_of_a_tagged_model_keeps_the_tags() -> None:
    """The demo GPT tags qkv and mlp_up: the estimate of `names` keeps exactly those, per tag."""
    from xla_ckpt.models import GPT, GPTConfig

    with torch.device("meta"):
        model = GPT(GPTConfig(n_layer=2, n_head=4, d_model=64, seq_len=32))
    idx = torch.zeros(2, 32, dtype=torch.long, device="meta")
    est = xla_ckpt.estimate(model, idx, idx, config="names")
    assert set(est.by_tag) == {"qkv", "mlp_up"} and sum(est.by_tag.values()) < est.activation_bytes
    assert xla_ckpt.estimate(model, idx, idx, config="full").by_tag == {}


def test_explain_runs_its_hf_step_without_the_cache_notice(capsys: pytest.CaptureFixture[str]) -> None:
    with forgetting(), warnings.catch_warnings(record=True) as seen:  # every once-notice due
        warnings.simplefilter("always")
        assert main(["explain", "full", "--model", "llama", "--layers", "2", "--d-model", "32", "--seq", "16"]) == 0
    assert not [w for w in seen if "use_cache" in str(w.message)], [str(w.message) for w in seen]
    assert "total:" in capsys.readouterr().out
