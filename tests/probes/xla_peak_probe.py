"""Run one variant of an MLP stack on XLA:CPU as ONE graph (forward+backward) and print its compiled peak.

Used by the tests in a fresh process per variant (XLA_FLAGS is read once per process):
    python tests/probes/xla_peak_probe.py VARIANT DUMP_DIR [--blocks N --d D --h H --batch B]
prints one JSON line: {"peak": bytes, "dots": n, "grads": [...sums...]}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("variant")
    p.add_argument("dump")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--h", type=int, default=256)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--gpt", action="store_true", help="GPT blocks (attention + MLP), input (batch, seq=h, d)")
    p.add_argument("--general-replay", action="store_true", help="run fn again in backward (no recorded program)")
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
    # general_replay, tests/switches.py
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    from switches import general_replay

    scope = contextlib.ExitStack()  # for the whole probe process
    if a.general_replay:
        scope.enter_context(general_replay())
    dev = torch_xla.device()
    torch.manual_seed(0)
    if a.gpt:
        from xla_ckpt.models import Block, GPTConfig

        blocks = nn.ModuleList(Block(GPTConfig(d_model=a.d, n_head=4, seq_len=a.h)) for _ in range(a.blocks)).to(dev)
        x = torch.randn(a.batch, a.h, a.d).to(dev).requires_grad_()
    else:
        blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(a.d, a.h, bias=not a.no_bias), nn.GELU(), nn.Linear(a.h, a.d, bias=not a.no_bias))
            for _ in range(a.blocks)
        ).to(dev)
        x = torch.randn(a.batch, a.d).to(dev).requires_grad_()
    h = x
    for blk in blocks:
        if a.variant == "none":
            h = blk(h)
        elif a.variant == "torch_xla":
            from torch_xla.utils.checkpoint import checkpoint as xcp

            h = xcp(blk, h)
        else:
            h = xla_ckpt.checkpoint(blk, h, policy=a.variant)
    h.square().sum().backward()
    torch_xla.sync()
    grads = [float(t.grad.abs().sum().cpu()) for t in [x, *blocks.parameters()]]
    peaks = xla_dump.compiled_peaks(a.dump)
    # The forward+backward graph is the one with the largest peak (other graphs: data init, .cpu()).
    name, peak = max(peaks.items(), key=lambda kv: kv[1])
    hlo = name.replace("-buffer-assignment.txt", ".txt")
    dots = open(os.path.join(a.dump, hlo)).read().count(" dot(") if os.path.exists(os.path.join(a.dump, hlo)) else -1
    print(json.dumps({"peak": peak, "dots": dots, "grads": grads}))


if __name__ == "__main__":
    sys.exit(main())
