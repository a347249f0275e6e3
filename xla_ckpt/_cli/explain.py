"""``python -m xla_ckpt explain CONFIG``: the plan a config makes and what autograd keeps with it.

``--model`` is our GPT (``gpt``), one of the tested Hugging Face architectures (``hf_models.ARCHS``),
or any causal-LM ``model_type`` the installed transformers has (``mixtral``, ``olmo2``, ...), built
small from its default config with random weights. Both tables speak one vocabulary: modules by their
fully qualified name, and each kept tensor by the ATen op that produced it (``aten.mm``), whether the
engine recorded the op (inside a checkpoint region) or autograd's node named it (``AddmmBackward0``
is ``aten.addmm``); what no op produced is named in parentheses: ``(region input)``, ``(input)``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
from typing import Any, Optional

import torch

from xla_ckpt._api.apply import apply
from xla_ckpt._api.config import ConfigError
from xla_ckpt._api.forms import as_config
from xla_ckpt._api.wrap import checkpoint_policy
from xla_ckpt._hooks.report import COMPILED, SavedReport, _human, saved_activations
from xla_ckpt.hf_models import ARCHS
from xla_ckpt.models import GPT, GPTConfig

__all__ = ["explain", "producer"]

# ``llama-hf`` is accepted for ``llama``: the same architecture, from its default config as users meet it,
# so one name is explained and both work.
ALIASES = {"llama-hf": "llama"}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def producer(label: str) -> str:
    """The report's ``grad_fn`` label in the table's one vocabulary: an ATen op name, or ``(what)``.

    Example:
        >>> producer("AddmmBackward0"), producer("aten.mm"), producer("region input")
        ('aten.addmm', 'aten.mm', '(region input)')
    """
    if label.startswith("aten."):
        return label  # recorded by a checkpoint region
    if not label or label == "-":
        return "(input)"  # a leaf or a tensor no op in the graph produced (the batch, a frozen weight's input)
    if label == COMPILED:
        return "(compiled graph)"
    if label == "region input":
        return "(region input)"
    m = re.fullmatch(r"(\w+?)Backward\d*", label)
    if m:
        name = _CAMEL.sub("_", m.group(1)).lower()
        # The underscored op first: autograd's SoftmaxBackward0 / ToCopyBackward0 belong to aten._softmax /
        # aten._to_copy, the ops a region records (the plain names are their composite wrappers).
        for candidate in ("_" + name, name):
            if hasattr(torch.ops.aten, candidate):
                return f"aten.{candidate}"
    return f"({label})"  # a custom autograd.Function (e.g. xla_ckpt.linear's) or an op unknown to ATen


def _device(name: str) -> torch.device:
    if name == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla  # noqa: PLC0415

        return torch_xla.device()
    return torch.device(name)


def _resolve(kind: str) -> str:
    """``kind`` as a model name, or a ValueError naming what is accepted."""
    kind = ALIASES.get(kind, kind)
    if kind == "gpt" or kind in ARCHS:
        return kind
    try:
        from xla_ckpt.hf_models import causal_lm_types  # noqa: PLC0415

        known = causal_lm_types()
    except ImportError:
        known = []
    if kind in known:
        return kind
    raise ValueError(f"unknown --model {kind!r}: give gpt, one of {', '.join(ARCHS)}, or a causal-LM model_type "
                     f"of the installed transformers ({len(known)} of them, e.g. mixtral, olmo2, bloom)"
                     + ("" if known else "; transformers is not installed"))


def _model(kind: str, args: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "gpt":
        return GPT(GPTConfig(d_model=args.d_model, n_layer=args.layers, n_head=args.heads, seq_len=args.seq))
    from xla_ckpt import hf_models  # noqa: PLC0415

    return hf_models.build(kind, d_model=args.d_model, n_layer=args.layers, n_head=args.heads,
                           seq_len=args.seq, vocab_size=512)


def _kept(model: torch.nn.Module, kind: str, args: argparse.Namespace, device: torch.device) -> SavedReport:
    args_: tuple = ()
    inputs: dict[str, Any] = {}
    if kind != "gpt":
        from xla_ckpt import hf_models  # noqa: PLC0415

        inputs.update(hf_models.batch(kind, model, batch=args.batch, seq_len=args.seq, vocab_size=512, device=device))
        if "use_cache" in inspect.signature(model.forward).parameters:
            # A training step runs without a key/value cache; with it on, each checkpointed layer turns it off
            # and warns, which says nothing about the config being explained.
            inputs["use_cache"] = False
    else:
        args_ = (torch.randint(0, 512, (args.batch, args.seq), generator=torch.Generator().manual_seed(0)).to(device),)
    with saved_activations() as report:
        out = model(*args_, **inputs)
    del out
    return report


def planning(model: torch.nn.Module) -> list[str]:
    """One line per planning policy of ``model``'s checkpointed modules that says how it planned its
    regions (``memory_budget``: exactly, or greedily and why), after a forward has run.

    Example:
        >>> planning(model)
        ['memory_budget(0.3): 1 region structure: exact']
    """
    lines, seen = [], set()
    for m in model.modules():
        policy = checkpoint_policy(m)
        planned = getattr(policy, "planned", None)
        if not callable(planned) or id(policy) in seen:
            continue
        seen.add(id(policy))
        how = planned()
        n = sum(how.values())
        shown = "; ".join(f"{k}" + (f" (x{v})" if v > 1 else "") for k, v in sorted(how.items()))
        lines.append(f"{policy!r}: {n} region structure{'s' if n != 1 else ''}: {shown or 'none planned'}")
    return lines


def by_producer(report: SavedReport) -> dict[str, int]:
    """Counted bytes per producing op, in :func:`producer`'s vocabulary, largest first."""
    out: dict[str, int] = {}
    for label, n in report.by_op().items():
        key = producer(label)
        out[key] = out.get(key, 0) + n
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def explain(argv: Optional[list[str]] = None) -> int:
    """The ``explain`` subcommand; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m xla_ckpt explain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="a preset name (python -m xla_ckpt presets), a .toml, .yaml/.yml or .json file, or "
                                  "a policy name (xla_ckpt.policies.names(): every transformer block with it)")
    p.add_argument("--model", default="gpt", metavar="MODEL",
                   help=f"gpt (ours), one of {', '.join(ARCHS)}, or any causal-LM model_type of the installed "
                        "transformers (e.g. mixtral), built small from its default config (random weights)")
    p.add_argument("--device", choices=["cpu", "xla", "cuda"], default="cpu")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    args = p.parse_args(argv)
    try:
        kind = _resolve(args.model)
        cfg = as_config(args.config, "python -m xla_ckpt explain")
        base = _model(kind, args)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if kind != args.model:
        print(f"note: --model {args.model} is {kind} (the same architecture from its default config)", file=sys.stderr)
    device = _device(args.device)
    baseline = _kept(base.to(device), kind, args, device)
    model = _model(kind, args).to(device)
    plan = apply(model, cfg)
    report = _kept(model, kind, args, device)
    if cfg.description:
        print(cfg.description)
    print(plan)
    for line in planning(model):
        print(f"  planned: {line}")
    print()
    print(f"kept for backward by module ({kind}, {device}):")
    for name, n in report.by_module().items():
        print(f"  {name or '<top>':40s} {_human(n):>10}")
    print("kept for backward by producing op (aten.*: the op; (...): not an op's output):")
    for name, n in by_producer(report).items():
        print(f"  {name:40s} {_human(n):>10}")
    print("kept for backward by tag (xla_ckpt.tag, or the role apply tags a Hugging Face projection with; "
          "-: untagged):")
    tagged = report.by_tag()
    for name, n in tagged.items():
        print(f"  {name:40s} {_human(n):>10}")
    if report.nbytes > sum(tagged.values()):
        print(f"  {'-':40s} {_human(report.nbytes - sum(tagged.values())):>10}")
    ratio = report.nbytes / baseline.nbytes if baseline.nbytes else float("nan")
    print(f"total: {_human(report.nbytes)} ({report.nbytes} bytes) vs {_human(baseline.nbytes)} "
          f"({baseline.nbytes} bytes) without checkpointing: {ratio:.2f}x")
    return 0
