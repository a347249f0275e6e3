"""xla_ckpt: selective activation checkpointing for PyTorch/XLA and eager PyTorch."""

from xla_ckpt._linear import Linear, linear, linear_patched, patch_linear, unpatch_linear

__all__ = [
    "Linear",
    "linear",
    "linear_patched",
    "patch_linear",
    "unpatch_linear",
]
__version__ = "0.1.0"
