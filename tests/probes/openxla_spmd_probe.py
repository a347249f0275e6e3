"""SPMD and FSDPv2 under ``torch.compile(backend="openxla")``, with and without a preset: one JSON line.

4 virtual CPU devices, in a fresh process (SPMD mode and device count are fixed once the runtime starts).
A GPT (``xla_ckpt.models``) is sharded one way (MODE), then each VARIANT runs three training steps:
``none`` (compiled, no checkpointing), a preset name (``xla_ckpt.apply`` then compiled) or ``lazy:NAME``
(no compile; ``lazy:none`` is the reference). Per variant: loss and every parameter grad against the
lazy, uncompiled, unwrapped run (``torch.testing.assert_close``), graphs after the first and the third
step (a recompile shows as more), graph breaks, and the per-device compiled peak of the step's XLA
programs (``--xla_dump_to`` buffer assignment; SPMD programs are per device), or the error it raised.

MODE:
- ``tp``: Megatron tensor parallel weights (qkv / up split by output rows, proj / down by input
  columns), annotated once outside the compiled step.
- ``fsdp``: FSDPv2's layout by hand: every parameter sharded on its largest dimension over ``fsdp``,
  the batch over ``fsdp``; no wrapper.
- ``fsdpv2`` / ``fsdpv2_noout``: torch_xla's ``SpmdFullyShardedDataParallel`` per block and at the root
  (default ``shard_output``, or one that annotates nothing).
- ``annotate`` / ``annotate_grad``: ``tp`` plus an activation annotation inside every block's MLP:
  ``xs.mark_sharding(h, ...)`` or ``h = xs.mark_sharding_with_gradients(h, ...)``.
- ``repro``: the smallest model found where ``mark_sharding_with_gradients`` gives wrong compiled grads
  (torch_xla 2.9, no xla_ckpt): prints the largest grad difference, compiled vs lazy.
Usage:
    python tests/probes/openxla_spmd_probe.py MODE DUMP_DIR VARIANT [VARIANT ...]
"""

from __future__ import annotations

import json
import os
import sys
import warnings

SIZE = {"vocab_size": 128, "seq_len": 64, "n_layer": 2, "n_head": 4, "d_model": 64}
BATCH, STEPS = 8, 3


