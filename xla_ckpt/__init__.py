"""xla_ckpt: selective activation checkpointing for PyTorch/XLA and eager PyTorch."""

from xla_ckpt import policies
from xla_ckpt._apply import ApplyReport, Wrapped, apply
from xla_ckpt._blocks import find_blocks
from xla_ckpt._config import Config, ConfigError, PolicySpec, Rule, load_config, presets
from xla_ckpt._engine import CheckpointError, checkpoint
from xla_ckpt._estimate import Estimate, estimate, meta_copy
from xla_ckpt._fit import FitReport, FitRow, fit
from xla_ckpt._scale import estimate_layers
from xla_ckpt._linear import Linear, linear, linear_patched, patch_linear, unpatch_linear
from xla_ckpt._plan import Cost, Planner, RegionView
from xla_ckpt._policy import Decision, OpCall, Policy
from xla_ckpt._report import SavedEntry, SavedReport, saved_activations
from xla_ckpt._saved import weights_by_reference
from xla_ckpt._scan import scan_layers
from xla_ckpt._tag import tag
from xla_ckpt._wrap import checkpointed, uncheckpointed

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
__version__ = "0.1.0"
