"""XLA's compiled peak against ``xla_ckpt.estimate``: the band ``fit`` applies on XLA chips.

    python bench/xla_band.py                      # every case, one fresh process per model and size
    python bench/xla_band.py --json bench/results/xla_band.json

Per case (model, size, policy): one training step (forward + backward, one graph) on XLA:CPU, its
compiled peak from ``--xla_dump_to``, and the estimate of the same step on the meta device. The
ratio is ``(peak - parameters - gradients) / (estimate.activation_bytes + working)``: what XLA holds
beyond the weights and their gradients, per byte the engine says is live at the backward's peak: what
autograd keeps, plus the one block a recompute brings back at a time (``working``: the most a block
keeps unchecked beyond what it keeps under the policy). ``fit`` adds parameters and gradients itself
and charges ``(activations + working) x`` the band's upper end.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

# (model, d_model, layers, heads, seq, batch)
CASES = [
    ("gpt", 128, 2, 4, 128, 4), ("llama", 128, 2, 4, 128, 4), ("gpt2", 128, 2, 4, 128, 4), ("qwen2", 128, 2, 4, 128, 4),
    ("gpt", 192, 3, 4, 192, 2), ("llama", 192, 3, 4, 192, 2), ("gpt2", 192, 3, 4, 192, 2), ("qwen2", 192, 3, 4, 192, 2),
]
POLICIES = ["none", "full", "megatron_selective", "dots", "budget0.25"]


def _how(policy: str) -> object:
    if policy.startswith("budget"):
        return {"checkpoint": [{"blocks": True, "budget": float(policy[6:])}]}
    return policy


def worker(case: list, dump: str) -> list[dict]:
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump}"
    import copy

    import torch
    import torch_xla

    import xla_ckpt
    from xla_ckpt import hf_models
    import xla_dump as _xla_dump
    from xla_ckpt._estimate.scale import recompute_working_bytes
    from xla_ckpt.models import GPT, GPTConfig

    model_name, d, layers, heads, seq, batch = case
    dev = torch_xla.device()
    torch.manual_seed(0)
    if model_name == "gpt":
        base = GPT(GPTConfig(d_model=d, n_layer=layers, n_head=heads, seq_len=seq))
        idx = torch.randint(0, 512, (batch, seq))
        args, kwargs = (idx, idx), {}
    else:
        base = hf_models.build(model_name, d_model=d, n_layer=layers, n_head=heads, seq_len=seq, vocab_size=512)
        args, kwargs = (), hf_models.batch(model_name, base, batch=batch, seq_len=seq, vocab_size=512)
    n_param_bytes = sum(p.numel() * p.element_size() for p in base.parameters())
    blocks = xla_ckpt.find_blocks(base)
    unchecked = xla_ckpt.estimate(base, *args, config="none", **kwargs)
    out = []
    for policy in POLICIES:
        est = xla_ckpt.estimate(base, *args, config=_how(policy), **kwargs)
        working = recompute_working_bytes(est, unchecked, blocks)
        m = hf_models.to_device(copy.deepcopy(base), dev)
        xla_ckpt.apply(m, _how(policy))
        before = set(glob.glob(os.path.join(dump, "*buffer-assignment.txt")))
        a = tuple(t.to(dev) for t in args)
        a = (a[0], a[0]) if model_name == "gpt" else a
        kw = {k: v.to(dev) for k, v in kwargs.items()}
        try:
            res = m(*a, **kw)
            loss = res.loss if hasattr(res, "loss") else res
            loss.backward()
            torch_xla.sync()
        except xla_ckpt.CheckpointError as e:  # the real XLA run refused: recorded, left out of the band
            out.append(dict(model=model_name, d_model=d, layers=layers, seq=seq, batch=batch, policy=policy,
                            error=str(e)[:300]))
            print(json.dumps(out[-1]), flush=True)
            continue
        new = sorted(set(glob.glob(os.path.join(dump, "*buffer-assignment.txt"))) - before)
        peaks = [_xla_dump.parse_peak_bytes(open(f, encoding="utf-8", errors="replace").read()) or 0 for f in new]
        peak = max(peaks, default=0)
        ratio = (peak - 2 * n_param_bytes) / (est.activation_bytes + working)
        out.append(dict(model=model_name, d_model=d, layers=layers, seq=seq, batch=batch, policy=policy, peak=peak,
                        param_bytes=n_param_bytes, estimate=est.activation_bytes, working=working, ratio=round(ratio, 4)))
        print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--resume", action="store_true", help="keep the cases already in --json, run the others")
    a = p.parse_args()
    if a.worker is not None:
        with tempfile.TemporaryDirectory() as dump:
            worker(json.loads(a.worker), dump)
        return
    rows: list[dict] = []
    if a.resume and a.json and os.path.exists(a.json):
        with open(a.json, encoding="utf-8") as f:
            rows = json.load(f)["cases"]
    done = {(r["model"], r["d_model"], r["layers"], r["seq"], r["batch"]) for r in rows}
    for case in CASES:
        if (case[0], case[1], case[2], case[4], case[5]) in done:
            continue
        r = subprocess.run([sys.executable, __file__, "--worker", json.dumps(case)], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
        got = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        if r.returncode or len(got) != len(POLICIES):
            print(r.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"worker failed for {case}")
        rows += got
        for row in got:
            if "error" in row:
                print(f"{row['model']:6s} d{row['d_model']:<4d} {row['policy']:20s} XLA run raised: {row['error']}")
                continue
            print(f"{row['model']:6s} d{row['d_model']:<4d} L{row['layers']} seq{row['seq']:<4d} {row['policy']:20s} "
                  f"peak {row['peak']:>11,d}  estimate {row['estimate']:>11,d}  ratio {row['ratio']:.3f}", flush=True)
        _write(rows, a.json)  # after every case: a partial run still publishes what it measured
    _write(rows, a.json)


def _write(rows: list[dict], path: str | None) -> None:
    # One row per case and policy (a resumed run may have measured a case twice: the figures are deterministic).
    rows[:] = list({(r["model"], r["d_model"], r["layers"], r["seq"], r["batch"], r["policy"]): r for r in rows}.values())
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    print(f"band: {min(ratios):.3f} - {max(ratios):.3f} over {len(rows)} cases", flush=True)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"band": [min(ratios), max(ratios)], "cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
