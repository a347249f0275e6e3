"""State a recomputation must reproduce or depend on: RNG, autocast, and (XLA) the gradient fence."""

from __future__ import annotations

from typing import Any

import torch

from xla_ckpt import _xla

__all__ = ["Fence", "RNGState", "autocast_state", "devices"]


def devices(tensors: list[torch.Tensor]) -> list[torch.device]:
    return list(dict.fromkeys(t.device for t in tensors))


class RNGState:
    """RNG states of the CPU and of each CUDA/XLA device among the inputs."""

    def __init__(self, devices: list[torch.device]) -> None:
        self.cpu = torch.get_rng_state()
        self.devices = {d: self._get(d) for d in devices if d.type in ("cuda", "xla")}

    @staticmethod
    def _get(d: torch.device) -> Any:
        return torch.cuda.get_rng_state(d) if d.type == "cuda" else _xla.get_rng_state(d)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        for d, s in self.devices.items():
            if d.type == "cuda":
                torch.cuda.set_rng_state(s, d)
            else:
                _xla.set_rng_state(s, d)


def autocast_state(devices: list[torch.device]) -> list[tuple[str, bool, torch.dtype]]:
    types = list(dict.fromkeys(["cpu"] + [d.type for d in devices]))
    return [(t, torch.is_autocast_enabled(t), torch.get_autocast_dtype(t)) for t in types]


class Fence:
    """A zero that depends on the incoming gradient: ``where(s != s, s, 0)`` for one element ``s``.

    Added to each tensor the recomputation starts from (region inputs, replayed saved outputs), it
    makes the recompute depend on the gradient, so XLA can neither merge it with the forward (the
    operands differ) nor hoist it before the gradient arrives. Zero unless the gradient is NaN,
    where it keeps NaN (``s * 0`` would turn an infinite gradient into NaN). Cost: one scalar read
    and one elementwise add per fenced tensor. XLA:CPU drops ``optimization_barrier`` before
    scheduling (its ``cse_barrier_expander`` pass), so the barrier alone does not hold there.
    """

    def __init__(self, grad: torch.Tensor) -> None:
        s = grad.detach().reshape(-1)[0]
        self.zero = torch.where(s != s, s, torch.zeros_like(s))
        self._by_dtype: dict[torch.dtype, torch.Tensor] = {}

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point():
            return t
        z = self._by_dtype.get(t.dtype)
        if z is None:
            z = self._by_dtype[t.dtype] = self.zero.to(t.dtype)
        return t + z
