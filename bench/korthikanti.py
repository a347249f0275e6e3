"""Per-layer activation bytes of a GPT-2-shaped block against Korthikanti et al. 2022 (Megatron, sec. 4).

    python bench/korthikanti.py [--json bench/results/korthikanti.json]

The paper counts, per transformer layer, in 16-bit activations with 1-byte dropout masks:
``sbh(34 + 5as/h)`` without recompute, ``34 sbh`` with selective recompute (the attention core:
scores, softmax, dropout), ``2 sbh`` with full recompute (the layer input). ``estimate`` runs the HF
GPT-2 block (bf16, dropout 0.1 as configured, ``use_cache=False``) on meta at 1 and 2 layers; the
difference is one layer. Rows: math SDPA (the default: XLA's lowering) and ``attention="flash"``, each
for ``device="cpu"`` (the default: dropout noise in bf16, bf16 LayerNorm statistics; measured) and
``device="cuda"`` (1-byte dropout masks and fp32 statistics, as the paper's GPUs; modelled).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

import xla_ckpt  # noqa: E402
from xla_ckpt._estimate.fit import hf_builder  # noqa: E402

# GPT-2 XL's shape (h 1600, 25 heads, seq 1024), batch 1; vocab small (the head is outside the layers).
SHAPE = dict(h=1600, a=25, s=1024, b=1)
POLICIES = {"none": "sbh(34 + 5as/h)", "megatron_selective": "34 sbh", "full": "2 sbh"}


def paper(policy: str, s: int, b: int, h: int, a: int) -> int:
    return {"none": s * b * h * 34 + 5 * a * s * s * b, "megatron_selective": 34 * s * b * h,
            "full": 2 * s * b * h}[policy]


def per_layer(policy: str, attention: str, device: str) -> tuple[int, int]:
    """(bytes, recompute FLOPs) one GPT-2 layer adds."""
    sh = SHAPE
    cfg = dict(model_type="gpt2", n_embd=sh["h"], n_head=sh["a"], n_layer=1, n_positions=sh["s"], vocab_size=256)
    build, _, _, _ = hf_builder(cfg, sh["b"], sh["s"], torch.bfloat16)
    out = []
    for n in (1, 2):
        model, args, kwargs = build(n)
        est = xla_ckpt.estimate(model, *args, config=policy, attention=attention, device=device,
                                  use_cache=False, **kwargs)
        out.append((est.activation_bytes, est.recompute_flops))
    return out[1][0] - out[0][0], out[1][1] - out[0][1]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    a = p.parse_args()
    sh = SHAPE
    sbh = sh["s"] * sh["b"] * sh["h"]
    rows = []
    for device in ("cpu", "cuda"):
        for attention in ("math", "flash"):
            for policy, formula in POLICIES.items():
                got, flops = per_layer(policy, attention, device)
                ref = paper(policy, sh["s"], sh["b"], sh["h"], sh["a"])
                rows.append(dict(device=device, attention=attention, policy=policy, formula=formula, paper=ref,
                                 estimate=got, ratio=got / ref, estimate_sbh=got / sbh, recompute_flops=flops))
    print(f"GPT-2 shape: h {sh['h']}, a {sh['a']}, s {sh['s']}, b {sh['b']}, bf16; 5as/h = "
          f"{5 * sh['a'] * sh['s'] / sh['h']:g}; one layer, bytes")
    print("| device | kernel | policy | paper | paper bytes | estimate | estimate / sbh | estimate / paper | "
          "recompute FLOPs |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['device']} | {r['attention']} | {r['policy']} | {r['formula']} | {r['paper']:,} | "
              f"{r['estimate']:,} | "
              f"{r['estimate_sbh']:.2f} | {r['ratio']:.4f} | {r['recompute_flops']:,} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"shape": sh, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
