"""One benchmark variant in a fresh process (XLA flags and device peaks must not mix).

    python bench/worker.py SPEC_JSON   -> prints one JSON line with the measurements
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_env(spec: dict[str, Any]) -> None:
    if spec["device"] == "xla":
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={spec['dump_dir']}".strip()


def _model(spec: dict[str, Any]) -> Any:
    import torch

    from xla_ckpt import hf_models
    from xla_ckpt.models import GPT, GPTConfig, llama_hf

    torch.manual_seed(0)
    if spec["model"] in hf_models.ARCHS:
        m = hf_models.build(spec["model"], d_model=spec["d_model"], n_layer=spec["layers"], n_head=spec["heads"],
                            seq_len=spec["seq"], vocab_size=spec["vocab"])
    elif spec["model"] == "llama-hf":
        m = llama_hf(vocab_size=spec["vocab"], d_model=spec["d_model"], n_layer=spec["layers"],
                     n_head=spec["heads"], seq_len=spec["seq"])
    else:
        m = GPT(GPTConfig(vocab_size=spec["vocab"], seq_len=spec["seq"], n_layer=spec["layers"],
                          n_head=spec["heads"], d_model=spec["d_model"], dropout=spec.get("dropout", 0.0)))
    return m.to(getattr(torch, spec["dtype"]))


def _blocks(model: Any) -> list[Any]:
    """The transformer blocks, as the presets' ``blocks = true`` selects them."""
    import xla_ckpt

    return [model.get_submodule(n) for n in xla_ckpt.find_blocks(model)]


def _megatron_torch_policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    import torch
    from torch.utils.checkpoint import CheckpointPolicy

    aten = torch.ops.aten
    return (CheckpointPolicy.MUST_SAVE if op.overloadpacket in (aten.mm, aten.addmm, aten.convolution)
            else CheckpointPolicy.PREFER_RECOMPUTE)


def _dots_torch_policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """``dots_saveable``'s decisions as a torch SAC policy: every matmul-class op saved (batched too)."""
    from torch.utils.checkpoint import CheckpointPolicy

    from xla_ckpt._policy.dots import DOT_PACKETS

    return CheckpointPolicy.MUST_SAVE if op.overloadpacket in DOT_PACKETS else CheckpointPolicy.PREFER_RECOMPUTE


# torch's SAC with the decisions of one of our presets: the reference a preset's step time is held to.
TORCH_SAC = {"torch_sac": _megatron_torch_policy, "torch_sac:dots": _dots_torch_policy}


def _wrap_torch(model: Any, kind: str, sac_observer: "_SacObserver") -> None:
    """Wrap each block with torch_xla's checkpoint or torch's SAC (the alternatives users have)."""
    import functools

    for blk in _blocks(model):
        fwd = functools.partial(type(blk).forward, blk)
        if kind == "torch_xla":
            from torch_xla.utils.checkpoint import checkpoint as xla_checkpoint

            blk.forward = functools.partial(xla_checkpoint, fwd)
        else:
            from torch.utils.checkpoint import checkpoint

            blk.forward = functools.partial(checkpoint, fwd, use_reentrant=False,
                                            context_fn=sac_observer.context_fn)


