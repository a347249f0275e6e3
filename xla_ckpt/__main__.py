"""``python -m xla_ckpt SUBCOMMAND``: ``explain`` (the plan a config makes and what autograd keeps with it),
``fit`` (which policy fits a training step on given chips) and ``presets`` (the shipped presets).

``python -m xla_ckpt --help`` lists them; ``python -m xla_ckpt SUBCOMMAND --help`` gives each one's options.
"""

from __future__ import annotations

import sys
from typing import Callable, Optional

from xla_ckpt._api.config_load import presets

# Each subcommand: (one line for --help, its main). Imported when run: `fit` needs only its own modules.
SUBCOMMANDS: dict[str, str] = {
    "explain": "CONFIG [--model gpt|ARCH|model_type] [--device cpu|xla]: the plan a config makes on a small "
               "model and the bytes autograd keeps, by module and by op",
    "fit": "(--hf-config FILE | --arch ARCH ...) --seq N --chips N --chip CHIP: which policy fits a training "
           "step in the chips' memory (estimated on the meta device)",
    "presets": "the shipped presets (names for apply(model, NAME), load_config(NAME), explain NAME)",
}


def usage() -> str:
    """The top-level help: every subcommand with its one line."""
    lines = ["usage: python -m xla_ckpt SUBCOMMAND [options]   (python -m xla_ckpt SUBCOMMAND --help for its options)",
             "", "subcommands:"]
    lines += [f"  {name:8s} {text}" for name, text in SUBCOMMANDS.items()]
    lines += ["", "CONFIG: a preset name (python -m xla_ckpt presets), a .toml, .yaml/.yml or .json file, or a policy "
              "name (xla_ckpt.policies.names())"]
    return "\n".join(lines)


def _list_presets() -> str:
    lines = ["presets (apply(model, NAME), load_config(NAME), explain NAME):"]
    for name, desc in presets().items():
        lines.append(f"  {name:20s} {desc}")
    return "\n".join(lines)


def _explain(argv: list[str]) -> int:
    from xla_ckpt._cli.explain import explain  # noqa: PLC0415

    return explain(argv)


def _fit(argv: list[str]) -> int:
    from xla_ckpt._cli.fit import main as fit_main  # noqa: PLC0415

    return fit_main(argv)


def _presets(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print("usage: python -m xla_ckpt presets\n\nThe shipped presets: names for apply(model, NAME), "
              "load_config(NAME) and explain NAME.")
        return 0
    if argv:
        print(f"python -m xla_ckpt presets: takes no arguments, got {' '.join(argv)}", file=sys.stderr)
        return 2
    print(_list_presets())
    return 0


_RUN: dict[str, Callable[[list[str]], int]] = {"explain": _explain, "fit": _fit, "presets": _presets}


def main(argv: Optional[list[str]] = None) -> int:
    """Run one subcommand; returns the exit status (2: a usage error, said on stderr)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(usage(), file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    run = _RUN.get(argv[0])
    if run is None:
        print(f"python -m xla_ckpt: unknown subcommand {argv[0]!r}; valid subcommands: {', '.join(_RUN)} "
              "(python -m xla_ckpt --help describes them)", file=sys.stderr)
        return 2
    return run(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
