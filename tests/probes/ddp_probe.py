"""torch DistributedDataParallel (gloo, 2 ranks on CPU) around models checkpointed by ``xla_ckpt.apply``.

    python tests/probes/ddp_probe.py OUT_DIR PORT   -> OUT_DIR/rank{0,1}.pt, then one JSON line from rank 0

Each rank trains every variant in sequence (one spawn for all: a spawn costs seconds) with SGD for two steps,
on its own batches, once without checkpointing ("none") and once per preset, and saves per run: the losses,
every parameter's grad at each step, the parameters and buffers after the steps, the CPU RNG state after each
micro-batch and the bytes ``saved_activations`` reported. The test compares them in the main process.
Dropout draws from a per-rank seed set before each micro-batch, so the plain and checkpointed runs draw alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
PRESETS = ("none", "megatron_selective", "full")
ROOT_POLICY = {"megatron_selective": "dots_with_no_batch_dims_saveable", "full": "nothing_saveable"}  # the presets'
VOCAB, SEQ, BATCH = 64, 16, 4


class BNBlock(nn.Module):
    """Linear -> BatchNorm1d -> GELU -> Dropout -> Linear, residual: buffers the forward writes, and RNG."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, 2 * d)
        self.bn = nn.BatchNorm1d(2 * d)
        self.drop = nn.Dropout(0.2)
        self.down = nn.Linear(2 * d, d)

    use_spare = False  # "rank_unused": rank 0 reads its spare parameter, rank 1 does not

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.down(self.drop(F.gelu(self.bn(self.up(x)))))
        return y + self.spare.sum() if self.use_spare else y


