"""22 Hugging Face architectures, default configs (use_cache=True, dropout on), through every shipped preset.

Among them 8 mixture-of-experts decoders (Mixtral, OLMoE, Qwen2-MoE, Qwen3-MoE, PhiMoE, GraniteMoE,
GPT-OSS, DeepSeek-V3) and two encoder-decoders (T5, BART).

Per architecture and device: loss and every parameter grad equal the unwrapped model's (a deepcopy, same
seed), no grad is None, and fewer bytes are kept (``saved_activations().nbytes`` ratio < 1). CPU runs
every preset; XLA:CPU runs each architecture with one preset, round robin, so every preset meets several
architectures there (``XLA_CKPT_HF_FULL=1``: every preset on XLA and under compile too). ``XLA_CKPT_HF_TABLE=PATH`` writes
the table of docs/huggingface.md (architecture x preset: max grad difference / bytes ratio) as Markdown.
`make test` runs Llama (CPU and XLA) and Mixtral (CPU, `full`); the rest is in the slow tier (`make test-all`).
"""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any

import pytest
import torch

import xla_ckpt
from helpers import seed_all
from xla_ckpt import hf_models

ARCHS = list(hf_models.ARCHS)
PRESETS = [p for p in xla_ckpt.presets() if p != "none"]
TABLE_PRESETS = ["full", "megatron_selective", "dots", "names", "fsdp_xla"]
FULL = os.environ.get("XLA_CKPT_HF_FULL") == "1"
# torch_xla cannot slice a 16-long tensor with start -4095 (the sliding-window cache slice
# `full_key_states[:, :, -self.sliding_window + 1:, :]`): the unwrapped default config fails on XLA
# for these (sliding-window layers at their default window), with or without xla_ckpt. Wrapped, the
# cache is off in training, so they train; their reference is the unwrapped model with use_cache=False.
XLA_SLICE_FAILS = {"mistral", "gemma2", "gemma3", "gpt_oss"}
# Transformers 5's default experts ("grouped_mm") count tokens per expert with torch.histc on an int32
# tensor off the CPU; torch_xla has no histc and falls back to the CPU kernel, which has no int version
# ("histogram_cpu" not implemented for 'Int'): the unwrapped default model fails on XLA, with or without
# xla_ckpt. These train there with HF's reference experts (set_experts_implementation("eager"): a loop over
# experts with one_hot / where / index_add), the reference and every preset alike.
# PhiMoE's router (PhimoeTopKRouter) subclasses nn.Linear with its own forward (router jitter): presets
# with patch_linear leave it alone and say so (the notice is expected there; the rest is patched).
OWN_FORWARD_LINEAR = {"phimoe"}
XLA_HISTC_FAILS = {"mixtral", "olmoe", "qwen2_moe", "qwen3_moe", "phimoe", "granitemoe", "gpt_oss", "deepseek_v3"}

# On XLA:CPU the MoE rows cost minutes each (Mixtral 1-8 min here): test-all runs Mixtral (the one_hot /
# permute path: factory tensors and views inside a region on XLA) and GPT-OSS (both fallbacks);
# XLA_CKPT_HF_MOE_XLA=1 runs all eight.
XLA_MOE_RUN = {"mixtral", "gpt_oss"}
MOE_XLA = os.environ.get("XLA_CKPT_HF_MOE_XLA") == "1"

_ROWS: dict[tuple[str, str], dict[str, Any]] = {}


def _presets_for(arch: str, device: torch.device) -> list[str]:
    if device.type == "cpu" or FULL:
        return PRESETS
    return [PRESETS[ARCHS.index(arch) % len(PRESETS)]]


def _step(model: torch.nn.Module, batch: dict[str, Any], device: torch.device):
    """One training step's loss, named grads (on CPU) and the bytes autograd kept for backward."""
    seed_all(device, 5)
    with xla_ckpt.saved_activations() as kept:
        loss = model(**batch).loss
    loss.backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    grads = [(n, None if p.grad is None else p.grad.cpu()) for n, p in model.named_parameters()]
    return loss.detach().cpu(), grads, kept.nbytes


