"""Hugging Face projections tagged by role (``xla_ckpt._api.hf_roles``): name policies act on HF models.

The ``names`` preset and ``policies.save_only_these_names`` select values by tag. ``apply`` tags the
known projections of HF architectures (q/k/v, attention output, MLP up/gate/down, router) inside the
modules it checkpoints, so ``names`` keeps the tagged projections of a Llama, no more, no less: exactly
their bytes on top of what ``full`` keeps, with the values and gradients of the unwrapped model.
"""

from __future__ import annotations

import copy
import inspect
import pickle
import warnings

import pytest
import torch

import xla_ckpt
from xla_ckpt import hf_models
from xla_ckpt._api.hf_roles import RoleTag

pytest.importorskip("transformers")

UNTAGGED = "was tagged (xla_ckpt.tag)"  # the engine's notice for a name policy on a region without tags


def _hooks(model: torch.nn.Module) -> int:
    return sum(isinstance(h, RoleTag) for m in model.modules() for h in m._forward_hooks.values())


def _step(model: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor, device: torch.device):
    """Logits, loss, the input embedding's grad, every named parameter grad, and the bytes kept."""
    torch.manual_seed(5)  # the same dropout masks in every run (GPT-2's default config has dropout)
    embeds = model.get_input_embeddings()(ids)
    embeds.retain_grad()  # the input embedding's grad, and through it the embedding table's
    with xla_ckpt.saved_activations() as kept:
        out = model(inputs_embeds=embeds, labels=labels)
    out.loss.backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    grads = {n: (None if p.grad is None else p.grad.cpu()) for n, p in model.named_parameters()}
    return out.logits.detach().cpu(), out.loss.detach().cpu(), embeds.grad.cpu(), grads, kept.nbytes


def _tagged_bytes(model: torch.nn.Module, tokens: int, names: set[str]) -> int:
    """What keeping the outputs of the projections tagged with ``names`` costs: tokens x out_features x 4."""
    report = model.__dict__["_xla_ckpt_applied"]  # the modules apply wrapped
    assert report.modules
    total = 0
    for block in report.modules.values():
        for m in block.modules():
            roles = [h.name for h in m._forward_hooks.values() if isinstance(h, RoleTag)]
            if roles and roles[0] in names:
                total += tokens * m.out_features * 4
    return total


