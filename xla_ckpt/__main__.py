"""``python -m xla_ckpt explain CONFIG``: the plan a config makes and what autograd keeps with it.

``python -m xla_ckpt`` (or ``presets``) lists the shipped presets with their descriptions.
"""

from __future__ import annotations

import sys
from typing import Optional

from xla_ckpt._cli.explain import explain
from xla_ckpt._api.config_load import presets

USAGE = ("usage: python -m xla_ckpt explain CONFIG [--model gpt|ARCH|any causal-LM model_type] [--device cpu|xla]\n"
         "       python -m xla_ckpt presets\n"
         "CONFIG: a preset name (below) or a .toml, .yaml/.yml or .json file")


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
        from xla_ckpt._cli.fit import main as fit_main  # noqa: PLC0415

        return fit_main(argv[1:])
    print(USAGE)
    print(_list_presets())
    return 0 if argv and argv[0] in ("presets", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
