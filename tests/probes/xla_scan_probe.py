"""Run GPT blocks on XLA:CPU through scan (or unrolled) as ONE graph and print its compiled peak.

Used by tests/integration/xla/test_scan.py in a fresh process per variant (XLA_FLAGS is read once per process):
    python tests/probes/xla_scan_probe.py VARIANT DUMP_DIR [--layers N]
VARIANT: ``unrolled``, ``scan_plain`` (torch_xla's scan, no checkpointing) or ``scan:POLICY``.
Prints one JSON line: {"peak": bytes, "grads": [...abs sums...], "trace_compile_s": seconds}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("variant")
    p.add_argument("dump")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    a = p.parse_args()
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={a.dump} --xla_dump_hlo_as_text"
    import torch
    import torch_xla
    from torch import nn

    import xla_ckpt
    # the dump parser, bench/xla_dump.py (bench/ is scripts, not a package)
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
    import xla_dump
    from xla_ckpt.models import Block, GPTConfig

    dev = torch_xla.device()
    torch.manual_seed(0)
    layers = nn.ModuleList(Block(GPTConfig(d_model=a.d, n_head=4, seq_len=a.seq)) for _ in range(a.layers)).to(dev)
    x = torch.randn(a.batch, a.seq, a.d).to(dev).requires_grad_()
    t0 = time.perf_counter()
    if a.variant == "unrolled":
        h = x
        for layer in layers:
            h = layer(h)
    elif a.variant == "scan_plain":
        from torch_xla.experimental.scan_layers import scan_layers

        h = scan_layers(layers, x)
    else:
        h = xla_ckpt.scan_layers(layers, x, policy=a.variant.split(":", 1)[1])
    h.square().sum().backward()
    torch_xla.sync()
    grads = [float(t.grad.abs().sum().cpu()) for t in [x, *layers.parameters()]]
    elapsed = time.perf_counter() - t0
    peaks = xla_dump.compiled_peaks(a.dump)
    print(json.dumps({"peak": max(peaks.values()), "grads": grads, "trace_compile_s": elapsed}))


if __name__ == "__main__":
    main()
