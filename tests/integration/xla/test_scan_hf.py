"""``apply(model, preset, scan=True)``: a Hugging Face decoder stack as one torch_xla scan.

Compared with the same model without the library on XLA (loss and every parameter grad); the scan
proven by the step's HLO (a while loop; its size flat in depth); the policy proven by the matmuls the
backward recomputes. Models are 2-layer tiny ones from ``xla_ckpt.hf_models`` (default configs).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._api import scan_stack
from xla_ckpt._api.scan_hf import plain_grads

pytest.importorskip("transformers")
pytestmark = pytest.mark.xla


def _model(arch: str, device: torch.device, n_layer: int = 2, **config: object) -> torch.nn.Module:
    model = hf_models.build(arch, n_layer=n_layer)
    for k, v in config.items():
        setattr(model.config, k, v)
        for m in model.modules():  # attention modules copy attention_dropout at init
            if hasattr(m, k) and not isinstance(m, torch.nn.Dropout):
                setattr(m, k, v)
    return hf_models.to_device(model, device)


def _step(model: torch.nn.Module, batch: dict, hlo: bool = False) -> tuple[torch.Tensor, dict, str]:
    """Loss, every parameter's grad (None kept) and, if asked, the step's HLO text before it runs."""
    import torch_xla

    model.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the use_cache notice (HF default configs train with use_cache=True)
        loss = model(**batch).loss
    loss.backward()
    params = dict(model.named_parameters())
    text = torch_xla._XLAC._get_xla_tensors_hlo([loss, *(p.grad for p in params.values() if p.grad is not None)]) \
        if hlo else ""
    torch_xla.sync()
    # By plain name: a scanned stack's stacked grads split per layer.
    return loss.detach().cpu(), {k: (None if g is None else g.cpu()) for k, g in plain_grads(model).items()}, text


def _assert_same(ref: tuple, got: tuple) -> None:
    torch.testing.assert_close(got[0], ref[0])
    assert ref[1].keys() == got[1].keys()
    for k, r in ref[1].items():
        assert r is not None, f"{k}: no grad in the reference"
        assert got[1][k] is not None, f"{k}: grad is None under scan"
        torch.testing.assert_close(got[1][k], r, msg=lambda m, k=k: f"{k}: {m}")


@pytest.fixture(scope="module")
def llama_ref(xla_device):
    """The 2-layer Llama without xla_ckpt on XLA: its weights, batch and (loss, grads)."""
    model = _model("llama", xla_device)
    batch = hf_models.batch("llama", model, device=xla_device)
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    return state, batch, _step(model, batch)


# Fast tier: the selective preset, whose marks must reach inside the scanned body; `none` and `full` (slow tier)
# scan the same Llama with nothing or everything recomputed, as test_scan.py's own layers do in the fast tier.
@pytest.mark.parametrize("preset", [pytest.param("none", marks=pytest.mark.slow), "megatron_selective",
                                    pytest.param("full", marks=pytest.mark.slow)])
def test_llama_scanned_equals_plain(xla_device, llama_ref, preset):
    state, batch, ref = llama_ref
    model = _model("llama", xla_device)
    model.load_state_dict(state)
    keys = list(model.state_dict())
    report = xla_ckpt.apply(model, preset, scan=True)
    assert report.scanned.startswith("model.layers: 2 LlamaDecoderLayer as one scan"), report.scanned
    assert not report.wrapped
    got = _step(model, batch, hlo=True)
    _assert_same(ref[:2], got[:2])
    assert list(model.state_dict()) == keys
    # A second step reuses the traced body (torch_xla's is_fn_pure cache): same grads, one body.
    _assert_same(ref[:2], _step(model, batch)[:2])
    from xla_ckpt._api.scan_hf import scanned_stack
    from torch_xla.experimental import scan as xla_scan

    bodies = list(scanned_stack(model).bodies.values())
    assert len(bodies) == 1 and bodies[0] in xla_scan._SCAN_COMPUTATION_CACHE
    # The scan ran: forward and backward are while loops (the plain step has none).
    assert got[2].count("while(") >= 2 and "while(" not in ref[2]
    # The policy marked the body: the backward recomputes matmuls (HLO `dot(`): none 0, megatron the
    # attention core's two, full every one of the layer's matmuls too (7 projections + 2).
    _DOTS[preset] = got[2].count(" dot(")
    if len(_DOTS) == 3:
        assert _DOTS["none"] < _DOTS["megatron_selective"] < _DOTS["full"], _DOTS


_DOTS: dict[str, int] = {}


def test_hlo_flat_in_depth(xla_device):
    """The step's HLO for 12 layers is at most 1.5x that for 4 scanned (unrolled: about 3x). Traced, not run."""
    import torch_xla

    def size(n: int, scan: bool) -> int:
        model = _model("llama", xla_device, n_layer=n)
        xla_ckpt.apply(model, "megatron_selective", scan=scan)
        batch = hf_models.batch("llama", model, device=xla_device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss = model(**batch).loss
        loss.backward()
        text = torch_xla._XLAC._get_xla_tensors_hlo([loss, *(p.grad for p in model.parameters())])
        torch_xla._XLAC._xla_sync_multi([], devices=[], wait=False)  # drop the graph without running it
        return len(text)

    scanned = size(12, True) / size(4, True)
    unrolled = size(12, False) / size(4, False)
    assert scanned <= 1.5, scanned
    assert unrolled > 2.0, unrolled  # the proxy sees depth


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mistral", "qwen2", "qwen3", "phi3", "gemma"])
def test_other_decoders_scanned_equal_plain(xla_device, arch):
    model = _model(arch, xla_device)
    batch = {**hf_models.batch(arch, model, device=xla_device), "use_cache": False}
    ref = _step(model, batch)
    xla_ckpt.apply(model, "megatron_selective", scan=True)
    got = _step(model, batch, hlo=True)
    _assert_same(ref[:2], got[:2])
    assert "while(" in got[2]


def test_attention_dropout_is_refused_before_the_scan(xla_device):
    model = _model("llama", xla_device, attention_dropout=0.1)
    xla_ckpt.apply(model, "full", scan=True)
    batch = hf_models.batch("llama", model, device=xla_device)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"attention dropout: layers\[0\]\.self_attn"):
        model(**batch, use_cache=False)
    assert all(p.grad is None for p in model.parameters())
    model.eval()  # no dropout in eval: the scan runs
    model(**batch, use_cache=False)


