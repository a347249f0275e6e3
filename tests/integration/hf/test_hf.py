"""Hugging Face conventions: caches off in training only, HF's own checkpointing off, blocks, signatures, Trainer."""

from __future__ import annotations

from helpers import ROOT_DIR

import copy
import inspect
import os
import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, loss_grads
from xla_ckpt import hf_models
from xla_ckpt._api import hf as _hf
from xla_ckpt._base.errors import recompute_mismatch_hint
from xla_ckpt._base.warn import forgetting
from xla_ckpt.models import GPT, GPTConfig

ROOT = ROOT_DIR


def _llama():
    return hf_models.build("llama")


def _grads(model, batch):
    return loss_grads(lambda: model(**batch).loss, list(model.parameters()), seed=5)


@pytest.fixture(autouse=True)
def _fresh_warnings():
    # The notices are once per class and process; each test starts from none given.
    with forgetting():
        yield


def test_cache_off_in_training_only_without_a_notice():
    """Default configs train with use_cache=True: the cache is off in training, quietly (as HF's own
    checkpointing), and works in eval or without grad."""
    model = _llama()
    batch = hf_models.batch("llama", model)
    ref = copy.deepcopy(model)
    xla_ckpt.apply(model, "full")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no notice: nothing for the user to do
        got = _grads(model, batch)
        out = model(**batch)
    assert_same(_grads(ref, batch), got)
    assert out.cache is not None and out.cache.get_seq_length() == 0  # the model's cache stayed empty
    model.eval()
    with torch.no_grad():
        out = model(**batch)
    assert out.cache.get_seq_length() == 16  # eval, no grad: the cache works as before (generation)
    model.train()
    with torch.no_grad():
        assert model(**batch).cache.get_seq_length() == 16  # train mode without grad: nothing to replay


def test_cache_passed_positionally_is_turned_off():
    """GPT2Model passes the cache as the block's second positional argument."""
    model = hf_models.build("gpt2")
    batch = hf_models.batch("gpt2", model)
    ref = copy.deepcopy(model)
    xla_ckpt.checkpointed(model.transformer.h[0], policy="nothing_saveable")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _grads(model, batch)
    assert_same(_grads(ref, batch), got)


def test_without_cache_leaves_other_calls_alone():
    blk = nn.Linear(4, 4)
    args, kwargs = (torch.ones(1, 4),), {}
    assert _hf.without_cache(blk, type(blk).forward, args, kwargs) == (args, kwargs)

    class Layer(nn.Module):
        def forward(self, x, cache=None, use_cache=False):
            return x

    layer = Layer()
    assert _hf.without_cache(layer, Layer.forward, (args[0],), {"use_cache": False}) == ((args[0],), {"use_cache": False})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # turned off quietly
        a, k = _hf.without_cache(layer, Layer.forward, (args[0], "a cache"), {})
    assert a == (args[0], None) and k == {}


def test_mismatch_hint_names_the_cache():
    hint = recompute_mismatch_hint("aten.cat.default", "model.layers.1.self_attn")
    assert "key/value cache" in hint and "use_cache=False" in hint and "'model.layers.1.self_attn'" in hint
    assert "mutated in place" in recompute_mismatch_hint("aten.add_.Tensor")


@pytest.mark.parametrize("order", ["hf_first", "xla_ckpt_first"])
def test_hf_checkpointing_is_turned_off(order):
    model = _llama()
    batch = hf_models.batch("llama", model)
    ref = copy.deepcopy(model)
    calls = []
    import torch.utils.checkpoint as tuc

    def spy(fn, *a, **k):
        calls.append(1)
        return tuc.checkpoint(fn, *a, use_reentrant=False, **k)

    def hf_on():
        model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=spy)

    if order == "hf_first":
        hf_on()
        with pytest.warns(UserWarning, match=r"apply: Hugging Face gradient checkpointing was on .* turned it off"):
            xla_ckpt.apply(model, "dots")
    else:
        xla_ckpt.apply(model, "dots")
        hf_on()  # after apply: turned off at the first call instead
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = _grads(model, batch)
    assert calls == []  # HF's checkpoint never ran: one checkpoint per layer, ours
    # HF's flag is off everywhere, LlamaModel's too (Trainer(gradient_checkpointing=True) sets it after apply)
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    assert not model.is_gradient_checkpointing
    if order == "xla_ckpt_first":
        notice = [str(x.message) for x in w if "checkpointed: Hugging Face gradient checkpointing was on" in str(x.message)]
        assert len(notice) == 1, notice
        assert "e.g. 'model'" in notice[0] and "<root>" not in notice[0], notice  # a real module of the model
    assert_same(_grads(ref, batch), got)


