"""A Hugging Face model config in any form a user holds it, and meta models of any depth built from it.

``fit`` and ``estimate`` take what users have at hand: a transformers config object (``LlamaConfig(...)``,
``AutoConfig.from_pretrained(...)``), a ``config.json`` path or its folder, a Hub id
(``meta-llama/Meta-Llama-3-8B``, read through transformers), or the dict a ``config.json`` holds. Every
form becomes that dict, so a config object and the file it saves give the same model.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from typing import Any, Callable, Mapping

import torch
from torch import nn

__all__ = ["ACCEPTED", "hf_config_data", "hf_builder", "hf_meta_model", "is_hf_config"]

ACCEPTED = ("a transformers config object (LlamaConfig(...), AutoConfig.from_pretrained(...)), a config.json "
            "path or its folder, a Hugging Face Hub id ('meta-llama/Meta-Llama-3-8B'), or the dict a config.json "
            "holds")
# A Hub repository id: "name" or "namespace/name". A string with more slashes, a leading "." or "/", or a
# ".json" ending is a path, so a mistyped path says "no such file" rather than asking the Hub.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def is_hf_config(obj: Any) -> bool:
    """Whether ``obj`` is a transformers config object (without importing transformers: if it is one,
    transformers is imported already)."""
    tf = sys.modules.get("transformers")
    return tf is not None and isinstance(obj, tf.PretrainedConfig)


def _object_data(config: Any) -> dict[str, Any]:
    data = config.to_dict()
    # The attention implementation is not among to_dict's fields, and it decides what attention keeps.
    attn = getattr(config, "_attn_implementation", None)
    if attn is not None:
        data["attn_implementation"] = attn
    return data


def _from_hub(repo_id: str, who: str) -> Any:
    import transformers  # noqa: PLC0415

    # The Hub client logs each retry; the one error below says what happened and what to do instead.
    hub_logs = [logging.getLogger(name) for name in ("huggingface_hub", "transformers")]
    levels = [log.level for log in hub_logs]
    try:
        for log in hub_logs:
            log.setLevel(logging.ERROR)
        return transformers.AutoConfig.from_pretrained(repo_id)
    except Exception as e:  # noqa: BLE001 - any failure of the Hub or of the download is the same answer
        reason = " ".join(str(e).split())
        reason = reason.split(". ")[0].rstrip(".")  # the first sentence: the rest is the Hub's advice
        reason = reason if len(reason) <= 200 else reason[:197] + "..."
        raise OSError(
            f"{who}: {repo_id!r} is not a file or folder here, and the Hugging Face Hub did not give its config "
            f"({type(e).__name__}: {reason}). Pass a local path instead: the model's config.json or a folder "
            f"holding it (`hf download {repo_id} config.json` fetches it where there is a network)."
        ) from e
    finally:
        for log, level in zip(hub_logs, levels, strict=True):
            log.setLevel(level)


def hf_config_data(config: Any, who: str = "fit") -> tuple[dict[str, Any], str]:
    """The ``config.json`` data of ``config`` and a name for reports.

    Args:
        config: a transformers config object, a ``config.json`` path or its folder, a Hub id, or a dict.
        who: the caller, named in errors.

    A string naming no file or folder that has the form of a Hub id is read with
    ``transformers.AutoConfig.from_pretrained``; offline, or on any Hub failure, an ``OSError`` names the
    id and the local-path alternative. Any other type is a ``TypeError`` naming what is accepted.

    Example:
        >>> data, name = hf_config_data(LlamaConfig(num_hidden_layers=4))
    """
    if isinstance(config, Mapping):
        data, name = dict(config), None
    elif isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if isinstance(path, bytes) or not isinstance(path, str):
            raise TypeError(f"{who}: a config path must be text, got {type(path).__name__}")
        if os.path.exists(path):
            path = os.path.join(path, "config.json") if os.path.isdir(path) else path
            with open(path, encoding="utf-8") as f:
                data, name = json.load(f), None
            if not isinstance(data, dict):
                raise ValueError(f"{who}: {path} holds a JSON {type(data).__name__}, not a config object")
        elif isinstance(config, str) and _HUB_ID.fullmatch(path) and not path.endswith(".json"):
            obj = _from_hub(path, who)
            data, name = _object_data(obj), path
        else:
            raise FileNotFoundError(f"{who}: no file or folder {path!r} (a Hub id has the form 'namespace/name', "
                                    "e.g. meta-llama/Meta-Llama-3-8B)")
    else:
        if not is_hf_config(config):
            raise TypeError(f"{who}: expected {ACCEPTED}; got {type(config).__module__}.{type(config).__qualname__}")
        data, name = _object_data(config), getattr(config, "name_or_path", None) or None
    if "model_type" not in data:
        raise ValueError(f"{who}: the Hugging Face config has no 'model_type' (llama, mistral, ...); add it")
    return data, name or data.get("_name_or_path") or data["model_type"]


def _period(cfg: Any) -> int:
    types = getattr(cfg, "layer_types", None)
    if not types:
        return 1
    return next(p for p in range(1, len(types) + 1) if all(t == types[i % p] for i, t in enumerate(types)))


def hf_meta_model(data: Mapping[str, Any]) -> nn.Module:
    """The causal LM ``AutoModelForCausalLM.from_config`` builds from ``data``, on meta, in training mode.

    The key/value cache is off (``use_cache=False``), as in a training step: with the cache on, a
    checkpointed layer turns it off and says so, which is noise for a model built here.
    """
    import transformers  # noqa: PLC0415

    cfg = transformers.AutoConfig.for_model(**{**data, "use_cache": False})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    return model.train()


def hf_builder(config: Any, batch: int, seq: int, dtype: torch.dtype,
               who: str = "fit") -> tuple[Callable[[int], tuple[nn.Module, tuple, dict]], int, int, str]:
    """``(n -> meta model of n layers with inputs, layers, period, name)`` from a Hugging Face config.

    ``config``: any form :func:`hf_config_data` takes.

    Example:
        >>> build, n_layers, period, name = hf_builder(LlamaConfig(), batch=1, seq=4096, dtype=torch.bfloat16)
    """
    import transformers  # noqa: PLC0415

    data, name = hf_config_data(config, who)
    base = transformers.AutoConfig.for_model(**data)
    n_layers, period = int(base.num_hidden_layers), _period(base)
    types = list(getattr(base, "layer_types", None) or [])

    def build(n: int) -> tuple[nn.Module, tuple, dict]:
        extra = {"layer_types": types[:n]} if types else {}
        model = hf_meta_model({**data, "num_hidden_layers": n, **extra}).to(dtype)
        ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
        return model, (), {"input_ids": ids, "labels": ids}

    return build, n_layers, period, name