class BNNet(nn.Module):
    def __init__(self, d: int = 16, n: int = 2) -> None:
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.layers = nn.ModuleList(BNBlock(d) for _ in range(n))
        self.out = nn.Linear(d, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for blk in self.layers:
            h = blk(h)
        return F.cross_entropy(self.out(h), y)


def build(model: str, spare: bool) -> nn.Module:
    from xla_ckpt.models import GPT, GPTConfig

    torch.manual_seed(0)
    if model == "gpt":
        m: nn.Module = GPT(GPTConfig(vocab_size=VOCAB, seq_len=SEQ, n_layer=2, n_head=2, d_model=32, dropout=0.1))
    else:
        m = BNNet()
    if spare:  # a parameter no forward reads, in every block (inside the checkpointed regions)
        for blk in m.layers:
            blk.spare = nn.Parameter(torch.randn(4))
    return m


def batch(model: str, rank: int, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 + 1000 * rank + 10 * step + micro)  # each rank its own data
    if model == "gpt":
        idx = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
        return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    return torch.randn(2 * BATCH, 8, generator=g), torch.randint(0, 3, (2 * BATCH,), generator=g)


# name -> (DDP keyword arguments, where apply goes, micro-batches per step, extra). "before": apply, then
# DDP(model); "inside": DDP(model), then apply(ddp.module); "on_ddp": DDP(model), then apply(ddp) (names
# "module.layers.0"); "root": the whole model one region (``checkpointed(model, policy=<the preset's policy>)``),
# the loss, embeddings and BatchNorm inputs inside it, then DDP(model). extra: "autocast" (CPU bf16 autocast around the forward); "rank_unused" (BNNet only: a
# parameter in each block that rank 0's forward reads and rank 1's does not). SyncBatchNorm is left out:
# DDP refuses it off the GPU ("SyncBatchNorm layers only work with GPU modules").
VARIANTS = {
    "default": ({}, "before", 1, ""),
    "find_unused": ({"find_unused_parameters": True}, "before", 1, ""),
    "static_graph": ({"static_graph": True}, "before", 1, ""),
    "no_sync_accumulation": ({}, "before", 2, ""),
    "bucket_view": ({"gradient_as_bucket_view": True}, "before", 1, ""),
    "apply_inside_ddp": ({}, "inside", 1, ""),
    "apply_on_ddp": ({}, "on_ddp", 1, ""),
    "whole_model_region": ({"find_unused_parameters": True}, "root", 1, ""),
    "autocast_bf16": ({}, "before", 1, "autocast"),
    "rank_unused": ({"find_unused_parameters": True}, "before", 1, "rank_unused"),
}


def run(model_name: str, variant: str, preset: str, rank: int) -> dict:
    import xla_ckpt

    kwargs, where, n_micro, extra = VARIANTS[variant]
    model = build(model_name, spare=variant in ("find_unused", "rank_unused"))
    if extra == "rank_unused":
        for blk in model.layers:
            blk.use_spare = rank == 0
    wrapped: list = []
    if preset != "none" and where == "before":
        wrapped = xla_ckpt.apply(model, preset).wrapped
    if preset != "none" and where == "root":
        xla_ckpt.checkpointed(model, policy=ROOT_POLICY[preset])
        wrapped = [xla_ckpt.Wrapped("", type(model).__name__, ROOT_POLICY[preset], -1)]
    ddp = DDP(model, **kwargs)
    if preset != "none" and where == "inside":
        wrapped = xla_ckpt.apply(ddp.module, preset).wrapped
    if preset != "none" and where == "on_ddp":
        wrapped = xla_ckpt.apply(ddp, preset).wrapped
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    rec: dict = {"loss": [], "grads": [], "rng": [], "saved_bytes": [], "wrapped": [w.name for w in wrapped]}
    for step in range(2):
        opt.zero_grad(set_to_none=True)
        for micro in range(n_micro):
            x, y = batch(model_name, rank, step, micro)
            torch.manual_seed(100 * rank + 10 * step + micro)  # the dropout masks: per rank, alike in every run
            sync = ddp.no_sync() if micro < n_micro - 1 else contextlib.nullcontext()
            with sync:
                amp = torch.autocast("cpu", torch.bfloat16) if extra == "autocast" else contextlib.nullcontext()
                with xla_ckpt.saved_activations() as report, amp:
                    loss = ddp(x, y)
                (loss / n_micro).backward()
            rec["loss"].append(loss.detach().clone())
            rec["rng"].append(torch.get_rng_state())
            rec["saved_bytes"].append(report.nbytes)
        rec["grads"].append({n: None if p.grad is None else p.grad.detach().clone()
                             for n, p in ddp.module.named_parameters()})
        opt.step()
    rec["params"] = {n: p.detach().clone() for n, p in ddp.module.named_parameters()}
    rec["buffers"] = {n: b.detach().clone() for n, b in ddp.module.named_buffers()}
    return rec


def worker(rank: int, port: int, out_dir: str, models: list[str], variants: list[str]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    results = {}
    for model_name in models:
        for variant in variants:
            if VARIANTS[variant][3] == "rank_unused" and model_name != "bn":
                continue  # GPT's blocks have no such branch
            for preset in PRESETS:
                rec = run(model_name, variant, preset, rank)
                if preset != "none":
                    plain = results[(model_name, variant, "none")]["saved_bytes"]
                    # the policy did something: each forward kept fewer bytes than the plain one
                    assert rec["wrapped"], (model_name, variant, preset, "apply wrapped nothing")
                    assert all(c < p for c, p in zip(rec["saved_bytes"], plain, strict=True)), (
                        model_name, variant, preset, rec["saved_bytes"], plain)
                results[(model_name, variant, preset)] = rec
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    out_dir, port = sys.argv[1], int(sys.argv[2])
    models = sys.argv[3].split(",") if len(sys.argv) > 3 else ["gpt", "bn"]
    variants = sys.argv[4].split(",") if len(sys.argv) > 4 else list(VARIANTS)
    os.makedirs(out_dir, exist_ok=True)
    mp.spawn(worker, args=(port, out_dir, models, variants), nprocs=WORLD, join=True)
    print(json.dumps({"world": WORLD, "models": models, "variants": variants, "presets": list(PRESETS)}))


if __name__ == "__main__":
    main()