def test_signatures_are_kept():
    model = _llama()
    before = inspect.signature(model.forward)
    layer_before = inspect.signature(model.model.layers[0].forward)
    xla_ckpt.apply(model, "fsdp_xla")  # weights_by_reference hooks the root (forward untouched)
    assert inspect.signature(model.forward) == before
    assert inspect.signature(model.model.layers[0].forward) == layer_before
    assert "input_ids" in inspect.signature(model.forward).parameters


def test_find_blocks():
    bert = hf_models.build("bert")
    assert xla_ckpt.find_blocks(bert) == ["bert.encoder.layer.0", "bert.encoder.layer.1"]  # not BertEmbeddings
    gpt = GPT(GPTConfig(vocab_size=32, seq_len=8, n_layer=3, n_head=2, d_model=16))
    assert xla_ckpt.find_blocks(gpt) == ["layers.0", "layers.1", "layers.2"]  # no HF: the ModuleList
    seq = nn.Sequential(nn.Linear(4, 4), nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU())] * 1),
                        nn.ModuleList([nn.Sequential(nn.Linear(4, 4)) for _ in range(3)]))
    assert xla_ckpt.find_blocks(seq) == ["2.0", "2.1", "2.2"]  # the longest list of one class
    assert xla_ckpt.find_blocks(nn.Linear(2, 2)) == []


TRAINER = """
import copy, inspect, sys, warnings, torch, transformers, xla_ckpt
from xla_ckpt import hf_models
base = hf_models.build("llama")
data = [{k: v[0] for k, v in hf_models.batch("llama", base, batch=1, seed=i).items()} for i in range(4)]

# TrainingArguments(gradient_checkpointing=True) or its newer name (activation_checkpointing=True) on the wrapped model
GC = {"gc": "gradient_checkpointing", "ac": "activation_checkpointing"}.get(sys.argv[2] if len(sys.argv) > 2 else "")

def train(model, gc=None):
    flag = {gc: True} if gc else {}
    args = transformers.TrainingArguments(
        output_dir=sys.argv[1], max_steps=2, per_device_train_batch_size=2, learning_rate=1e-2, use_cpu=True,
        report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0, **flag)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    loss = trainer.train().training_loss
    assert trainer.args.device.type == "cpu", trainer.args.device
    return loss, [p.detach().clone() for p in model.parameters()]

ref_loss, ref_params = train(copy.deepcopy(base))
model = copy.deepcopy(base)
assert len(xla_ckpt.apply(model, "fsdp_xla").wrapped) == 2  # weights_by_reference: hooks on the root
assert "input_ids" in inspect.signature(model.forward).parameters
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", UserWarning)
    loss, params = train(model, gc=GC)
if GC:  # Trainer turned HF's checkpointing on after apply(): turned off again, on the whole model
    notices = [str(w.message) for w in caught if "Hugging Face gradient checkpointing was on" in str(w.message)]
    assert len(notices) == 1 and "<root>" not in notices[0] and "e.g. 'model'" in notices[0], notices
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
torch.testing.assert_close(torch.tensor(loss), torch.tensor(ref_loss))
moved = False
for p0, r, p in zip(base.parameters(), ref_params, params):
    torch.testing.assert_close(p, r)  # the same two optimizer steps as without the library
    moved |= not torch.equal(p, p0)
assert moved, "the two steps changed no parameter"
print("TRAINED", loss)
"""


@pytest.mark.parametrize("gc", [pytest.param("plain", id="plain"),
                                pytest.param("gc", id="gradient_checkpointing", marks=pytest.mark.slow),
                                pytest.param("ac", id="activation_checkpointing", marks=pytest.mark.slow)])
