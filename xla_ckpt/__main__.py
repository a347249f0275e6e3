"""``python -m xla_ckpt explain CONFIG``: the plan a config makes and what autograd keeps with it.

``python -m xla_ckpt`` (or ``presets``) lists the shipped presets with their descriptions.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

import torch

from xla_ckpt._apply import apply
from xla_ckpt._config import ConfigError, load_config
from xla_ckpt._presets import presets
from xla_ckpt._report import SavedReport, _human, saved_activations
from xla_ckpt.hf_models import ARCHS
from xla_ckpt.models import GPT, GPTConfig, llama_hf

USAGE = ("usage: python -m xla_ckpt explain CONFIG [--model gpt|llama-hf|" + "|".join(ARCHS) + "] [--device cpu|xla]\n"
         "       python -m xla_ckpt presets\n"
         "CONFIG: a preset name (below) or a .toml, .yaml/.yml or .json file")


def _device(name: str) -> torch.device:
    if name == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla  # noqa: PLC0415

        return torch_xla.device()
    return torch.device(name)


def _model(kind: str, args: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind in ARCHS:
        from xla_ckpt import hf_models  # noqa: PLC0415

        return hf_models.build(kind, d_model=args.d_model, n_layer=args.layers, n_head=args.heads,
                               seq_len=args.seq, vocab_size=512)
    if kind == "llama-hf":
        return llama_hf(d_model=args.d_model, n_layer=args.layers, n_head=args.heads, seq_len=args.seq)
    return GPT(GPTConfig(d_model=args.d_model, n_layer=args.layers, n_head=args.heads, seq_len=args.seq))


def _kept(model: torch.nn.Module, kind: str, args: argparse.Namespace, device: torch.device) -> SavedReport:
    args_: tuple = ()
    inputs: dict = {}
    if kind in ARCHS:
        from xla_ckpt import hf_models  # noqa: PLC0415

        inputs = hf_models.batch(kind, model, batch=args.batch, seq_len=args.seq, vocab_size=512, device=device)
    else:
        args_ = (torch.randint(0, 512, (args.batch, args.seq), generator=torch.Generator().manual_seed(0)).to(device),)
    with saved_activations() as report:
        out = model(*args_, **inputs)
    del out
    return report


def explain(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xla_ckpt explain", description=__doc__)
    p.add_argument("config", help="a preset name (python -m xla_ckpt presets) or a .toml, .yaml/.yml or .json file")
    p.add_argument("--model", choices=["gpt", "llama-hf", *ARCHS], default="gpt",
                   help="our GPT, or a Hugging Face architecture from its default config (random weights)")
    p.add_argument("--device", choices=["cpu", "xla", "cuda"], default="cpu")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    device = _device(args.device)
    baseline = _kept(_model(args.model, args).to(device), args.model, args, device)
    model = _model(args.model, args).to(device)
    plan = apply(model, cfg)
    report = _kept(model, args.model, args, device)
    if cfg.description:
        print(cfg.description)
    print(plan)
    print()
    print(f"kept for backward by module ({args.model}, {device}):")
    for name, n in report.by_module().items():
        print(f"  {name or '<top>':40s} {_human(n):>10}")
    print("kept for backward by op:")
    for name, n in report.by_op().items():
        print(f"  {name or '-':40s} {_human(n):>10}")
    ratio = report.nbytes / baseline.nbytes if baseline.nbytes else float("nan")
    print(f"total: {_human(report.nbytes)} ({report.nbytes} bytes) vs {_human(baseline.nbytes)} "
          f"({baseline.nbytes} bytes) without checkpointing: {ratio:.2f}x")
    return 0


def _list_presets() -> str:
    lines = ["presets (apply(model, NAME), load_config(NAME), explain NAME):"]
    for name, desc in presets().items():
        lines.append(f"  {name:20s} {desc}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "explain":
        return explain(argv[1:])
    if argv and argv[0] == "fit":
        from xla_ckpt._fit_cli import main as fit_main  # noqa: PLC0415

        return fit_main(argv[1:])
    print(USAGE)
    print(_list_presets())
    return 0 if argv and argv[0] in ("presets", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
