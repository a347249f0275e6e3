"""A small GPT-style decoder (nanoGPT-shaped) for demos, the benchmark and the tests.

Not a training library: just a readable transformer whose values are tagged by meaning
(``qkv``, ``attn_scores``, ``attn_out``, ``mlp_up``, ...), so name-based policies can be shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from xla_ckpt._api.tag import tag

__all__ = ["GPTConfig", "Block", "GPT"]


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 512
    seq_len: int = 128
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    dropout: float = 0.0
    bias: bool = True


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        qkv = tag(self.qkv(x), "qkv")
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        # Explicit attention (not SDPA) so the score matmuls are visible, batched ops for policies.
        scores = tag((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))), "attn_scores")
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        probs = self.attn_drop(F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1))
        y = tag(probs @ v, "attn_out").transpose(1, 2).reshape(B, T, C)
        return self.resid_drop(self.proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias)
        self.down = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = tag(self.up(x), "mlp_up")
        return self.drop(self.down(F.gelu(h)))


class Block(nn.Module):
    """Pre-norm transformer block: attention and MLP with residuals."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embedding, ``n_layer`` blocks, final norm, LM head."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits, or the mean cross-entropy loss when ``targets`` is given."""
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.layers:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))


def llama_hf(
    vocab_size: int = 512, d_model: int = 128, n_layer: int = 4, n_head: int = 4, seq_len: int = 128
) -> nn.Module:
    """A small Hugging Face ``LlamaForCausalLM`` from a ``LlamaConfig`` (random init, nothing downloaded).

    Needs ``transformers`` (the ``test``/``bench`` extras).
    """
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    cfg = LlamaConfig(  # type: ignore[call-arg]  # attn_implementation: a PretrainedConfig keyword
        vocab_size=vocab_size,
        hidden_size=d_model,
        intermediate_size=4 * d_model,
        num_hidden_layers=n_layer,
        num_attention_heads=n_head,
        num_key_value_heads=n_head,
        max_position_embeddings=seq_len,
        attn_implementation="eager",
        use_cache=False,
    )
    return LlamaForCausalLM(cfg)
