"""XLA FSDP (world size 1) with its own linear patch off and our hooks/linear on: prints a JSON line.

Run in a fresh process: python tests/probes/xla_fsdp_probe.py {hooks|linear}
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    mode = sys.argv[1]
    os.environ["PJRT_DEVICE"] = "CPU"
    import torch
    import torch_xla
    from torch import nn
    from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

    import xla_ckpt

    dev = torch_xla.device()
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    x_cpu = torch.randn(4, 16)
    ref(x_cpu).square().sum().backward()
    ref_grads = [p.grad.clone() for p in ref.parameters()]

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    if mode in ("linear", "policy"):
        xla_ckpt.patch_linear(model)
    if mode == "policy":  # corrected linear + a checkpoint policy inside the FSDP-wrapped module
        xla_ckpt.checkpointed(model, policy="nothing_saveable")
    model = FSDP(model.to(dev), _use_xla_patched_linear=False, flatten_parameters=False)
    x = x_cpu.to(dev)
    with xla_ckpt.saved_activations() as report:
        if mode == "hooks":
            with xla_ckpt.weights_by_reference():
                y = model(x)
        else:
            y = model(x)
    full_shapes = {(32, 16), (16, 32), (8, 32), (32, 8)}
    held = [list(e.shape) for e in report.entries if e.kind == "parameter copy" or
            (e.kind == "activation" and tuple(e.shape) in full_shapes)]
    y.square().sum().backward()
    torch_xla.sync()
    grads = [p.grad for p in model.parameters()]
    diffs = []
    for g, r in zip(grads, ref_grads, strict=True):
        g = g.cpu().reshape(-1)[: r.numel()].reshape(r.shape)
        diffs.append(float((g - r).abs().max()))
    print(json.dumps({"max_abs_diff": max(diffs), "weight_copies_held": held, "nbytes": report.nbytes,
                      "n_grads": len(grads)}))


if __name__ == "__main__":
    main()
