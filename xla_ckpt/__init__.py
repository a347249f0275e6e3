"""xla_ckpt: selective activation checkpointing for PyTorch/XLA and eager PyTorch."""

import importlib
from typing import Any

from xla_ckpt._base.version import __version__ as __version__
from xla_ckpt import policies
from xla_ckpt._api.apply import ApplyReport, Wrapped, apply
from xla_ckpt._api.blocks import find_blocks
from xla_ckpt._api.config import Config, ConfigError, PolicySpec, Rule
from xla_ckpt._api.config_load import load_config, presets
from xla_ckpt._base.errors import CheckpointError, PolicyError
from xla_ckpt._api.checkpoint import checkpoint
from xla_ckpt._estimate.estimate import Estimate, estimate, meta_copy
from xla_ckpt._estimate.fit import FitReport, FitRow, fit
from xla_ckpt._estimate.scale import estimate_layers
from xla_ckpt._ops.linear import Linear, linear, linear_patched, patch_linear, unpatch_linear
from xla_ckpt._policy.plan import Cost, Planner, RegionView
from xla_ckpt._record.opcall import Decision, OpCall, Policy
from xla_ckpt._hooks.report import SavedEntry, SavedReport, saved_activations
from xla_ckpt._hooks.saved import weights_by_reference
from xla_ckpt._api.scan import scan_layers
from xla_ckpt._api.tag import tag
from xla_ckpt._api.wrap import checkpointed, uncheckpointed

__all__ = [
    "ApplyReport",
    "Config",
    "ConfigError",
    "PolicySpec",
    "Rule",
    "Wrapped",
    "apply",
    "checkpointed",
    "find_blocks",
    "load_config",
    "presets",
    "uncheckpointed",
    "CheckpointError",
    "PolicyError",
    "Decision",
    "OpCall",
    "Policy",
    "Planner",
    "RegionView",
    "Cost",
    "checkpoint",
    "Estimate",
    "estimate",
    "meta_copy",
    "estimate_layers",
    "fit",
    "FitReport",
    "FitRow",
    "policies",
    "Linear",
    "SavedEntry",
    "SavedReport",
    "linear",
    "linear_patched",
    "patch_linear",
    "saved_activations",
    "scan_layers",
    "tag",
    "unpatch_linear",
    "weights_by_reference",
]

# Submodules imported on first use: ``xla_ckpt.hf_models`` works after ``import xla_ckpt`` while
# ``import xla_ckpt`` itself imports neither transformers nor the example models.
_LAZY = ("hf_models", "models")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
