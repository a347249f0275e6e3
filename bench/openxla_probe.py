"""One variant of the GPT compiled with ``torch.compile(backend="openxla")``: compiled peaks and times.

Run one process per variant (``XLA_FLAGS`` is read once per process):
    python bench/openxla_probe.py VARIANT DUMP_DIR [--layers 4 --d-model 256 --heads 4 --seq 256 --batch 8]
                                  [--dtype float32] [--grads grads.pt]
VARIANT: ``none`` (no checkpointing), a preset (``megatron_selective``, ``full``, ...), ``budget:F``
(``budget = F`` in every block), or ``lazy:PRESET`` (the lazy engine, no compile: one graph per step).
Prints one JSON line: the compiled peak of every XLA program the step ran (forward, backward; the
largest is the step's), the first step's wall time (trace + compile + run), graphs and graph breaks,
the loss and a grad checksum.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Iterator


@contextlib.contextmanager
def unfenced() -> Iterator[None]:
    """XLA regions compiled in this block get torch's plain min-cut partition, without the library's fence:
    the ``--no-fence`` rows, which show what the fence buys. Sets the library's ``_compile.prepare._fence``
    and puts it back. Example: ``with unfenced(): torch.compile(model, backend="openxla")(x).sum().backward()``.
    """
    from xla_ckpt._compile import prepare

    was, prepare._fence = prepare._fence, False
    try:
        yield
    finally:
        prepare._fence = was


def add_size_args(p: argparse.ArgumentParser) -> None:
    """The model's sizes (the default GPT), shared with bench/openxla.py."""
    for flag, default in (("--layers", 4), ("--d-model", 256), ("--heads", 4), ("--seq", 256), ("--batch", 8),
                          ("--vocab", 512)):
        p.add_argument(flag, type=int, default=default)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("variant")
    p.add_argument("dump")
    add_size_args(p)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--model", default="gpt", help="gpt (xla_ckpt.models) or a xla_ckpt.hf_models architecture")
    p.add_argument("--no-fence", action="store_true", help="compiled backward without the fence (to measure it)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--grads", help="save every parameter grad of the last step here, concatenated (torch.save)")
    a = p.parse_args()
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={a.dump} --xla_dump_hlo_as_text"
    import warnings

    import torch
    import torch._dynamo.utils as dynamo_utils
    import torch_xla

    import xla_ckpt
    import xla_dump
    from xla_ckpt.models import GPT, GPTConfig

    warnings.simplefilter("ignore")
    scope = contextlib.ExitStack()  # for the whole probe process
    if a.no_fence:
        scope.enter_context(unfenced())
    dev = torch_xla.device()
    if a.model == "gpt":
        cfg = GPTConfig(vocab_size=a.vocab, seq_len=a.seq, n_layer=a.layers, n_head=a.heads, d_model=a.d_model)
        torch.manual_seed(0)
        model = GPT(cfg).to(getattr(torch, a.dtype)).to(dev)
    else:
        from xla_ckpt import hf_models

        model = hf_models.to_device(hf_models.build(a.model, a.d_model, a.layers, a.heads, a.seq, a.vocab), dev)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), generator=torch.Generator().manual_seed(1)).to(dev)
    torch_xla.sync()
    variant, lazy = a.variant, a.variant.startswith("lazy:")
    if lazy:
        variant = variant[len("lazy:"):]
    if variant.startswith("budget:"):
        xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "budget": float(variant.split(":")[1])}]})
    elif variant != "none":
        xla_ckpt.apply(model, variant)
    run = model if lazy else torch.compile(model, backend="openxla")
    first, phases = None, {}

    def new_programs(phase: str) -> None:
        # Which XLA programs each phase compiled (the forward and backward graphs compile on first use).
        seen = {f for fs in phases.values() for f in fs}
        now = xla_dump.compiled_peaks(a.dump) if os.path.isdir(a.dump) else {}
        phases[phase] = sorted(f for f in now if f not in seen)

    new_programs("setup")
    for step in range(a.steps):
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss = run(idx, idx) if a.model == "gpt" else run(input_ids=idx, labels=idx).loss
        if step == 0 and not lazy:
            new_programs("forward")
        loss.backward()
        if step == 0 and not lazy:
            new_programs("backward")
        torch_xla.sync()
        torch_xla._XLAC._xla_wait_device_ops([])
        first = first if first is not None else time.perf_counter() - t0
    grads = float(sum(p.grad.double().abs().sum().cpu() for p in model.parameters()))
    if a.grads:  # as bench/worker.py saves them: memory.py compares every grad with lazy none's
        torch.save(torch.cat([p.grad.detach().float().reshape(-1).cpu() for p in model.parameters()
                              if p.grad is not None]), a.grads)
    peaks = xla_dump.compiled_peaks(a.dump)
    print(json.dumps({
        "variant": a.variant, "fence": not a.no_fence, "peaks": peaks, "peak": max(peaks.values()) if peaks else None,
        "forward_peak": max((peaks[f] for f in phases.get("forward", [])), default=None),
        "backward_peak": max((peaks[f] for f in phases.get("backward", [])), default=None),
        "first_step_s": first, "graphs": dynamo_utils.counters["stats"]["unique_graphs"],
        "breaks": sum(dynamo_utils.counters["graph_break"].values()),
        "loss": float(loss.detach().cpu()), "grad_abs_sum": grads,
    }))


if __name__ == "__main__":
    sys.exit(main())
