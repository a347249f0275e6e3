"""torch FSDP2 (fully_shard, gloo, 2 ranks on CPU) with xla_ckpt policies and the corrected linear.

    python tests/probes/fsdp2_probe.py POLICY PORT   -> one JSON line from rank 0
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORLD = 2


def build() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)) for _ in range(3)])


def worker(rank: int, policy: str, port: int, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    import xla_ckpt

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    x_full = torch.randn(16, 32, generator=torch.Generator().manual_seed(1))
    ref = build()
    ref(x_full).square().sum().backward()

    model = build()
    # Recipe: corrected linear + a policy per block, then fully_shard per block and at the root.
    xla_ckpt.patch_linear(model)
    for blk in model:
        if policy != "none":
            xla_ckpt.checkpointed(blk, policy=policy)
        fully_shard(blk)
    fully_shard(model)
    used = []  # the (unsharded) weights the Linears ran with
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.register_forward_hook(lambda mod, a, o: used.append(mod.weight))
    x = x_full.chunk(WORLD)[rank].clone()  # this rank's own batch (a chunk view would keep the full one)
    with xla_ckpt.saved_activations() as report:
        y = model(x)
    freed = all(w.untyped_storage().nbytes() == 0 for w in used)
    y.square().sum().backward()
    diffs = []
    for p, r in zip(model.parameters(), ref.parameters(), strict=True):
        full = p.grad.full_tensor() * WORLD  # FSDP2 averages gradients over ranks
        diffs.append(float((full - r.grad).abs().max()))
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"max_abs_diff": max(diffs), "n_grads": len(diffs), "unsharded_freed_after_forward": freed,
                       "n_used": len(used), "saved_bytes": report.nbytes,
                       "weight_copies": [list(e.shape) for e in report.entries if e.kind == "parameter copy"]}, f)
    dist.destroy_process_group()


def main() -> None:
    policy, port = sys.argv[1], int(sys.argv[2])
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fsdp2_{port}.json")
    mp.spawn(worker, args=(policy, port, out), nprocs=WORLD, join=True)
    print(open(out).read())


if __name__ == "__main__":
    main()
