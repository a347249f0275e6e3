"""``apply(model, "megatron_selective", scan=True)`` under FSDPv2 (SPMD, 4 virtual CPU devices): one JSON line.

A tiny HF Llama (2 layers) run by hand under FSDPv2 three ways: unscanned (each decoder layer and the
root wrapped, the usual recipe), scanned with the root wrapped (every parameter sharded by the root
wrapper), and scanned with the layers wrapped too (refused: FSDPv2's per-layer backward hook wraps each
layer's input and output, and a scan has no per-layer backward). Per run: loss, every parameter grad
(gathered to CPU) against the unscanned run, and the step's HLO (``while``: the scan; sharding
annotations: the parameters really are sharded). torch_xla's scan needs jax and torchax under SPMD:
without them the scanned runs report the named error ``apply`` raises.

Run in a fresh process (SPMD mode and device count are fixed once the runtime starts):
    python tests/probes/fsdpv2_scan_probe.py
"""

from __future__ import annotations

import json
import os
import warnings

SIZES = dict(d_model=64, n_layer=2, n_head=4, seq_len=32, vocab_size=128)
BATCH = 8


def main() -> None:
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["CPU_NUM_DEVICES"] = "4"
    warnings.simplefilter("ignore")  # the use_cache notice, FSDPv2's tuple-output notice
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2

    import xla_ckpt
    from xla_ckpt import hf_models
    from xla_ckpt._api.scan_hf import plain_grads

    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n, 1), ("fsdp", "tensor"))
    xs.set_global_mesh(mesh)
    dev = torch_xla.device()

    def run(scan: bool, wrap_layers: bool) -> dict:
        model = hf_models.build("llama", **SIZES).to(dev)
        try:
            xla_ckpt.apply(model, "megatron_selective", scan=scan)
        except xla_ckpt.ConfigError as e:  # SPMD without jax: refused before the model changes
            return {"error": str(e), "at": "apply", "wrapped": bool(model.model.layers[0].__dict__.get("forward"))}
        if wrap_layers:
            layers = model.model.layers
            for i, layer in enumerate(layers):
                layers[i] = FSDPv2(layer, mesh=mesh)
        wrapped = FSDPv2(model, mesh=mesh,
                         shard_output=lambda out, m: xs.mark_sharding(out.logits, m, ("fsdp", None, None)))
        batch = hf_models.batch("llama", model, batch=BATCH, seq_len=SIZES["seq_len"],
                                vocab_size=SIZES["vocab_size"], device=dev)
        for v in batch.values():
            xs.mark_sharding(v, mesh, ("fsdp", None))
        try:
            loss = wrapped(**batch, use_cache=False).loss
        except xla_ckpt.CheckpointError as e:
            torch_xla._XLAC._xla_sync_multi([], devices=[], wait=False)  # drop the partial graph
            return {"error": str(e), "at": "call", "grads_none": all(p.grad is None for p in model.parameters())}
        loss.backward()
        params = list(model.parameters())
        hlo = torch_xla._XLAC._get_xla_tensors_hlo([loss, *(p.grad for p in params if p.grad is not None)])
        torch_xla.sync()
        sharded = sum(torch_xla._XLAC._get_xla_sharding_spec(p) != "" for p in params)
        grads = plain_grads(model).values()  # by plain name in the plain order: a stacked grad split per layer
        return {"loss": loss.cpu(), "grads": [None if g is None else g.cpu() for g in grads],
                "whiles": hlo.count("while("), "shardings": hlo.count("sharding={devices="),
                "sharded_params": sharded, "n_params": len(params)}

    ref = run(scan=False, wrap_layers=True)
    got = run(scan=True, wrap_layers=False)
    per_layer = run(scan=True, wrap_layers=True)
    if "error" in got:  # no jax / torchax: the named error, and the unscanned run as it was
        print(json.dumps({"devices": n, "scan": got, "per_layer": per_layer, "loss": float(ref["loss"])}))
        return
    mismatch = None
    try:
        assert all(g is not None for g in got["grads"]), "a None grad"
        torch.testing.assert_close(got["loss"], ref["loss"])
        for g, r in zip(got["grads"], ref["grads"], strict=True):
            torch.testing.assert_close(g, r)
    except AssertionError as e:
        mismatch = str(e)[:400]
    diff = max(float((g - r).abs().max()) for g, r in zip(got["grads"], ref["grads"], strict=True) if g is not None)
    out = {"devices": n, "scan": "ran", "mismatch": mismatch, "max_grad_diff": diff, "loss": float(got["loss"]),
           **{f"{k}": {"scan": got[k], "unscanned": ref[k]} for k in ("whiles", "shardings", "sharded_params")},
           "n_params": got["n_params"], "per_layer": per_layer}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
