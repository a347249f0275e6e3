"""Memory benchmark: every policy preset vs the alternatives, side by side, one fresh process each.

    python bench/memory.py --device xla          # XLA:CPU here; a TPU VM: PJRT_DEVICE=TPU
    python bench/memory.py --device cuda | cpu
    python bench/memory.py --quick --json out.json --plot out.png
    python bench/memory.py --headline            # `make bench`: the README's table, a few minutes
    python bench/memory.py --openxla none full   # compiled-XLA rows too (bench/compiled.py)
    python bench/memory.py --dropout 0.1         # the GPT with dropout on XLA, beside its CPU bytes (bench/dropout.py)

Variants: no checkpointing, torch_xla's and torch's own checkpointing, every preset, memory_budget at
--budgets fractions and offload(p) for --offload policies. --headline keeps the default model and
selects the headline rows (HEADLINE_*: three presets, one budget, no offload, fewer rounds); what a
flag sets explicitly still wins. On XLA with the GPT, --headline adds the compiled-XLA rows
(torch.compile(backend="openxla"): none, megatron_selective, full, memory_budget 0.3; bench/compiled.py)
and the dropout rows (the GPT with dropout 0.1: none, megatron_selective, full; bench/dropout.py).

Per variant: bytes autograd keeps on the device (saved_activations; OFFLOAD's host copies apart, as
host MiB), compiled peak (XLA, from --xla_dump_to), device
peak (TPU/GPU-XLA: xm.get_memory_info; CUDA: max_memory_allocated), FLOPs of one step and the
recompute share, first-step time (XLA: compile), and the max abs difference of all parameter grads
from no checkpointing. Step times come from one more process that times every variant interleaved
(bench/timing.py): median over --rounds, spread (IQR / median), median per-round ratio to no
checkpointing, and on XLA the host trace time beside the step time.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import compiled
import dropout
import targets
import timing
from memory_plot import plot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # the checkout's library, as the workers use it

# The full sweep's defaults (`make bench-all`) and the headline selection (`make bench`, --headline).
BUDGETS = [0.1, 0.3, 0.5, 0.7, 0.9]
OFFLOAD = ["dots_saveable"]
ROUNDS = 15
HEADLINE_PRESETS = ["dots", "megatron_selective", "full"]
HEADLINE_BUDGETS = [0.3]
HEADLINE_OFFLOAD: list[str] = []
HEADLINE_ROUNDS = 10
HEADLINE_OPENXLA = compiled.HEADLINE  # XLA and the GPT only: bench/compiled.py


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["xla", "cuda", "cpu"], default="xla")
    from xla_ckpt.hf_models import ARCHS  # the library never imports bench/; bench uses the library

    p.add_argument("--model", choices=["gpt", "llama-hf", *ARCHS], default="gpt",
                   help="our GPT, llama-hf (use_cache=False), or a Hugging Face architecture from its default "
                        "config with random weights, sized by --layers/--d-model/--heads/--seq/--vocab")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--rounds", type=int, help=f"interleaved timing rounds, one step of each variant (default "
                                               f"{ROUNDS}; --headline: {HEADLINE_ROUNDS})")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per variant before the rounds")
    p.add_argument("--policies", nargs="*", help="config files (default: every preset in policies/; "
                                                 f"--headline: {', '.join(HEADLINE_PRESETS)})")
    p.add_argument("--budgets", nargs="*", type=float,
                   help=f"memory_budget fractions, each a variant (`budget = f` on every block; default {BUDGETS}, "
                        f"--headline: {HEADLINE_BUDGETS}); none: --budgets")
    p.add_argument("--offload", nargs="*",
                   help=f"policies whose SAVE becomes OFFLOAD (policies.offload), each a variant (default {OFFLOAD}, "
                        f"--headline: {HEADLINE_OFFLOAD}); none: --offload")
    p.add_argument("--openxla", nargs="*", help="compiled-XLA rows (torch.compile(backend='openxla')): none, "
                   f"presets, budget=F (XLA, --model gpt; default none, --headline: {' '.join(HEADLINE_OPENXLA)})")
    p.add_argument("--dropout", type=float, help="the dropout rows at this rate (XLA, --model gpt; default none, "
                   f"--headline: {dropout.HEADLINE}; 0: none)")
    p.add_argument("--headline", action="store_true", help="only the headline variants (`make bench`)")
    p.add_argument("--quick", action="store_true", help="a tiny configuration (tests, smoke runs)")
    p.add_argument("--json", help="write results (with the environment) to this path")
    p.add_argument("--plot", help="write a PNG: memory vs step-time ratio, Pareto front highlighted")
    a = p.parse_args(argv)
    if a.policies is None and a.headline:
        a.policies = [os.path.join(ROOT, "policies", f"{n}.toml") for n in HEADLINE_PRESETS]
    if a.budgets is None:
        a.budgets = HEADLINE_BUDGETS if a.headline else BUDGETS
    if a.offload is None:
        a.offload = HEADLINE_OFFLOAD if a.headline else OFFLOAD
    if a.rounds is None:
        a.rounds = HEADLINE_ROUNDS if a.headline else ROUNDS
    if a.openxla is None:
        a.openxla = HEADLINE_OPENXLA if a.headline and a.device == "xla" and a.model == "gpt" else []
    if a.openxla and (a.device != "xla" or a.model != "gpt"):
        p.error(f"--openxla needs --device xla and --model gpt (got {a.device}, {a.model}): bench/openxla_probe.py")
    if a.dropout is None:
        a.dropout = dropout.HEADLINE if a.headline and a.device == "xla" and a.model == "gpt" else 0.0
    if a.dropout and (a.device != "xla" or a.model != "gpt" or not 0 < a.dropout < 1):
        p.error(f"--dropout needs --device xla, --model gpt and a rate in (0, 1) (got {a.device}, {a.model}, "
                f"{a.dropout}): it compares XLA's bytes with CPU's")
    if a.quick:
        a.layers, a.d_model, a.heads, a.seq, a.batch, a.vocab = 2, 32, 2, 16, 2, 64
        a.rounds, a.warmup = min(a.rounds, 3), 1
    if a.rounds < 1 or a.warmup < 1:
        p.error(f"--rounds and --warmup must be >= 1 (got {a.rounds}, {a.warmup}): XLA compiles in the warm-up")
    return a


def _variants(a: argparse.Namespace) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("none", None)]
    if a.device == "xla":
        out.append(("torch_xla", None))
    out.append(("torch_sac", None))  # crashes on XLA in torch 2.9: recorded as a result
    configs = a.policies or sorted(glob.glob(os.path.join(ROOT, "policies", "*.toml")))
    for path in configs:
        name = os.path.splitext(os.path.basename(path))[0]
        if name != "none":
            out.append((f"xla_ckpt:{name}", os.path.abspath(path)))
        if name == "dots" and a.device != "xla":
            # torch's SAC with dots' decisions: tells the decisions' cost from the engine's.
            out.append(("torch_sac:dots", None))
    for f in a.budgets:
        out.append((f"xla_ckpt:budget={f:g}", {"checkpoint": [{"blocks": True, "budget": f}]}))
    for inner in a.offload:
        out.append((f"xla_ckpt:offload({inner})",
                    {"checkpoint": [{"blocks": True, "policy": {"name": "offload", "policy": inner}}]}))
    return out


def _run_variant(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, os.path.join(HERE, "worker.py"), json.dumps(spec)],
                          capture_output=True, text=True, env=env, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"variant": spec["variant"], "error": f"worker exited {proc.returncode}: {tail[0][:200]}"}


def _environment(a: argparse.Namespace) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "machine": platform.machine(), "device": a.device,
                           "PJRT_DEVICE": os.environ.get("PJRT_DEVICE"), "XLA_FLAGS": os.environ.get("XLA_FLAGS")}
    try:
        import torch_xla

        env["torch_xla"] = torch_xla.__version__
    except ImportError:
        env["torch_xla"] = None
    if a.device == "cuda" and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    return env


def portable(obj: Any) -> Any:
    """``obj`` with every path under the checkout made relative to it, for results that get committed.

    Workers need absolute paths (they run from any folder); a results file names repository files only,
    never the folder this checkout happens to sit in.

    Example: ``portable({"config": os.path.join(ROOT, "policies", "full.toml")})`` ->
    ``{"config": "policies/full.toml"}``.
    """
    if isinstance(obj, dict):
        return {k: portable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [portable(v) for v in obj]
    if isinstance(obj, str) and obj.startswith(ROOT + os.sep):
        return os.path.relpath(obj, ROOT)
    return obj


def _memory_key(device: str) -> str:
    return {"xla": "compiled_peak_bytes", "cuda": "device_peak_bytes"}.get(device, "saved_bytes")


def _derive(results: list[dict[str, Any]], grads: dict[str, Any]) -> None:
    base = next(r for r in results if r["variant"] == "none")
    for r in results:
        if r.get("error"):
            continue
        if base.get("flops"):
            r["recompute_flops"] = max(0, r["flops"] - base["flops"])
            r["recompute_share"] = r["recompute_flops"] / r["flops"]
        r["saved_ratio"] = r["saved_bytes"] / base["saved_bytes"] if base["saved_bytes"] else None
        if r["variant"] in grads and "none" in grads:
            r["grad_max_abs_diff"] = float((grads[r["variant"]] - grads["none"]).abs().max())
        for k in ("compiled_peak_bytes", "device_peak_bytes"):
            if r.get(k) and base.get(k):
                r[k.replace("_bytes", "_ratio")] = r[k] / base[k]


def _mib(n: Any) -> str:
    return "-" if n is None else f"{n / 2**20:9.2f}"


def _num(r: dict[str, Any], key: str, scale: float, width: int, digits: int) -> str:
    return f"{'-':>{width}s}" if r.get(key) is None else f"{scale * r[key]:{width}.{digits}f}"


def _table(results: list[dict[str, Any]]) -> str:
    head = (f"{'variant':30s} {'saved MiB':>9s} {'x none':>6s} {'host MiB':>9s} {'peak MiB':>9s} {'x none':>6s} "
            f"{'recomp%':>7s} {'step ms':>8s} {'IQR%':>5s} {'x time':>6s} {'trace ms':>8s} {'x trace':>7s} "
            f"{'1st s':>6s} {'grad diff':>9s}")
    lines = [head, "-" * len(head)]
    for r in results:
        if r.get("error"):
            lines.append(f"{r['variant']:30s} error: {r['error']}")
            continue
        peak = r.get("compiled_peak_bytes") or r.get("device_peak_bytes")
        peak_ratio = r.get("compiled_peak_ratio") or r.get("device_peak_ratio")
        lines.append(
            f"{r['variant']:30s} {_mib(r['saved_bytes'])} {r.get('saved_ratio') or 0:6.2f} {_mib(r.get('host_bytes'))} "
            f"{_mib(peak)} "
            f"{peak_ratio or 0:6.2f} {100 * r.get('recompute_share', 0):6.1f}% {_num(r, 'step_s', 1e3, 8, 1)} "
            f"{_num(r, 'step_spread', 100, 5, 0)} {_num(r, 'time_ratio', 1, 6, 2)} {_num(r, 'trace_s', 1e3, 8, 1)} "
            f"{_num(r, 'trace_ratio', 1, 7, 2)} {r['first_step_s']:6.1f} {r.get('grad_max_abs_diff', float('nan')):9.1e}"
        )
    return "\n".join(lines)


def _measure(a: argparse.Namespace, variants: list, tmp: str) -> tuple[list, list, list, dict, list]:
    """Every variant's memory probe, the compiled and dropout rows, and the interleaved timing (files in ``tmp``)."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        def tqdm(x: Any, **_: Any) -> Any:
            return x
    import torch

    results, grads = [], {}
    bar = tqdm(variants, desc=f"variants on {a.device}", unit="variant", file=sys.stderr)
    for name, config in bar:
        bar.set_postfix_str(name)
        spec = {"variant": name, "config": config, "device": a.device, "model": a.model, "layers": a.layers,
                "d_model": a.d_model, "heads": a.heads, "seq": a.seq, "batch": a.batch, "vocab": a.vocab,
                "dtype": a.dtype, "steps": 1, "dump_dir": os.path.join(tmp, "dump_" + name.replace(":", "_")),
                "grads_path": os.path.join(tmp, name.replace(":", "_") + ".pt")}
        r = _run_variant(spec)
        if not r.get("error") and os.path.exists(spec["grads_path"]):
            grads[name] = torch.load(spec["grads_path"])
        r.pop("step_s", None)  # this process's own step time: not comparable across processes
        results.append(r)
    _derive(results, grads)
    model = {k: getattr(a, k) for k in ("model", "layers", "d_model", "heads", "seq", "batch", "vocab", "dtype")}
    comp_variants = compiled.variants(a.openxla, os.path.join(ROOT, "policies"))
    comp = []  # the compiled-XLA rows: their own table, compared with lazy none and compiled none
    for name, _ in tqdm(comp_variants, desc="compiled (openxla)", unit="variant", file=sys.stderr):
        stem = os.path.join(tmp, name.replace(":", "_"))
        comp.append(compiled.probe(name, model, stem + "_dump", stem + ".pt"))
        if not comp[-1]["error"] and os.path.exists(stem + ".pt"):
            grads[name] = torch.load(stem + ".pt")
    drop = dropout.measure(a.dropout, model, tmp, _run_variant) if a.dropout else []  # the GPT with dropout
    ok = [(n, c) for (n, c), r in zip(variants + comp_variants, results + comp, strict=True) if not r.get("error")]
    entries = [{"name": n, "variant": n, "config": c, "model": model} for n, c in ok]
    entries += dropout.timing_entries(drop, model)
    print(f"interleaved timing: {len(entries)} variants, {a.rounds} rounds, one process", file=sys.stderr)
    timed = timing.launch({"device": a.device, "rounds": a.rounds, "warmup": a.warmup, "reference": "none",
                           "entries": entries})
    timing.merge(results, timed)
    timing.merge(comp, timed)
    compiled.derive(comp, results, timed, grads)
    dropout.derive(drop, timed, grads)
    goals = targets.targets(timed, a.device) + (targets.compiled_targets(comp) if comp else []) + (
        dropout.targets(drop) if drop else [])
    return results, comp, drop, timed, goals


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    variants = _variants(a)
    # The probes' dumps and gradients (about 190 MiB): removed however the run ends (Ctrl-C included).
    tmp = tempfile.mkdtemp(prefix="xla_ckpt_bench_")
    try:
        results, comp, drop, timed, goals = _measure(a, variants, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    title = (f"{a.model} L={a.layers} d={a.d_model} h={a.heads} seq={a.seq} batch={a.batch} {a.dtype} on {a.device}")
    print(title)
    print(_table(results))
    print(f"step/trace: median of {a.rounds} interleaved rounds in one process (bench/timing.py); IQR% = "
          f"(p75 - p25) / median; x = median of per-round ratios to none; trace = host time until sync (XLA)")
    spreads = [r["step_spread"] for r in results if r.get("step_spread") is not None]
    if spreads:
        print(f"this run's spread: step IQR {100 * min(spreads):.0f}-{100 * max(spreads):.0f}% of the median; "
              f"load average {timed['loadavg_before']:.1f} -> {timed['loadavg_after']:.1f} on {os.cpu_count()} CPUs")
    if timed.get("error"):
        print(f"timing: {timed['error']}")
    if comp:
        print("\ncompiled XLA (torch.compile(backend='openxla'), fenced): peak = the largest of the step's programs "
              "(exact bytes), host/step: the same interleaved rounds, per-round ratios")
        print("\n".join(compiled.table(comp)))
    if drop:
        print(f"\ndropout {a.dropout:g} (bench/dropout.py): saved bytes on XLA and on CPU eager (exact), compiled peak "
              "(exact), host/step per round over dropout none's, grads against dropout none's")
        print("\n".join(dropout.table(drop)))
    print("\n".join(targets.lines(goals)))
    doc = portable({"environment": _environment(a), "config": vars(a), "results": results, "compiled": comp,
                    "dropout": drop, "targets": goals, "timing": {k: v for k, v in timed.items() if k != "entries"}})
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    if a.plot:
        os.makedirs(os.path.dirname(os.path.abspath(a.plot)), exist_ok=True)
        plot(results, _memory_key(a.device), a.plot, title, compiled=comp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
