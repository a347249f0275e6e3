"""FSDPv2 (torch_xla SPMD, 4 virtual CPU devices) with xla_ckpt policies: one JSON line.

Run in a fresh process (SPMD mode and device count are fixed once the runtime starts):
    python tests/probes/fsdpv2_probe.py POLICY DUMP_DIR
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    policy, dump = sys.argv[1], sys.argv[2]
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["CPU_NUM_DEVICES"] = "4"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump}"
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch import nn
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2

    import xla_ckpt
    # the dump parser, bench/xla_dump.py (bench/ is scripts, not a package)
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
    import xla_dump

    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n, 1), ("fsdp", "model"))
    xs.set_global_mesh(mesh)

    def build():
        torch.manual_seed(0)
        return nn.Sequential(*[nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)) for _ in range(3)])

    x_cpu = torch.randn(16, 32, generator=torch.Generator().manual_seed(1))
    ref = build()
    ref(x_cpu).square().sum().backward()

    model = build()
    # Recipe: corrected linear + a policy on each block, then FSDPv2 per block and at the root.
    xla_ckpt.patch_linear(model)
    if policy != "none":
        for blk in model:
            xla_ckpt.checkpointed(blk, policy=policy)
    dev = torch_xla.device()
    model = model.to(dev)
    for i, blk in enumerate(model):
        model[i] = FSDPv2(blk, mesh=mesh)
    model = FSDPv2(model, mesh=mesh)
    x = x_cpu.to(dev)
    xs.mark_sharding(x, mesh, ("fsdp", None))
    with xla_ckpt.saved_activations() as report:
        y = model(x)
    y.square().sum().backward()
    torch_xla.sync()
    diffs = [float((p.grad.cpu() - r.grad).abs().max()) for p, r in zip(model.parameters(), ref.parameters(), strict=True)]
    peaks = xla_dump.compiled_peaks(dump)
    name = max(peaks, key=peaks.get)
    hlo = open(os.path.join(dump, name.replace("-buffer-assignment.txt", ".txt"))).read()
    full_weight_shapes = {(64, 32), (32, 64)}
    print(json.dumps({
        "devices": n,
        "max_abs_diff": max(diffs),
        "n_grads": len(diffs),
        "dots": hlo.count(" dot("),
        "all_gathers": hlo.count("all-gather"),
        "saved_bytes": report.nbytes,
        "weight_copies": [list(e.shape) for e in report.entries
                          if e.kind == "parameter copy" or (e.kind == "activation" and e.shape in full_weight_shapes)],
    }))


if __name__ == "__main__":
    main()