def _reference(arch: str, base: torch.nn.Module, batch: dict[str, Any], device: torch.device, row: dict):
    """The unwrapped default model's step; on XLA, where torch_xla cannot run it (see above), the nearest
    configuration it runs (said in the row, and used for the presets too)."""
    failed: list[str] = []
    batch = dict(batch)  # wrapped, the cache is off in training: the presets keep the default call
    while True:
        try:
            ref = _step(hf_models.to_device(copy.deepcopy(base), device), batch, device)
            break
        except (RuntimeError, NotImplementedError) as e:
            if "histogram_cpu" in str(e) and "histc" not in failed:
                assert device.type == "xla" and arch in XLA_HISTC_FAILS, e
                failed.append("histc")
                base.set_experts_implementation("eager")
            elif "out of range" in str(e) and "slice" not in failed:
                assert device.type == "xla" and arch in XLA_SLICE_FAILS, e
                failed.append("slice")
                batch["use_cache"] = False
            else:
                raise
    why = {"histc": "torch.histc on int (grouped_mm experts; eager experts here)", "slice": "torch_xla slice"}
    row["default"] = f"fails without xla_ckpt ({'; '.join(why[f] for f in failed)})" if failed else "ok"
    return ref


def _trains(arch: str, device: torch.device, presets: list[str]) -> None:
    base = hf_models.build(arch)
    assert base.config.to_dict().get("use_cache", True) is not False  # the default config, cache on
    batch = hf_models.batch(arch, base, device=device)
    blocks = xla_ckpt.find_blocks(base)
    seq2seq = hf_models.ARCHS[arch][3] == "seq2seq"
    assert len(blocks) == (4 if seq2seq else 2), blocks  # T5, BART: encoder and decoder blocks
    row = _ROWS.setdefault((arch, device.type), {})
    ref_loss, ref_grads, ref_bytes = _reference(arch, base, batch, device, row)
    for preset in presets:
        model = hf_models.to_device(copy.deepcopy(base), device)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # e.g. "rule matched no module" is a failure here
            if arch in OWN_FORWARD_LINEAR:
                warnings.filterwarnings("ignore", r"xla_ckpt\.patch_linear left these nn\.Linear subclasses", UserWarning)
            report = xla_ckpt.apply(model, preset)
        assert sorted(w.name for w in report.wrapped) == sorted(blocks), report
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the once-per-class cache notice
            loss, grads, nbytes = _step(model, batch, device)
        torch.testing.assert_close(loss, ref_loss, msg=lambda m, preset=preset: f"{arch} {preset} loss: {m}")
        diff = 0.0
        assert [n for n, _ in grads] == [n for n, _ in ref_grads]
        for (name, g), (_, r) in zip(grads, ref_grads, strict=True):
            assert r is not None, f"{arch}: reference grad of {name} is None"
            assert g is not None, f"{arch} {preset}: grad of {name} is None"
            torch.testing.assert_close(g, r, msg=lambda m, name=name, preset=preset: f"{arch} {preset} {name}: {m}")
            diff = max(diff, float((g - r).abs().max()))
        ratio = nbytes / ref_bytes
        assert ratio < 1, f"{arch} {preset}: kept {nbytes} bytes, {ref_bytes} without checkpointing"
        row[preset] = (diff, ratio)


# The fast tier trains one architecture (the first: Llama) on both devices; the full table is slow.
@pytest.mark.parametrize("arch", [ARCHS[0], *(pytest.param(a, marks=pytest.mark.slow) for a in ARCHS[1:])])
def test_default_config_trains_through_every_preset(arch, device):
    if device.type == "xla" and arch in XLA_HISTC_FAILS - XLA_MOE_RUN and not MOE_XLA:
        pytest.skip(f"{arch} on XLA:CPU takes minutes (every data-dependent nonzero/where in the eager experts "
                    "runs a graph); Mixtral and GPT-OSS cover the MoE path there. XLA_CKPT_HF_MOE_XLA=1 runs it")
    _trains(arch, device, _presets_for(arch, device))


def test_a_moe_decoder_trains_fast():
    """Fast tier: one mixture-of-experts decoder (Mixtral, ~4 s) on CPU under full recompute."""
    _trains("mixtral", torch.device("cpu"), ["full"])