def main() -> None:
    mode, dump, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(dump, exist_ok=True)
    os.environ.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4", XLA_FLAGS=f"--xla_dump_to={dump}")
    import numpy as np
    import torch
    import torch._dynamo.utils as dynamo_utils
    import torch.nn.functional as F
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    import xla_ckpt
    from xla_ckpt import models
    from xla_ckpt.models import GPT, GPTConfig
    # the dump parser, bench/xla_dump.py (bench/ is scripts, not a package)
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
    import xla_dump

    warnings.simplefilter("ignore")
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    dev = torch_xla.device()
    fsdp = mode.startswith("fsdp")
    mesh = xs.Mesh(np.arange(n), (n, 1) if fsdp else (1, n), ("fsdp", "model") if fsdp else ("data", "model"))
    if mode == "repro":
        print(json.dumps({"devices": n, "max_abs_diff": _repro(torch, torch_xla, xs, mesh, dev)}))
        return
    if fsdp:
        xs.set_global_mesh(mesh)
    if mode.startswith("annotate"):
        def mlp_forward(self, x):  # models.MLP.forward with the hidden activation annotated (on XLA only)
            h = self.up(x)
            if h.device.type == "xla" and mode == "annotate":
                xs.mark_sharding(h, mesh, (None, None, "model"))
            elif h.device.type == "xla":
                h = xs.mark_sharding_with_gradients(h, mesh, (None, None, "model"))
            return self.drop(self.down(F.gelu(h)))

        models.MLP.forward = mlp_forward
    cfg = GPTConfig(**SIZE)
    idx_cpu = torch.randint(0, cfg.vocab_size, (BATCH, cfg.seq_len), generator=torch.Generator().manual_seed(1))

    def build(preset):
        torch.manual_seed(0)
        model = GPT(cfg)
        if preset != "none":
            xla_ckpt.apply(model, preset)  # before FSDPv2 wraps the blocks (docs/sharded.md's recipe)
        model = model.to(dev)
        if mode in ("tp", "annotate", "annotate_grad"):
            for blk in model.layers:
                xs.mark_sharding(blk.attn.qkv.weight, mesh, ("model", None))
                xs.mark_sharding(blk.attn.proj.weight, mesh, (None, "model"))
                xs.mark_sharding(blk.mlp.up.weight, mesh, ("model", None))
                xs.mark_sharding(blk.mlp.down.weight, mesh, (None, "model"))
        elif mode == "fsdp":
            for p in model.parameters():
                spec = [None] * p.dim()
                spec[list(p.shape).index(max(p.shape))] = "fsdp"
                xs.mark_sharding(p, mesh, tuple(spec))
        elif mode.startswith("fsdpv2"):
            from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
                SpmdFullyShardedDataParallel as FSDPv2,
            )

            kw = {"shard_output": lambda out, mesh: None} if mode == "fsdpv2_noout" else {}
            for i, blk in enumerate(model.layers):
                model.layers[i] = FSDPv2(blk, mesh=mesh, **kw)
            model = FSDPv2(model, mesh=mesh, **kw)
        torch_xla.sync()
        return model

    def step(model, run, programs=None):
        idx = idx_cpu.to(dev)
        if fsdp:
            xs.mark_sharding(idx, mesh, ("fsdp", None))
        model.zero_grad(set_to_none=True)
        before = set(os.listdir(dump))
        loss = run(idx, idx)
        loss.backward()
        torch_xla.sync()
        if programs is not None:  # the step's programs (reading sharded grads back compiles gathers)
            programs.extend(v for k, v in xla_dump.compiled_peaks(dump).items() if k not in before)
        return [("loss", loss.detach().cpu())] + [(name, p.grad.cpu() if p.grad is not None else None)
                                                  for name, p in model.named_parameters()]

    # The reference: lazy, uncompiled, unwrapped; itself checked against one unsharded CPU process.
    ref_model = build("none")
    peaks: list[int] = []
    ref = step(ref_model, ref_model, peaks)
    results = {"lazy:none": {"equal": True, "peaks": sorted(peaks)}}
    torch.manual_seed(0)
    cpu_model = GPT(cfg)
    cpu_loss = cpu_model(idx_cpu, idx_cpu)
    cpu_loss.backward()
    cpu = [cpu_loss.detach()] + [p.grad for p in cpu_model.parameters()]
    ref_vs_cpu = max(float((r.to(c.dtype) - c).abs().max()) for (_, r), c in zip(ref, cpu, strict=True))

    for variant in (v for v in variants if v != "lazy:none"):
        lazy = variant.startswith("lazy:")
        torch._dynamo.reset()
        dynamo_utils.counters.clear()
        try:
            model = build(variant.split(":", 1)[1] if lazy else variant)
            run = model if lazy else torch.compile(model, backend="openxla")
            graphs, peaks = [], []
            for i in range(STEPS):
                got = step(model, run, peaks if i == 0 else None)
                graphs.append(dynamo_utils.counters["stats"]["unique_graphs"])
        except Exception as e:  # noqa: BLE001  (the probe records what torch_xla raises)
            results[variant] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"}
            continue
        mismatch = {}
        for (name, r), (_, g) in zip(ref, got, strict=True):
            if g is None:
                mismatch[name] = "no grad"
                continue
            try:
                torch.testing.assert_close(g, r)
            except AssertionError:
                mismatch[name] = float((g - r).abs().max())
        results[variant] = {
            "equal": not mismatch, "mismatch": mismatch, "graphs_first_step": graphs[0], "graphs": graphs[-1],
            "breaks": sum(dynamo_utils.counters["graph_break"].values()), "peaks": sorted(peaks),
        }
    for res in results.values():
        if "peaks" in res:
            res["peak"] = max(res["peaks"]) if res["peaks"] else None
    print(json.dumps({"devices": n, "mode": mode, "ref_vs_cpu": ref_vs_cpu, "results": results}))


def _repro(torch, torch_xla, xs, mesh, dev) -> float:
    """``mark_sharding_with_gradients`` on a hidden activation, two small blocks, one step: compiled vs lazy."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(16, 64), nn.Linear(64, 16)

        def forward(self, x):
            h = xs.mark_sharding_with_gradients(self.up(x), mesh, (None, "model"))
            return x + self.down(torch.nn.functional.gelu(h))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), Block(), Block()).to(dev)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).to(dev)

    def grads(run):
        model.zero_grad(set_to_none=True)
        run(x).square().mean().backward()
        torch_xla.sync()
        return [p.grad.cpu() for p in model.parameters()]

    ref = grads(model)
    got = grads(torch.compile(model, backend="openxla"))
    return max(float((g - r).abs().max()) for g, r in zip(got, ref, strict=True))


if __name__ == "__main__":
    main()