def test_trainer_runs_with_a_preset(tmp_path, gc):
    """weights_by_reference replaced model.forward with (*args, **kwargs): Trainer then dropped input_ids.
    With ``gradient_checkpointing=True`` Trainer turns HF's flag on after apply: the first call turns it off
    on the whole model (LlamaModel's too) and names a real module; the steps equal the reference's. The same
    for ``activation_checkpointing=True``, the newer name of that argument."""
    transformers = pytest.importorskip("transformers")
    if gc == "ac" and "activation_checkpointing" not in transformers.TrainingArguments.__dataclass_fields__:
        pytest.skip("this transformers' TrainingArguments has no activation_checkpointing")
    pytest.importorskip("accelerate")
    # A fresh process: accelerate and transformers pick XLA whenever torch_xla imports (use_cpu is then
    # ignored) unless USE_TORCH_XLA=0, which they read at import time.
    env = {**os.environ, "USE_TORCH_XLA": "0", "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", TRAINER, str(tmp_path), gc], env=env,
                         capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "TRAINED" in run.stdout


def test_find_blocks_swin_picks_layers_not_stages():
    """Swin lists its stages in _no_split_modules; each stage holds a ModuleList of SwinLayer blocks."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                                  window_size=4, num_labels=3)
    torch.manual_seed(0)
    model = transformers.SwinForImageClassification(cfg).train()
    blocks = xla_ckpt.find_blocks(model)
    assert blocks == [f"swin.encoder.layers.{s}.blocks.{i}" for s in range(2) for i in range(2)], blocks
    assert {type(model.get_submodule(b)).__name__ for b in blocks} == {"SwinLayer"}
    ref = copy.deepcopy(model)
    batch = {"pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1)),
             "labels": torch.tensor([0, 2])}
    report = xla_ckpt.apply(model, "full")
    assert [w.cls for w in report.wrapped] == ["SwinLayer"] * 4
    assert_same(_grads(ref, batch), _grads(model, batch))


class _LoRA(nn.Module):
    """What peft's LoRA puts in place of a Linear: the frozen base layer plus a trainable low-rank path."""

    def __init__(self, base: nn.Linear, r: int = 4) -> None:
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.normal_(self.lora_B.weight)

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * 2.0


def test_lora_fsdp_xla_keeps_no_more_than_megatron_selective():
    """The corrected linear (fsdp_xla patches every Linear) kept the input of each frozen base layer."""
    base = _llama()
    base.requires_grad_(False)
    for layer in base.model.layers:
        layer.self_attn.q_proj = _LoRA(layer.self_attn.q_proj)
        layer.self_attn.v_proj = _LoRA(layer.self_attn.v_proj)
    batch = hf_models.batch("llama", base)
    ref = _grads(copy.deepcopy(base), batch)
    kept = {}
    for preset in ("megatron_selective", "fsdp_xla"):
        model = copy.deepcopy(base)
        xla_ckpt.apply(model, preset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the cache notice
            with xla_ckpt.saved_activations() as report:
                got = _grads(model, batch)
        kept[preset] = report.nbytes
        assert all(g is not None for g, p in zip(got[1], model.parameters(), strict=True) if p.requires_grad)
        assert_same(ref, got)
    assert kept["fsdp_xla"] == kept["megatron_selective"], kept  # 93572 bytes each on transformers 5.24
    plain = copy.deepcopy(base)
    xla_ckpt.patch_linear(plain)
    with xla_ckpt.saved_activations() as patched, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        plain(**batch)
    with xla_ckpt.saved_activations() as stock:
        copy.deepcopy(base)(**batch)
    assert patched.nbytes == stock.nbytes  # the corrected linear alone keeps what F.linear keeps


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_llama_attention_and_mlp_checkpointed_under_the_users_autocast(policy):
    """Mixed precision as users train: the step in bf16 autocast, each layer's ``self_attn`` and ``mlp``
    checkpointed on their own (their input, a non-leaf, read by q/k/v and by gate/up projections).
    The replay must match the forward's autocast casts, or a false CheckpointError follows ("forward ran
    aten._to_copy, recompute ran aten.mm" in ``mlp.up_proj``); loss and every grad as unwrapped.
    CPU: under XLA's autocast the unwrapped model itself fails (SDPA gets f32 query and key, a bf16
    value); tests/regressions/test_autocast_cache.py covers the replay on XLA."""
    device = torch.device("cpu")
    model = _llama().to(device)
    batch = {k: v.to(device) for k, v in hf_models.batch("llama", model).items()}
    ref = copy.deepcopy(model)
    for layer in model.model.layers:
        layer.self_attn = xla_ckpt.checkpointed(layer.self_attn, policy=policy)
        layer.mlp = xla_ckpt.checkpointed(layer.mlp, policy=policy)

    def step(m):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return _grads(m, batch)

    assert_same(step(ref), step(model))