@pytest.fixture(scope="module", autouse=True)
def _write_table():
    yield
    path = os.environ.get("XLA_CKPT_HF_TABLE")
    if not path or not _ROWS:
        return
    head = ("| architecture | device | default config, no xla_ckpt | "
            + " | ".join(f"`{p}`" for p in TABLE_PRESETS) + " |")
    lines = [head, "|" + "---|" * (3 + len(TABLE_PRESETS))]
    for (arch, dev), row in sorted(_ROWS.items(), key=lambda kv: (ARCHS.index(kv[0][0]), kv[0][1])):
        cells = [f"{row[p][0]:.1e} / x{row[p][1]:.2f}" if p in row else "-" for p in TABLE_PRESETS]
        name = "XLA:CPU" if dev == "xla" else "CPU"
        lines.append(f"| {arch} | {name} | {row.get('default', '-')} | " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- under torch.compile

# DeepSeek-V3 (transformers 5.24, tiny config) fails under torch.compile without xla_ckpt too: Dynamo's
# fake-tensor run of its scaled_dot_product_attention cannot broadcast 4 query heads against 8 key heads
# (torch 2.9). Not the library's to fix; it trains exactly uncompiled (the table above).
COMPILE_FAILS_UNWRAPPED = {"deepseek_v3"}
DECODERS = [a for a, v in hf_models.ARCHS.items() if v[3] == "causal" and a not in COMPILE_FAILS_UNWRAPPED]
FAST_COMPILED = ("llama", "full")  # the fast tier's one compiled model; the whole table is slow


def _compiled_cases():
    """Each decoder compiles under two presets in CI, the presets in turn so that each meets several
    architectures: one on the newest torch, the next on torch 2.9 (`make test-all`); the Llama under `full`
    in the fast tier. ``XLA_CKPT_HF_FULL=1``: every (architecture, preset) pair on torch 2.9."""
    for i, arch in enumerate(DECODERS):
        newest, older = PRESETS[i % len(PRESETS)], PRESETS[(i + 1) % len(PRESETS)]
        for preset in PRESETS:
            if (arch, preset) == FAST_COMPILED:
                marks: tuple[Any, ...] = ()
            elif preset == newest:
                marks = (pytest.mark.slow, pytest.mark.newest_only)
            elif preset == older or FULL:
                marks = (pytest.mark.slow,)
            else:
                continue
            yield pytest.param(arch, preset, marks=marks, id=f"{arch}-{preset}")


@pytest.mark.parametrize("arch,preset", list(_compiled_cases()))
def test_default_config_compiles_to_one_graph(arch, preset):
    """Default config (use_cache=True): ``fullgraph=True`` compiles, one graph, no recompile at step 2.

    Nothing the library does while Dynamo traces (the once-per-class cache notice, its lock, the signature
    cache, the module stack, weights_by_reference's saved-tensor hooks) may break the graph or add a guard
    that fails on the next step. Loss and every grad equal the uncompiled, unwrapped model's.
    """
    import torch._dynamo
    from torch._dynamo.backends.registry import lookup_backend

    base = hf_models.build(arch)
    assert base.config.to_dict().get("use_cache", True) is not False
    if getattr(base, "loss_type", None) is None:
        # transformers' loss_function logs "loss_type=None ... unrecognized" through logger.warning_once, which
        # Dynamo cannot trace (GPT-2: fullgraph fails without xla_ckpt too); naming the default loss silences it.
        base.loss_type = "ForCausalLM"
    batch = hf_models.batch(arch, base)
    ref_loss, ref_grads, _ = _step(copy.deepcopy(base), batch, torch.device("cpu"))
    model = copy.deepcopy(base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the old-torch notice of the compiled lowering
        xla_ckpt.apply(model, preset)
        graphs = []

        def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            # aot_eager, not "eager": torch 2.9's selective checkpoint under the plain eager backend
            # recomputes dropout with other random numbers (wrong grads, plain torch too).
            graphs.append(gm)
            return lookup_backend("aot_eager")(gm, example_inputs)

        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend=backend)
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(5)
            loss = compiled(**batch).loss
            loss.backward()
    assert len(graphs) == 1, f"{arch} {preset}: {len(graphs)} graphs over two steps (a recompile)"
    torch.testing.assert_close(loss.detach(), ref_loss)
    for (name, p), (_, r) in zip(model.named_parameters(), ref_grads, strict=True):
        assert p.grad is not None, f"{arch} {preset}: grad of {name} is None"
        torch.testing.assert_close(p.grad, r, msg=lambda m, name=name, preset=preset: f"{arch} {preset} {name}: {m}")
