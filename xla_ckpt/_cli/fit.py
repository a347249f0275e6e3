"""``python -m xla_ckpt fit``: the command line of :func:`xla_ckpt._estimate.fit.fit`."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from xla_ckpt._estimate.attention import ATTENTION
from xla_ckpt._api.device_forms import DEVICES
from xla_ckpt._estimate.chips import CHIPS
from xla_ckpt._api.config_dump import to_toml
from xla_ckpt._estimate.fit import DECODERS, DEFAULT_BUDGETS, DTYPES, arch_config, fit

__all__ = ["main"]

EXAMPLE = """examples:
  python -m xla_ckpt fit --hf-config bench/configs/llama3_70b.json --seq 8192 --batch 1 --chips 64 --chip v5p
  python -m xla_ckpt fit --hf-config meta-llama/Meta-Llama-3-8B --seq 8192 --chips 8 --chip h100
  python -m xla_ckpt fit --arch llama --hidden 4096 --layers 32 --heads 32 --kv-heads 8 --mlp 14336 \\
      --vocab 128256 --seq 8192 --batch 1 --chips 8 --chip v5e --json
  python -m xla_ckpt fit --hf-config config.json --seq 4096 --chips 8 --chip v5e --write ckpt.toml
      (then: xla_ckpt.apply(model, "ckpt.toml"))
"""


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xla_ckpt fit", epilog=EXAMPLE,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Which checkpoint policy fits a model's training step on given chips "
                                            "(estimated on the meta device: nothing is allocated).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--hf-config", metavar="PATH_OR_HUB_ID",
                     help="a Hugging Face config.json, its folder, or a Hub id (meta-llama/Meta-Llama-3-8B: read "
                     "with transformers.AutoConfig.from_pretrained, which needs the network or its cache)")
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
    p.add_argument("--attention", choices=list(ATTENTION), default=None,
                   help="attention kernel the activations are estimated with: " + "; ".join(
                       f"{k}: {v}" for k, v in ATTENTION.items()) + " (default: what the chip runs: flash on a "
                   "GPU, math on a TPU or an unnamed chip; the report's attention: line says which and why)")
    p.add_argument("--device", choices=list(DEVICES), default=None,
                   help="dropout / LayerNorm forms the activations are estimated with (default: cuda on a GPU "
                   "chip, else cpu, the forms the XLA band was measured against): " + "; ".join(
                       f"{k}: {v}" for k, v in DEVICES.items()))
    p.add_argument("--reserve", type=float, default=0.05, help="fraction of HBM kept free (default 0.05)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--write", metavar="PATH.toml", help="write the recommended config as TOML (what "
                   "xla_ckpt.apply and load_config read); nothing is written when no policy fits")
    a = p.parse_args(argv)
    if a.write is not None and not a.write.lower().endswith(".toml"):
        print(f"error: --write {a.write}: the config is written as TOML; give a path ending in .toml",
              file=sys.stderr)
        return 2
    try:
        config = a.hf_config if a.hf_config else arch_config(
            a.arch, a.hidden, a.layers, a.heads, a.kv_heads, a.mlp, a.vocab, a.seq, a.head_dim)
        report = fit(config, seq=a.seq, batch=a.batch, chips=a.chips, chip=a.chip, hbm_gib=a.hbm_gib,
                     param_dtype=a.param_dtype, optim_dtype=a.optim_dtype, fsdp=a.fsdp, budgets=a.budgets,
                     reserve=a.reserve, xla=True if a.xla else None, attention=a.attention,
                     device=a.device)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.to_json() if a.json else report)
    if report.recommended is None:
        if a.write is not None:
            print(f"nothing written to {a.write}: no policy fits", file=sys.stderr)
        return 1
    if a.write is not None:
        header = f"Written by python -m xla_ckpt fit {' '.join(argv if argv is not None else sys.argv[1:])}"
        try:
            with open(a.write, "w", encoding="utf-8") as f:
                f.write(to_toml(report.recommended, header=header))
        except OSError as e:
            print(f"error: --write: {e}", file=sys.stderr)
            return 2
        if not a.json:  # JSON output stays one parseable document
            print(f"wrote {a.write}: xla_ckpt.apply(model, {a.write!r}) applies {report.recommended_policy}")
    return 0
