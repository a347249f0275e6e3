"""``python -m xla_ckpt fit``: the command line of :func:`xla_ckpt._api.fit.fit`."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from xla_ckpt._api.chips import CHIPS
from xla_ckpt._api.fit import DECODERS, DEFAULT_BUDGETS, DTYPES, arch_config, fit

__all__ = ["main"]

EXAMPLE = """examples:
  python -m xla_ckpt fit --hf-config bench/configs/llama3_70b.json --seq 8192 --batch 1 --chips 64 --chip v5p
  python -m xla_ckpt fit --arch llama --hidden 4096 --layers 32 --heads 32 --kv-heads 8 --mlp 14336 \\
      --vocab 128256 --seq 8192 --batch 1 --chips 8 --chip v5e --json
"""


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xla_ckpt fit", epilog=EXAMPLE,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Which checkpoint policy fits a model's training step on given chips "
                                            "(estimated on the meta device: nothing is allocated).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--hf-config", help="a Hugging Face config.json (or its folder)")
    src.add_argument("--arch", choices=DECODERS, help="a built-in decoder architecture, with the sizes below")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    p.add_argument("--mlp", type=int, default=None, help="MLP width (default: 4 x --hidden)")
    p.add_argument("--head-dim", type=int, default=None)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, required=True, help="sequence length")
    p.add_argument("--batch", type=int, default=1, help="sequences per chip")
    p.add_argument("--chips", type=int, default=1)
    hbm = p.add_mutually_exclusive_group(required=True)
    hbm.add_argument("--chip", choices=list(CHIPS), help="accelerator kind (its HBM per chip)")
    hbm.add_argument("--hbm-gib", type=float, help="HBM per chip in GiB (another accelerator)")
    p.add_argument("--xla", action="store_true", help="with --hbm-gib: an XLA device (apply the measured band)")
    p.add_argument("--param-dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--optim-dtype", choices=list(DTYPES), default="fp32")
    p.add_argument("--fsdp", type=int, default=None, help="FSDP sharding degree (default: --chips; 1: replicated)")
    p.add_argument("--budgets", type=float, nargs="*", default=list(DEFAULT_BUDGETS),
                   help="memory_budget fractions to try besides the presets")
    p.add_argument("--reserve", type=float, default=0.05, help="fraction of HBM kept free (default 0.05)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    a = p.parse_args(argv)
    try:
        config = a.hf_config if a.hf_config else arch_config(
            a.arch, a.hidden, a.layers, a.heads, a.kv_heads, a.mlp, a.vocab, a.seq, a.head_dim)
        report = fit(config, seq=a.seq, batch=a.batch, chips=a.chips, chip=a.chip, hbm_gib=a.hbm_gib,
                     param_dtype=a.param_dtype, optim_dtype=a.optim_dtype, fsdp=a.fsdp, budgets=a.budgets,
                     reserve=a.reserve, xla=True if a.xla else None)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.to_json() if a.json else report)
    return 0 if report.recommended is not None else 1