class _SacObserver:
    """torch SAC's context, plus (while ``active``) a dispatch mode above its forward mode that
    records what SAC keeps.

    SAC keeps the outputs its policy marks MUST_SAVE / PREFER_SAVE (its documented contract): the
    observer asks the same pure policy for each op it sees, instead of reading SAC's private cache
    (whose layout changed in torch 2.13). Inactive, it adds nothing to the timed steps.
    """

    def __init__(self, policy: Any = _megatron_torch_policy) -> None:
        self.policy = policy
        self.kept: list[Any] = []
        self.active = False

    def context_fn(self) -> Any:
        import contextlib

        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves
        from torch.utils.checkpoint import CheckpointPolicy, SelectiveCheckpointContext, create_selective_checkpoint_contexts

        policy = self.policy
        forward, recompute = create_selective_checkpoint_contexts(policy)
        if not self.active:
            return forward, recompute
        kept = self.kept

        class Observe(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                ctx = SelectiveCheckpointContext(is_recompute=False)
                if policy(ctx, func, *args, **kwargs) in (
                        True, CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
                    kept.extend(t for t in tree_leaves(out) if isinstance(t, torch.Tensor))
                return out

        @contextlib.contextmanager
        def observed() -> Any:
            with forward, Observe():
                yield

        return observed(), recompute


def _sac_bytes(saved: Any, cached: list[Any], block_inputs: list[Any]) -> int:
    """What torch SAC keeps: what our ledger saw outside its regions (torch's own saved-tensor hooks
    are innermost inside them), plus each block's inputs and SAC's saved outputs; each buffer once."""
    from xla_ckpt._base import xla as _xla

    kept = {e.key: e.nbytes for e in saved._counted()}
    tensors = list(block_inputs) + list(cached)
    for t in tensors:
        if hasattr(t, "untyped_storage"):
            kept[_xla.buffer_key(t)] = _xla.buffer_nbytes(t)
    return sum(kept.values())


def run(spec: dict[str, Any]) -> dict[str, Any]:
    _setup_env(spec)
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    import xla_ckpt

    dev_kind = spec["device"]
    if dev_kind == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        device = torch_xla.device()
    else:
        device = torch.device(dev_kind)
    from xla_ckpt import hf_models

    model = hf_models.to_device(_model(spec), device)  # re-ties tied weights (XLA unties them)
    variant = spec["variant"]
    sac_observer = _SacObserver(TORCH_SAC.get(variant, _megatron_torch_policy))
    result: dict[str, Any] = {"variant": variant, "error": None}
    if variant.startswith("xla_ckpt:"):
        report = xla_ckpt.apply(model, spec["config"])
        result["wrapped"] = len(report.wrapped)
        if report.unmatched_rules and not report.wrapped:
            result["error"] = "config matched no module of this model (nothing to compare)"
            return result
    elif variant == "torch_xla" or variant in TORCH_SAC:
        _wrap_torch(model, variant, sac_observer)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, spec["vocab"], (spec["batch"], spec["seq"]), generator=g).to(device)
    hf_batch = (hf_models.batch(spec["model"], model, batch=spec["batch"], seq_len=spec["seq"],
                                vocab_size=spec["vocab"], device=device) if spec["model"] in hf_models.ARCHS else {})

    def loss_fn() -> Any:
        if hf_batch:
            return model(**hf_batch).loss
        out = model(idx, idx) if spec["model"] == "gpt" else model(idx, labels=idx).loss
        return out

    def sync() -> None:
        if dev_kind == "xla":
            torch_xla.sync()
            xm.wait_device_ops()
        elif dev_kind == "cuda":
            torch.cuda.synchronize()

    def step() -> Any:
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        sync()
        return loss

    if spec.get("dropout") and dev_kind == "xla":  # the same masks in every variant's process (bench/dropout.py)
        xm.set_rng_state(0, device)  # torch.manual_seed does not seed XLA's generator
    elif spec.get("dropout"):
        torch.manual_seed(0)
    try:
        # Saved bytes (what autograd keeps between forward and backward) from one forward.
        block_inputs: list[Any] = []
        hooks = [b.register_forward_pre_hook(lambda m, a: block_inputs.append(a[0] if a else None)) for b in _blocks(model)]
        sac_observer.active = True
        with xla_ckpt.saved_activations() as saved:
            loss = loss_fn()
        sac_observer.active = False
        for h in hooks:
            h.remove()
        result["saved_bytes"] = (_sac_bytes(saved, sac_observer.kept, block_inputs) if variant in TORCH_SAC
                                 else saved.nbytes)
        result["host_bytes"] = saved.host_nbytes  # OFFLOAD: kept in host memory, not counted above
        del loss
        block_inputs.clear()
        sac_observer.kept.clear()
        sync()  # run (and forget) the measuring forward: it must not join the step's graph
        with FlopCounterMode(display=False) as fc:
            model.zero_grad(set_to_none=True)
            loss_fn().backward()
        result["flops"] = int(fc.get_total_flops())
        sync()
        if dev_kind == "cuda":
            torch.cuda.reset_peak_memory_stats()
        before = set(os.listdir(spec["dump_dir"])) if os.path.isdir(spec["dump_dir"]) else set()
        t0 = time.perf_counter()
        step()  # warm-up (on XLA: trace + compile + run)
        result["first_step_s"] = time.perf_counter() - t0
        step_graphs = (set(os.listdir(spec["dump_dir"])) - before) if os.path.isdir(spec["dump_dir"]) else set()
        times = []
        for _ in range(spec["steps"]):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        result["step_s"] = statistics.median(times)
        grads = torch.cat([p.grad.detach().float().reshape(-1).cpu() for p in model.parameters()
                           if p.grad is not None])
        torch.save(grads, spec["grads_path"])
        result["n_grads"] = sum(1 for p in model.parameters() if p.grad is not None)
        result["n_params"] = sum(1 for _ in model.parameters())
        if dev_kind == "cuda":
            result["device_peak_bytes"] = int(torch.cuda.max_memory_allocated())
        if dev_kind == "xla":
            import xla_dump as _xla_dump

            # The training step's graph: the one compiled during the warm-up step.
            peaks = {k: v for k, v in _xla_dump.compiled_peaks(spec["dump_dir"]).items() if k in step_graphs}
            result["compiled_peak_bytes"] = max(peaks.values()) if peaks else None
            try:  # TPU / GPU only: the CPU client has no memory info
                info = xm.get_memory_info(device)
                result["device_peak_bytes"] = int(info.get("peak_bytes_used", info.get("bytes_used", 0)))
            except Exception:
                result["device_peak_bytes"] = None
    except Exception as e:  # recorded as a result (e.g. torch SAC on XLA), not a silent skip
        result["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return result


def main() -> None:
    spec = json.loads(sys.argv[1])
    sys.path.insert(0, ROOT)
    spec.setdefault("dump_dir", tempfile.mkdtemp(prefix="xla_ckpt_dump_"))
    print("RESULT " + json.dumps(run(spec)))


if __name__ == "__main__":
    main()
