"""A stack of GPT blocks and its gradients, for the ``scan_layers`` tests: the scan against the plain loop.

Example::

    layers = gpt_layers(2, xla_device)
    assert_same(layer_grads(layers, x, unrolled(layers)), layer_grads(layers, x, lambda h: scan_layers(layers, h)))
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from xla_ckpt.models import Block, GPTConfig


def gpt_layers(n: int, device: torch.device, d: int = 32) -> nn.ModuleList:
    """``n`` demo GPT blocks of width ``d`` (seeded: the same weights on every call) on ``device``."""
    torch.manual_seed(0)
    return nn.ModuleList(Block(GPTConfig(d_model=d, n_head=2, seq_len=16)) for _ in range(n)).to(device)


def layer_grads(layers: nn.ModuleList, x: torch.Tensor, f) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """``f(x)`` and, after a backward of its squares' sum, the grads of ``x`` and every layer parameter (XLA)."""
    import torch_xla

    for t in [x, *layers.parameters()]:
        t.grad = None
    y = f(x)
    y.square().sum().backward()
    torch_xla.sync()
    return [y.detach()], [t.grad for t in [x, *layers.parameters()]]


def unrolled(layers: nn.ModuleList) -> Callable[[torch.Tensor], torch.Tensor]:
    """The layers applied one after another, as a plain loop (the reference for a scan)."""
    def f(h):
        for layer in layers:
            h = layer(h)
        return h

    return f
