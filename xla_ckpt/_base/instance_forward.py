"""An instance-level ``forward`` that wrappers inspecting ``module.forward`` still take for the module's method.

The library replaces a module's ``forward`` per instance (a checkpointed module, a corrected Linear or
LayerNorm outside the regions): ``state_dict`` keys, ``repr`` and pickling stay the module's own. FSDP
wrappers (torch_xla's FSDPv2 and XLA FSDP, torch's FSDP2) check that ``module.forward`` is a method by its
``__func__`` / ``__self__`` (without them FSDPv2 refuses ``apply(model, "fsdp_xla")``).
"""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

__all__ = ["InstanceForward"]


class InstanceForward:
    """Base of a callable set as ``module.forward``: looks like the bound method it stands for.

    Args:
        module: the module whose ``forward`` this object is.

    Example:
        >>> class Logged(InstanceForward):
        ...     def __call__(self, x):
        ...         return type(self.module).forward(self.module, x)
        >>> m.forward = Logged(m)
        >>> m.forward.__func__ is type(m).forward
        True
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    @property
    def __self__(self) -> nn.Module:
        return self.module

    @property
    def __func__(self) -> Callable[..., Any]:
        return type(self.module).forward
