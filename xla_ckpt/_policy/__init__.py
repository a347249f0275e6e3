"""Policies: pure values ``(OpCall) -> Decision`` and the one registry of their names.

Importing the package registers every built-in name (each module registers its own).
"""

from xla_ckpt._policy import budget, builtin, combine, offload  # noqa: F401  (each registers its names)