def test_per_layer_outputs_are_refused(xla_device):
    model = _model("llama", xla_device)
    xla_ckpt.apply(model, "full", scan=True)
    batch = hf_models.batch("llama", model, device=xla_device)
    with pytest.raises(xla_ckpt.CheckpointError, match="output_hidden_states=True"):
        model(**batch, use_cache=False, output_hidden_states=True)


def test_a_changed_argument_between_layers_is_an_error(xla_device):
    """A loop that passes layer 1 another mask than layer 0 (as Gemma 2's does) fails, never scans wrongly."""
    model = _model("llama", xla_device)
    xla_ckpt.apply(model, "full", scan=True)
    h = torch.zeros(2, 16, 32, device=xla_device)
    kw = {"position_embeddings": model.model.rotary_emb(h, torch.arange(16, device=xla_device)[None])}
    layers = model.model.layers
    assert layers[0](h, **kw) is h  # deferred
    other = {"position_embeddings": tuple(t.clone() for t in kw["position_embeddings"])}
    with pytest.raises(xla_ckpt.CheckpointError, match=r"model.layers\[1\]: position_embeddings differs"):
        layers[1](h, **other)
    with pytest.raises(xla_ckpt.CheckpointError, match="without the layers before it"):
        layers[1](h, **kw)
    assert isinstance(layers[0].__dict__["forward"], scan_stack.ScanForward)


@pytest.mark.slow  # Llama's scan and the attention-dropout refusal are the fast tier's
def test_gpt2_stack_scanned_equals_plain_and_its_default_dropout_is_refused(xla_device):
    """GPT-2's ``transformer.h``: its default config trains with dropout 0.1 (refused, nothing ran); at 0, equal."""
    default = _model("gpt2", xla_device)
    batch = hf_models.batch("gpt2", default, device=xla_device)
    xla_ckpt.apply(default, "megatron_selective", scan=True)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"dropout: layers\[0\]\.attn\.attn_dropout is Dropout\(p=0\.1\)"):
        default(**batch)
    assert all(p.grad is None for p in default.parameters())

    def no_dropout() -> torch.nn.Module:
        model = hf_models.build("gpt2", n_layer=2)
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        return hf_models.to_device(model, xla_device)

    plain = no_dropout()
    ref = _step(plain, batch, hlo=True)
    model = no_dropout()
    model.load_state_dict(plain.state_dict())
    report = xla_ckpt.apply(model, "megatron_selective", scan=True)
    assert report.scanned.startswith("transformer.h: 2 GPT2Block as one scan"), report.scanned
    got = _step(model, batch, hlo=True)
    _assert_same(ref[:2], got[:2])
    assert got[2].count("while(") >= 2 and "while(" not in ref[2]


