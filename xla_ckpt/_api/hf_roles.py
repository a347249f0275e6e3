"""Hugging Face projections tagged by role, so that name policies act on HF models as on tagged ones.

A model of our own names its values with :func:`xla_ckpt.tag` in its forward (``xla_ckpt.models``:
``qkv``, ``mlp_up``). Hugging Face's forwards cannot be edited, but their projections are modules with
names each architecture keeps stable (Llama's ``q_proj`` ... ``down_proj``, GPT-2's ``c_attn`` /
``c_proj`` / ``c_fc``, BERT's ``query`` / ``key`` / ``value`` / ``dense``), so the role of each linear
layer is read from its attribute name and the class that holds it. :func:`tag_roles` puts a forward
hook on each such layer inside the checkpointed modules that tags its output, as ``xla_ckpt.tag``
would in the forward: ``state_dict`` keys, ``repr`` and every forward's signature stay as they were,
and values and gradients are unchanged (a tag is an identity; it only lets a policy pick the value).

Roles and their tag names (those of ``xla_ckpt.models`` where the role is the same):

========== ==========================================================================
``qkv``     query / key / value projections, fused or not (and DeepSeek's low-rank ones)
``attn_proj`` the attention's output projection
``mlp_up``  the MLP's up projection (Phi-3's fused gate-and-up projection too)
``mlp_gate`` the gated MLP's gate projection (Llama's ``gate_proj``, T5's ``wi_0``)
``mlp_down`` the MLP's down projection
``router``  a mixture-of-experts router that is a linear layer
========== ==========================================================================

Only a layer whose output *is* the projection is tagged (an ``nn.Linear`` running ``nn.Linear.forward``, GPT-2's
``Conv1D``): experts held as stacked weight tensors (transformers 5's ``MixtralExperts``) and router modules
that return a tuple (transformers 5's ``*TopKRouter``) are not, and keep what the policy gives untagged
values.

Nothing here imports ``transformers``: HF classes are recognised by the module they are defined in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

import torch
from torch import nn

from xla_ckpt._api.tag import tag

__all__ = ["ROLES", "RoleTag", "role_of", "tag_roles", "untag_roles"]

# The classes that hold each kind of projection, by the end of their name (LlamaAttention, BertSelfAttention,
# LlamaFlashAttention2; LlamaMLP, T5DenseActDense; BertIntermediate; BertOutput; BartEncoderLayer).
_ATTENTION = re.compile(r"Attention\d*$")
_MLP = re.compile(r"(MLP|Mlp|DenseActDense|DenseGatedActDense|FeedForward|Expert)$")
_LAYER = re.compile(r"Layer$")  # BART / Whisper / OPT keep fc1 and fc2 on the layer itself
_MOE = re.compile(r"(SparseMoeBlock|MoeBlock|MoE|Moe|MoELayer)$")

# (attribute names, pattern of the holding class's name, tag): the first row that matches names the role.
ROLES: tuple[tuple[frozenset[str], "re.Pattern[str]", str], ...] = (
    (frozenset({"q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "c_attn", "query", "key", "value",
                "q", "k", "v", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "Wqkv", "W_pack"}),
     _ATTENTION, "qkv"),
    (frozenset({"o_proj", "out_proj", "dense", "c_proj", "o", "proj"}), _ATTENTION, "attn_proj"),
    (frozenset({"dense"}), re.compile(r"SelfOutput$"), "attn_proj"),
    (frozenset({"dense"}), re.compile(r"Intermediate$"), "mlp_up"),
    (frozenset({"dense"}), re.compile(r"(?<!Self)Output$"), "mlp_down"),
    (frozenset({"up_proj", "gate_up_proj", "c_fc", "fc1", "dense_h_to_4h", "wi", "wi_1", "w3"}), _MLP, "mlp_up"),
    (frozenset({"gate_proj", "wi_0", "w1"}), _MLP, "mlp_gate"),
    (frozenset({"down_proj", "c_proj", "fc2", "dense_4h_to_h", "wo", "w2"}), _MLP, "mlp_down"),
    (frozenset({"fc1"}), _LAYER, "mlp_up"),
    (frozenset({"fc2"}), _LAYER, "mlp_down"),
    (frozenset({"gate", "router"}), _MOE, "router"),
)


@dataclass(frozen=True)
class RoleTag:
    """The forward hook that tags a projection's output with its role (picklable, deep-copyable).

    The library's own hook: module hooks inside a region run unguarded (``_hooks.user_hooks``), so the
    region sees the tag on the op that made the output, as with ``xla_ckpt.tag`` in a forward.
    """

    name: str
    xla_ckpt_own = True  # read by _hooks.user_hooks: run as part of the computation, not as a user's hook

    def __call__(self, module: nn.Module, args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor):
            tag(output, self.name)


def _linear_like(m: nn.Module) -> bool:
    # nn.Linear's own forward: a subclass with another may not return the projection (PhiMoE's router returns
    # a tuple). transformers' Conv1D (GPT-2) is a linear layer with a transposed weight.
    if isinstance(m, nn.Linear):
        return type(m).forward is nn.Linear.forward
    return type(m).__name__ == "Conv1D" and _from_transformers(type(m))


def _from_transformers(cls: type) -> bool:
    return cls.__module__.startswith("transformers.")


def role_of(attr: str, parent: nn.Module, module: nn.Module) -> str | None:
    """The role tag of ``module``, held by ``parent`` as ``attr``, or None (not a known HF projection).

    Example:
        >>> role_of("q_proj", model.model.layers[0].self_attn, model.model.layers[0].self_attn.q_proj)
        'qkv'
    """
    cls = type(parent)
    if not _linear_like(module) or not _from_transformers(cls):
        return None
    for attrs, holder, name in ROLES:
        if attr in attrs and holder.search(cls.__name__):
            return name
    return None


def untag_roles(model: nn.Module) -> None:
    """Remove every role hook :func:`tag_roles` put on ``model``."""
    for m in model.modules():
        for key in [k for k, h in m._forward_hooks.items() if isinstance(h, RoleTag)]:
            del m._forward_hooks[key]


def tag_roles(model: nn.Module, wrapped: Iterable[str]) -> dict[str, str]:
    """Tag the known HF projections inside the modules ``wrapped`` (names below ``model``) by role.

    Replaces the role hooks of an earlier call (none are left on modules no longer wrapped).

    Returns module name -> tag, in module order.

    Example:
        >>> tag_roles(llama, ["model.layers.0"])["model.layers.0.self_attn.q_proj"]
        'qkv'
    """
    untag_roles(model)
    tagged: dict[str, str] = {}
    for top in wrapped:
        root = model.get_submodule(top)
        for name, parent in root.named_modules():
            for attr, child in parent.named_children():
                role = role_of(attr, parent, child)
                if role is None or any(isinstance(h, RoleTag) for h in child._forward_hooks.values()):
                    continue
                child.register_forward_hook(RoleTag(role))
                tagged[".".join(p for p in (top, name, attr) if p)] = role
    return tagged
