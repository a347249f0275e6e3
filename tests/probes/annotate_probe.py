"""Tensor parallel blocks that annotate an activation (``xs.mark_sharding``) inside the region: one JSON line.

SPMD on 4 virtual CPU devices, in a fresh process (SPMD mode and device count are fixed once the
runtime starts). Each block computes ``h = x @ w1``, shards it on its hidden dimension with
``xs.mark_sharding(h, mesh, (None, "model"))``, then ``gelu(h) @ w2``. Per variant (``none``: no
checkpointing; else a policy name, recorded-program replay or ``general:NAME`` for fn run again):
the per-device compiled peak, how many values of h's full shape the optimized HLO holds, and the grads'
largest difference from one unsharded CPU run. Usage:
    python tests/probes/annotate_probe.py DUMP_DIR VARIANT [VARIANT ...]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

B, D, H, BLOCKS = 256, 128, 1024, 3


def main() -> None:
    dump, variants = sys.argv[1], sys.argv[2:]
    os.makedirs(dump, exist_ok=True)  # XLA creates it at the first compile; the probe lists it before
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["CPU_NUM_DEVICES"] = "4"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump}"
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    import xla_ckpt
    # the dump parser, bench/xla_dump.py (bench/ is scripts, not a package)
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
    import xla_dump
    # general_replay, tests/switches.py
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    from switches import general_replay

    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (1, n), ("data", "model"))
    dev = torch_xla.device()
    g = torch.Generator().manual_seed(0)
    w_cpu = [(torch.randn(D, H, generator=g) / D**0.5, torch.randn(H, D, generator=g) / H**0.5) for _ in range(BLOCKS)]
    x_cpu = torch.randn(B, D, generator=g)

    def block(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, annotate: bool) -> torch.Tensor:
        h = x @ w1
        if annotate:
            xs.mark_sharding(h, mesh, (None, "model"))
        return x + torch.nn.functional.gelu(h) @ w2

    def loss_of(x, ws, policy, annotate=True):
        for w1, w2 in ws:
            if policy is None:
                x = block(x, w1, w2, annotate)
            else:
                x = xla_ckpt.checkpoint(block, x, w1, w2, annotate, policy=policy)
        return x.square().mean()

    ref_ws = [(a.clone().requires_grad_(), b.clone().requires_grad_()) for a, b in w_cpu]
    loss_of(x_cpu, ref_ws, None, annotate=False).backward()
    ref = [t.grad for pair in ref_ws for t in pair]

    peaks_by_hash: dict[str, tuple[int, int, int]] = {}  # graph hash -> (peak, full-shape values, dots)
    full_shape = f"f32[{B},{H}]"
    results = {}
    for variant in variants:
        general = variant.startswith("general:")
        name = variant.split(":", 1)[1] if general else variant
        policy = None if name == "none" else _policy(xla_ckpt, name)
        ws = [(a.to(dev).requires_grad_(), b.to(dev).requires_grad_()) for a, b in w_cpu]
        x = x_cpu.to(dev)
        torch_xla.sync()
        before = set(os.listdir(dump))
        with general_replay() if general else contextlib.nullcontext():
            loss = loss_of(x, ws, policy)
        loss.backward()
        grads = [t.grad for pair in ws for t in pair]
        graph = torch_xla._XLAC._get_graph_hash(grads)
        torch_xla.sync()
        new = sorted(set(os.listdir(dump)) - before)
        peaks = {k: v for k, v in xla_dump.compiled_peaks(dump).items() if k in new}
        if peaks:  # a graph compiled for this variant (an identical one is cached: no new dump)
            top = max(peaks, key=peaks.get)
            hlo = open(os.path.join(dump, top.replace("-buffer-assignment.txt", ".txt"))).read()
            peaks_by_hash[graph.hex()] = (peaks[top], hlo.count(full_shape + "{"), hlo.count(" dot("))
        peak, full, dots = peaks_by_hash[graph.hex()]
        diff = max(float((a.cpu() - r).abs().max()) for a, r in zip(grads, ref, strict=True))
        results[variant] = {"peak": peak, "full_shape_values": full, "dots": dots, "max_abs_diff": diff}
    print(json.dumps({"devices": n, "full_shape": full_shape, "results": results}))


def _policy(xla_ckpt, name: str):
    import torch
    from torch.utils.checkpoint import CheckpointPolicy

    args = {
        "save_only_these_names": {"names": ["h"]},
        "save_any_names_but_these": {"names": ["h"]},
        "save_ops": {"ops": [torch.ops.aten.mm]},
        "recompute_ops": {"ops": [torch.ops.aten.gelu]},
        "any_of": {"policies": ["dots_saveable", "nothing_saveable"]},
        "all_of": {"policies": ["everything_saveable", "dots_saveable"]},
        "from_torch": {"fn": lambda ctx, op, *a, **k: CheckpointPolicy.PREFER_RECOMPUTE},
        "offload": {"policy": "dots_saveable"},
        "save_and_offload_only_these_names": {"names_which_can_be_saved": ["h"], "names_which_can_be_offloaded": []},
        "memory_budget": {"fraction": 0.5},
    }
    return xla_ckpt.policies.get(name, **args.get(name, {}))


if __name__ == "__main__":
    main()