@pytest.mark.slow  # ~95 s: two models' AdamW steps, then eval and generation compiled token by token
def test_stacked_weights_train_eval_and_generate_as_the_plain_model(xla_device, llama_ref):
    """Weights kept stacked between steps: two AdamW steps give the plain model's state_dict (plain keys), the
    optimizer holds the stacked parameters the scan reads in place, and eval / generate (KV cache: the layers run
    one by one on their slices) give the plain model's outputs."""
    import torch_xla

    state, batch, _ = llama_ref
    models = []
    for scan in (False, True):
        model = _model("llama", xla_device)
        model.load_state_dict(state)  # a plain checkpoint, into the scanned model too
        xla_ckpt.apply(model, "megatron_selective", scan=scan)
        models.append(model)
    plain, scanned = models
    stacked = scanned.model.layers[0].mlp.up_proj._parameters["weight"]
    assert stacked.shape[0] == 2 and stacked is dict(scanned.named_parameters())["model.layers.0.mlp.up_proj.weight"]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in models]
    losses: list[list[float]] = [[], []]
    for _ in range(2):
        for i, (m, opt) in enumerate(zip(models, opts, strict=True)):
            opt.zero_grad(set_to_none=True)
            loss = m(**batch, use_cache=False).loss
            loss.backward()
            opt.step()
            torch_xla.sync()
            losses[i].append(loss.item())
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]))
    ref = {k: v.cpu() for k, v in plain.state_dict().items()}
    got = {k: v.cpu() for k, v in scanned.state_dict().items()}
    assert list(got) == list(ref)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], msg=lambda m, k=k: f"{k}: {m}")
    assert scanned.model.layers[0].mlp.up_proj._parameters["weight"] is stacked  # stepped in place, never restacked
    prompt = batch["input_ids"][:, :4]
    outs = []
    for m in models:
        m.eval()
        with torch.no_grad():
            logits = m(input_ids=prompt, use_cache=False).logits
            tokens = m.generate(prompt, max_new_tokens=3, do_sample=False, pad_token_id=0)
        outs.append((logits.cpu(), tokens.cpu()))
    torch.testing.assert_close(outs[1][0], outs[0][0])
    assert torch.equal(outs[1][1], outs[0][1])


@pytest.mark.slow
def test_a_scanned_step_peaks_as_the_unrolled_one(tmp_path):
    """The weights stay stacked between steps: no per-step copy of them nor of their grads, so the largest compiled
    program of an SGD step (4 layers x 128, ``tests/probes/scan_hf_peak_probe.py``) peaks within 5% of the unrolled
    step's (8.68 vs 8.61 MB; stacking per step made it 11.04 MB, 1.28x); the losses are equal. ~60 s."""
    import json
    import os
    import subprocess
    import sys

    from helpers import PROBES_DIR, ROOT_DIR

    got = {}
    for scan in (0, 1):
        dump = str(tmp_path / f"dump{scan}")
        env = {**os.environ, "PJRT_DEVICE": "CPU", "XLA_FLAGS": f"--xla_dump_to={dump}",
               "PYTHONPATH": ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
        out = subprocess.run([sys.executable, os.path.join(PROBES_DIR, "scan_hf_peak_probe.py"), dump, str(scan),
                              "megatron_selective", "4", "128", "512"], capture_output=True, text=True, env=env,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        got[scan] = json.loads(out.stdout.strip().splitlines()[-1])
    torch.testing.assert_close(torch.tensor(got[1]["losses"]), torch.tensor(got[0]["losses"]))
    assert got[1]["peak_bytes"] <= 1.05 * got[0]["peak_bytes"], got


def test_gemma2_alternating_layers_scan_as_groups(xla_device):
    """Gemma 2's sliding and global layers alternate (config.layer_types): the scan runs the pair as one body,
    twice over 4 layers, each layer with its own mask and configuration; loss and every grad as the plain model.
    The window (4) is shorter than the sequence (16): a sliding layer given the global mask would differ."""
    base = hf_models.build("gemma2", n_layer=4)
    base.config.sliding_window = 4
    torch.manual_seed(0)
    model = hf_models.to_device(type(base)(base.config).train(), xla_device)
    assert model.model.layers[0].self_attn.sliding_window == 4 and model.model.layers[1].self_attn.sliding_window is None
    batch = {**hf_models.batch("gemma2", model, device=xla_device), "use_cache": False}
    ref = _step(model, batch, hlo=True)
    report = xla_ckpt.apply(model, "megatron_selective", scan=True)
    assert report.scanned.startswith("model.layers: 4 Gemma2DecoderLayer as one scan of 2 groups of 2"), report
    assert dict(model.named_parameters())["model.layers.1.self_attn.q_proj.weight"].shape[0] == 2
    got = _step(model, batch, hlo=True)
    _assert_same(ref[:2], got[:2])
    assert got[2].count("while(") >= 2 and "while(" not in ref[2]
