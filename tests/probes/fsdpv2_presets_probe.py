"""Every preset under FSDPv2 (torch_xla SPMD, 4 virtual CPU devices), tiny HF Llama: one JSON line.

By hand (each decoder layer and the root wrapped in ``SpmdFullyShardedDataParallel``) and through the
HF ``Trainer`` recipe (``fsdp="full_shard"``, ``fsdp_config={"xla": True, "xla_fsdp_v2": True}``), for
``none`` / ``megatron_selective`` / ``full`` / ``fsdp_xla`` and HF's own ``xla_fsdp_grad_ckpt``. Per run:
losses (and the by-hand grads / the Trainer's final parameters, gathered to CPU) and the per-device
compiled peak of the largest program it compiled (``*buffer-assignment.txt``, files new to that run).

Run in a fresh process (SPMD mode and device count are fixed once the runtime starts):
    python tests/probes/fsdpv2_presets_probe.py DUMP_DIR [N_LAYER SEQ_LEN D_MODEL]
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

PRESETS = ("none", "megatron_selective", "full", "fsdp_xla")
SIZES = dict(d_model=64, n_layer=1, n_head=4, seq_len=64, vocab_size=128)  # the test's: one block compiles fastest
BATCH, STEPS = 8, 3


def main() -> None:
    dump = sys.argv[1]
    if len(sys.argv) > 2:  # the docs' table: N_LAYER SEQ_LEN D_MODEL
        SIZES.update(n_layer=int(sys.argv[2]), seq_len=int(sys.argv[3]), d_model=int(sys.argv[4]))
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["CPU_NUM_DEVICES"] = "4"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump}"
    warnings.simplefilter("ignore")  # the KV-cache notice of checkpointed layers, HF's and accelerate's notices
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    import transformers
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2

    import xla_ckpt
    from xla_ckpt import hf_models
    # the dump parser, bench/xla_dump.py (bench/ is scripts, not a package)
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
    from xla_dump import compiled_peaks

    transformers.logging.set_verbosity_error()
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n, 1), ("fsdp", "tensor"))
    xs.set_global_mesh(mesh)
    dev = torch_xla.device()
    seen: set[str] = set()

    def new_peak() -> int:
        peaks = compiled_peaks(dump)
        new = {k: v for k, v in peaks.items() if k not in seen and "SyncTensorsGraph" in k}
        seen.update(peaks)
        assert new, "the run compiled no new program (a cache hit: its peak is unknown)"
        return max(new.values())

    def build(preset: str):
        model = hf_models.build("llama", **SIZES)
        if preset != "hf_grad_ckpt":
            xla_ckpt.apply(model, preset)
        return model

    def by_hand(preset: str) -> dict:
        model = build(preset).to(dev)
        layers = model.model.layers
        for i, layer in enumerate(layers):
            layers[i] = FSDPv2(layer, mesh=mesh)
        # accepts fsdp_xla too (its root forward stays a bound method); the root's output is a CausalLMOutputWithPast: shard its logits
        # over the batch, as the Trainer's recipe does
        wrapped = FSDPv2(model, mesh=mesh, shard_output=lambda out, m: xs.mark_sharding(out.logits, m, ("fsdp", None, None)))
        batch = hf_models.batch("llama", model, batch=BATCH, seq_len=SIZES["seq_len"],
                                vocab_size=SIZES["vocab_size"], device=dev)
        for v in batch.values():
            xs.mark_sharding(v, mesh, ("fsdp", None))
        loss = wrapped(**batch).loss
        loss.backward()
        torch_xla.sync()
        grads = [None if p.grad is None else p.grad.cpu() for p in model.parameters()]
        return {"loss": loss.cpu(), "grads": grads, "peak": new_peak()}

    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, SIZES["vocab_size"], (BATCH * STEPS, SIZES["seq_len"]), generator=g)
    data = [{"input_ids": row, "labels": row.clone()} for row in ids]

    class Recorded(transformers.Trainer):
        losses: list = []

        def compute_loss(self, model, inputs, *args, **kwargs):
            loss = super().compute_loss(model, inputs, *args, **kwargs)
            self.losses.append(loss.detach())
            return loss

    def trainer(preset: str, out: str) -> dict:
        # On the device before the optimizer is made: moving a module from CPU to XLA makes new Parameter
        # objects, and an optimizer made on the CPU ones would step nothing (the losses equal, untrained).
        model = build(preset).to(dev)
        init = [p.detach().cpu() for p in model.parameters()]
        fsdp_config = {"xla": True, "xla_fsdp_v2": True, "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"],
                       "xla_fsdp_grad_ckpt": preset == "hf_grad_ckpt"}
        args = transformers.TrainingArguments(
            output_dir=out, max_steps=STEPS, per_device_train_batch_size=BATCH, learning_rate=1e-2,
            report_to=[], save_strategy="no", optim="sgd", lr_scheduler_type="constant", logging_steps=1, disable_tqdm=True, seed=0,
            fsdp="full_shard", fsdp_config=fsdp_config, dataloader_drop_last=True)
        t = Recorded(model=model, args=args, train_dataset=data)
        t.losses = []
        # transformers 5.24: with FSDPv2 the Trainer wraps the model itself and then calls create_scheduler
        # with no optimizer (AttributeError on None); creating the optimizer first is the workaround.
        t.create_optimizer()
        t.train()
        torch_xla.sync()
        params = [p.detach().cpu() for p in model.parameters()]
        return {"losses": [float(x.cpu()) for x in t.losses], "params": params, "peak": new_peak(),
                "moved": sum(not torch.equal(p, q) for p, q in zip(params, init, strict=True)), "n_params": len(params)}

    def mismatch(got: list, want: list) -> str | None:
        """None if every tensor equals the reference's (``assert_close``, default tolerances), else why."""
        if any(g is None for g in got):
            return "a None grad"
        try:
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w)
        except AssertionError as e:
            return str(e)[:400]
        return None

    results: dict = {"devices": n}
    hand = {p: by_hand(p) for p in PRESETS}
    for p, r in hand.items():
        results[f"hand:{p}"] = {"loss": float(r["loss"]), "peak": r["peak"], "n_grads": len(r["grads"]),
                                "mismatch": mismatch([r["loss"], *r["grads"]],
                                                     [hand["none"]["loss"], *hand["none"]["grads"]])}
    train = {p: trainer(p, os.path.join(dump, "out", p)) for p in (*PRESETS, "hf_grad_ckpt")}
    for p, r in train.items():
        results[f"trainer:{p}"] = {"losses": r["losses"], "peak": r["peak"], "moved": r["moved"], "n_params": r["n_params"],
                                   "mismatch": mismatch([torch.tensor(r["losses"]), *r["params"]],
                                                        [torch.tensor(train["none"]["losses"]),
                                                         *train["none"]["params"]])}
    results["cpu_s"] = round(time.process_time(), 1)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
