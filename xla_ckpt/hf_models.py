"""Small Hugging Face models of 22 architectures (8 mixture-of-experts decoders), from their default configs
(random init, nothing downloaded).

For ``python -m xla_ckpt explain --model ARCH``, ``bench/memory.py --model ARCH`` and the tests. Only
sizes are set; everything else, ``use_cache=True`` and dropout included, is the config class's
default, as a user meets it. Needs ``transformers`` (the ``test``/``bench`` extras).

Example:
    >>> model = xla_ckpt.hf_models.build("mistral", d_model=64, n_layer=2, n_head=4, seq_len=32)
    >>> loss = model(**xla_ckpt.hf_models.batch("mistral", model, batch=2, seq_len=32)).loss
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional

import torch
from torch import nn

__all__ = ["ARCHS", "build", "batch", "to_device", "causal_lm_types"]


def _decoder(d: int, n_layer: int, n_head: int, seq: int, vocab: int, head_dim: bool = False) -> dict[str, Any]:
    kw = dict(vocab_size=vocab, hidden_size=d, intermediate_size=2 * d, num_hidden_layers=n_layer,
              num_attention_heads=n_head, num_key_value_heads=max(1, n_head // 2), max_position_embeddings=seq)
    if head_dim:  # Gemma and Qwen3 default to a fixed head_dim (256, 128) whatever the hidden size
        kw["head_dim"] = d // n_head
    return kw


def _encoder(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
    return dict(vocab_size=vocab, hidden_size=d, intermediate_size=2 * d, num_hidden_layers=n_layer,
                num_attention_heads=n_head, max_position_embeddings=seq)


def _gpt2(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
    return dict(vocab_size=vocab, n_embd=d, n_layer=n_layer, n_head=n_head, n_positions=seq)


def _t5(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
    # decoder_start_token_id: t5-small's (0); the bare config has none and labels cannot be shifted.
    return dict(vocab_size=vocab, d_model=d, d_kv=d // n_head, d_ff=2 * d, num_layers=n_layer,
                num_decoder_layers=n_layer, num_heads=n_head, decoder_start_token_id=0)


def _vit(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
    # seq patches of 4x4 pixels: a square image of ceil(sqrt(seq)) patches a side.
    return dict(hidden_size=d, intermediate_size=2 * d, num_hidden_layers=n_layer, num_attention_heads=n_head,
                patch_size=4, image_size=4 * math.ceil(math.sqrt(seq)))


# Mixture-of-experts decoders: 4 experts, top-2 routing (the defaults route to 2-8 of 8-256), each expert
# as wide as a dense MLP here; every other field (router noise, aux loss, shared experts) is the default.
_EXPERTS = {"num_experts_per_tok": 2}


def _moe(key: str, **extra: Any) -> Callable[..., dict[str, Any]]:
    def sizes(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
        return {**_decoder(d, n_layer, n_head, seq, vocab), key: 4, **_EXPERTS,
                **{k: (2 * d if v == "2d" else d // n_head if v == "head" else v) for k, v in extra.items()}}
    return sizes


def _deepseek_v3(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
    # Multi-head latent attention at small ranks; layer 0 dense, the rest MoE (the default: 3 dense of 61).
    head = d // n_head
    return {**_decoder(d, n_layer, n_head, seq, vocab), "moe_intermediate_size": 2 * d, "n_routed_experts": 4,
            **_EXPERTS, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1, "kv_lora_rank": d // 2,
            "q_lora_rank": d // 2, "qk_rope_head_dim": head // 2, "qk_nope_head_dim": head // 2, "v_head_dim": head}


def _bart(d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> dict[str, Any]:
    return dict(vocab_size=vocab, d_model=d, encoder_layers=n_layer, decoder_layers=n_layer, encoder_ffn_dim=2 * d,
                decoder_ffn_dim=2 * d, encoder_attention_heads=n_head, decoder_attention_heads=n_head,
                max_position_embeddings=seq)


# name -> (config class, model class, sizes -> config kwargs, input kind)
ARCHS: dict[str, tuple[str, str, Callable[..., dict[str, Any]], str]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", _decoder, "causal"),
    "mistral": ("MistralConfig", "MistralForCausalLM", _decoder, "causal"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", _decoder, "causal"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", functools.partial(_decoder, head_dim=True), "causal"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", functools.partial(_decoder, head_dim=True), "causal"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", functools.partial(_decoder, head_dim=True), "causal"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", functools.partial(_decoder, head_dim=True), "causal"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", _decoder, "causal"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", _gpt2, "causal"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", _encoder, "causal"),
    "bert": ("BertConfig", "BertForMaskedLM", _encoder, "masked"),
    "t5": ("T5Config", "T5ForConditionalGeneration", _t5, "seq2seq"),
    "bart": ("BartConfig", "BartForConditionalGeneration", _bart, "seq2seq"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", _moe("num_local_experts"), "causal"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", _moe("num_experts"), "causal"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  _moe("num_experts", moe_intermediate_size="2d", shared_expert_intermediate_size="2d"), "causal"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", _moe("num_experts", moe_intermediate_size="2d",
                                                                 head_dim="head"), "causal"),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM", _moe("num_local_experts"), "causal"),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", _moe("num_local_experts"), "causal"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", _moe("num_local_experts", head_dim="head"), "causal"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", _deepseek_v3, "causal"),
    "vit": ("ViTConfig", "ViTForImageClassification", _vit, "image"),
}


def _small_tokens(cfg: Any, vocab_size: int) -> None:
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        token = getattr(cfg, name, None)
        if isinstance(token, int) and token >= vocab_size:  # e.g. Phi3's pad 32000: inside our small vocab
            setattr(cfg, name, vocab_size - 1)


def _fix_tokens(model: nn.Module, vocab_size: int) -> nn.Module:
    _small_tokens(model.config, vocab_size)
    return model


def to_device(model: nn.Module, device: Any) -> nn.Module:
    """``model.to(device)`` with tied weights tied again (moving to XLA unties them: T5, Gemma, GPT-2, BERT)."""
    model = model.to(device)
    tie = getattr(model, "tie_weights", None)
    if tie is not None:
        tie()
    return model


def causal_lm_types() -> list[str]:
    """Every causal-LM ``model_type`` the installed transformers knows (``AutoModelForCausalLM``'s table)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: PLC0415

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


# Sizes a tiny model of any architecture gets when the config has them (MoE expert counts and widths
# included: a default of 60 experts x 1408 wide is most of a "tiny" model's bytes).
_SMALL = {"num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
          "moe_intermediate_size": None, "shared_expert_intermediate_size": None, "first_k_dense_replace": 0}


def _build_any(model_type: str, d: int, n_layer: int, n_head: int, seq: int, vocab: int) -> nn.Module:
    """A causal LM of ``model_type`` from its default config with our sizes (``AutoModelForCausalLM``)."""
    import transformers  # noqa: PLC0415

    if model_type not in causal_lm_types():
        raise ValueError(f"unknown architecture {model_type!r}: neither one of {', '.join(ARCHS)} nor a causal-LM "
                         f"model_type of transformers {transformers.__version__} (see hf_models.causal_lm_types())")
    sizes = _decoder(d, n_layer, n_head, seq, vocab, head_dim=True)
    error: Exception = ValueError("no attempt")
    # Some configs derive head_dim or the KV heads themselves (a read-only property): retry without them.
    for drop in ((), ("head_dim",), ("head_dim", "num_key_value_heads")):
        try:
            cfg = transformers.AutoConfig.for_model(model_type, **{k: v for k, v in sizes.items() if k not in drop})
            for name, value in _SMALL.items():
                if isinstance(getattr(cfg, name, None), int):
                    setattr(cfg, name, 2 * d if value is None else min(value, getattr(cfg, name)))
            return transformers.AutoModelForCausalLM.from_config(cfg)
        except Exception as e:  # noqa: PERF203  (a composite or unusual config: try fewer sizes, then say why)
            error = e
    raise ValueError(f"cannot build a small {model_type!r} causal LM from its default config with d_model={d}, "
                     f"n_layer={n_layer}, n_head={n_head}: {type(error).__name__}: {str(error)[:300]}") from error


def build(arch: str, d_model: int = 32, n_layer: int = 2, n_head: int = 4, seq_len: int = 16,
          vocab_size: int = 128, seed: Optional[int] = 0) -> nn.Module:
    """A ``arch`` model in train mode with random weights; only the sizes differ from the config's defaults.

    ``arch``: a name of :data:`ARCHS`, or any causal-LM ``model_type`` of the installed transformers
    (:func:`causal_lm_types`, e.g. ``"mixtral"``), built through ``AutoModelForCausalLM.from_config``.
    """
    if arch not in ARCHS:
        if seed is not None:
            torch.manual_seed(seed)
        return _fix_tokens(_build_any(arch, d_model, n_layer, n_head, seq_len, vocab_size), vocab_size).train()
    import transformers  # noqa: PLC0415

    cfg_cls, model_cls, sizes, _ = ARCHS[arch]
    cfg = getattr(transformers, cfg_cls)(**sizes(d_model, n_layer, n_head, seq_len, vocab_size))
    _small_tokens(cfg, vocab_size)
    if seed is not None:
        torch.manual_seed(seed)
    return getattr(transformers, model_cls)(cfg).train()


def batch(arch: str, model: nn.Module, batch: int = 2, seq_len: int = 16, vocab_size: int = 128,
          seed: int = 1, device: Any = None) -> dict[str, torch.Tensor]:
    """Keyword inputs for one training step of ``model`` (they include ``labels``, so ``.loss`` is set)."""
    kind = ARCHS[arch][3] if arch in ARCHS else "causal"
    g = torch.Generator().manual_seed(seed)
    if kind == "image":
        cfg: Any = model.config
        out = {"pixel_values": torch.randn(batch, cfg.num_channels, cfg.image_size, cfg.image_size, generator=g),
               "labels": torch.randint(0, cfg.num_labels, (batch,), generator=g)}
    else:
        ids = torch.randint(0, vocab_size, (batch, seq_len), generator=g)
        out = {"input_ids": ids, "labels": ids.clone()}
    return {k: v.to(device) for k, v in out.items()} if device is not None else out
