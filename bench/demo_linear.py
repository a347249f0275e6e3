"""Tiny demo: what autograd keeps for stock nn.Linear vs xla_ckpt.linear (XLA:CPU or CPU)."""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

import xla_ckpt


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", choices=["xla", "cpu"], default="xla")
    args = p.parse_args()
    if args.device == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla

        device = torch_xla.device()
    else:
        device = torch.device("cpu")
    lin = nn.Linear(256, 1024).to(device)
    x = torch.randn(8, 256, device=device, requires_grad=True)
    for name, fn in [("nn.Linear", lin), ("xla_ckpt.linear", xla_ckpt.Linear.from_linear(lin))]:
        y = fn(x)
        node = y.grad_fn
        saved = [getattr(node, a) for a in dir(node) if a.startswith("_saved_") and isinstance(getattr(node, a), torch.Tensor)]
        if not saved:
            saved = list(node.saved_tensors)
        for t in saved:
            what = "the weight itself" if t is lin.weight else ("input" if t is x else "a separate tensor")
            print(f"{name:16s} {type(node).__name__:28s} saves {tuple(t.shape)!s:12s} {t.dtype}  -> {what}")


if __name__ == "__main__":
    main()