def test_names_on_a_hf_llama_keeps_its_tagged_projections_exactly(device):
    """Default LlamaConfig at small sizes, use_cache left at its default: ``names`` keeps more than ``full``
    (the q/k/v, up and gate projections, to the byte) and less than ``none``, with exact values and grads,
    and without the "no op was tagged" notice."""
    base = hf_models.build("llama")
    assert base.config.use_cache is True
    batch = hf_models.batch("llama", base, batch=2)
    ids, labels = batch["input_ids"].to(device), batch["labels"].to(device)
    ref_logits, ref_loss, ref_embed, ref_grads, plain = _step(hf_models.to_device(copy.deepcopy(base), device),
                                                              ids, labels, device)
    kept = {}
    for preset in ("full", "names"):
        model = hf_models.to_device(copy.deepcopy(base), device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = xla_ckpt.apply(model, preset)
            logits, loss, embed, grads, kept[preset] = _step(model, ids, labels, device)
        assert not [w for w in caught if UNTAGGED in str(w.message)], [str(w.message) for w in caught]
        torch.testing.assert_close(logits, ref_logits)
        torch.testing.assert_close(loss, ref_loss)
        torch.testing.assert_close(embed, ref_embed)
        assert grads.keys() == ref_grads.keys()
        for name, g in grads.items():
            assert g is not None and ref_grads[name] is not None, name
            torch.testing.assert_close(g, ref_grads[name], msg=lambda m, name=name, preset=preset: f"{preset} {name}: {m}")
        if preset == "names":
            assert set(report.tagged.values()) == {"qkv", "attn_proj", "mlp_gate", "mlp_up", "mlp_down"}
            tagged = _tagged_bytes(model, ids.numel(), {"qkv", "mlp_up", "mlp_gate"})
    assert kept["full"] < kept["names"] < plain, (kept, plain)
    assert kept["names"] - kept["full"] == tagged, (kept, tagged)


# What each tested architecture's blocks have tagged, from the names its classes give the projections.
# transformers 5 holds MoE experts as stacked weights and routes with modules that return a tuple: neither
# is a single projection's output, so MoE blocks tag their attention (and any dense or shared MLP).
DENSE = {"qkv", "attn_proj", "mlp_up", "mlp_down"}
GATED = DENSE | {"mlp_gate"}
ATTN = {"qkv", "attn_proj"}
EXPECTED = {
    "llama": GATED, "mistral": GATED, "qwen2": GATED, "qwen3": GATED, "gemma": GATED, "gemma2": GATED,
    "gemma3": GATED, "phi3": DENSE, "gpt2": DENSE, "gpt_neox": DENSE, "bert": DENSE, "t5": DENSE, "bart": DENSE,
    "vit": DENSE, "mixtral": ATTN, "olmoe": ATTN, "qwen2_moe": GATED, "qwen3_moe": ATTN, "phimoe": ATTN,
    "granitemoe": ATTN, "gpt_oss": ATTN, "deepseek_v3": GATED,
}


@pytest.mark.parametrize("arch", list(hf_models.ARCHS))
def test_every_tested_architecture_has_its_projections_tagged(arch):
    """Tags by role on each architecture, state_dict keys and forward signatures unchanged, removed by "none";
    the model still pickles (the hook is a module-level class)."""
    assert set(EXPECTED) == set(hf_models.ARCHS)
    model = hf_models.build(arch, d_model=32, n_layer=2, n_head=4, seq_len=8)
    keys = list(model.state_dict())
    signatures = {n: tuple(inspect.signature(m.forward).parameters) for n, m in model.named_modules()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        report = xla_ckpt.apply(model, "names")
    assert set(report.tagged.values()) == EXPECTED[arch], report.tagged
    blocks = [w.name for w in report.wrapped]
    assert all(any(n.startswith(b + ".") for b in blocks) for n in report.tagged)  # only inside checkpointed ones
    assert _hooks(model) == len(report.tagged)
    assert "tagged by role: " in str(report)
    assert list(model.state_dict()) == keys
    assert {n: tuple(inspect.signature(m.forward).parameters) for n, m in model.named_modules()} == signatures
    assert _hooks(pickle.loads(pickle.dumps(model))) == len(report.tagged)
    xla_ckpt.apply(model, "names")  # again: the same tags, not twice
    assert _hooks(model) == len(report.tagged)
    assert xla_ckpt.apply(model, "none").tagged == {} and _hooks(model) == 0


def test_a_role_name_selects_that_projection_on_gpt2():
    """GPT-2's c_proj is the attention output in GPT2Attention and the down projection in GPT2MLP (Conv1D
    layers): ``save_only_these_names("mlp_down")`` keeps exactly the MLP's, with exact grads."""
    base = hf_models.build("gpt2")
    batch = hf_models.batch("gpt2", base, batch=2)
    cpu = torch.device("cpu")
    ids, labels = batch["input_ids"], batch["labels"]
    _, ref_loss, ref_embed, ref_grads, _ = _step(copy.deepcopy(base), ids, labels, cpu)
    kept = {}
    for names in ((), ("mlp_down",)):
        model = copy.deepcopy(base)
        policy = {"name": "save_only_these_names", "names": list(names)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "policy": policy}]})
            _, loss, embed, grads, kept[names] = _step(model, ids, labels, cpu)
        torch.testing.assert_close(loss, ref_loss)
        torch.testing.assert_close(embed, ref_embed)
        for name, g in grads.items():
            assert g is not None, name
            torch.testing.assert_close(g, ref_grads[name])
    d = base.config.n_embd
    assert kept[("mlp_down",)] - kept[()] == base.config.n_layer * ids.numel() * d * 4


def test_a_model_with_no_known_projection_is_still_told_nothing_is_tagged():
    """The notice stays where nothing is tagged: a model of one's own that does not call xla_ckpt.tag."""
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()) for _ in range(2)])
    report = xla_ckpt.apply(model, "names")
    assert report.tagged == {} and len(report.wrapped) == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(torch.randn(2, 8, requires_grad=True)).sum().backward()
    assert [w for w in caught if UNTAGGED in str(w.message)]


def test_the_guide_counts_the_tested_architectures():
    """docs/huggingface.md's counts come from hf_models.ARCHS."""
    import os

    from helpers import ROOT_DIR

    with open(os.path.join(ROOT_DIR, "docs", "huggingface.md"), encoding="utf-8") as f:
        text = f.read()
    moe = [a for a, (_, _, sizes, _) in hf_models.ARCHS.items() if "num_experts_per_tok" in sizes(32, 2, 4, 16, 128)]
    seq2seq = [a for a, v in hf_models.ARCHS.items() if v[3] == "seq2seq"]
    dense = len(hf_models.ARCHS) - len(moe) - 1  # BART is named apart, beside T5 among the dense ones
    assert "bart" in seq2seq and "t5" in seq2seq
    assert (f"`xla_ckpt.hf_models.ARCHS` ({len(hf_models.ARCHS)}: {dense} dense models and encoders, "
            f"{len(moe)} mixture-of-experts decoders, BART)") in text.replace("\n", " ")
