"""Long runs: a small GPT with dropout trained with an optimizer, checkpointed vs not, step by step.

CPU: 100 steps, bitwise equal losses and parameters at every step, and no growth in live tensors
(nothing the engine keeps outlives a step). XLA: 20 steps, equal to tolerance, and no graph is
compiled after the first steps (the engine traces the same graph every step).
"""

from __future__ import annotations

import copy
import gc

import pytest
import torch

import xla_ckpt
from xla_ckpt.models import GPT, GPTConfig

pytestmark = pytest.mark.slow  # long training runs: 100 CPU steps, 20 XLA steps

CFG = GPTConfig(vocab_size=64, seq_len=16, d_model=32, n_head=4, n_layer=2, dropout=0.1)
# XLA:CPU compiles the two models into different graphs: float32 rounding differs slightly.
XLA_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _pair(device, policy):
    torch.manual_seed(0)
    ref = GPT(CFG).to(device)
    ours = copy.deepcopy(ref)
    for blk in ours.layers:
        xla_ckpt.checkpointed(blk, policy=policy)
    return ref, ours


def _live_tensors() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))


def _step(model, opt, idx, tgt, seed, device):
    torch.manual_seed(seed)
    if device.type == "xla":
        import torch_xla.core.xla_model as xm

        xm.set_rng_state(seed, device)
    opt.zero_grad(set_to_none=True)
    loss = model(idx, tgt)
    loss.backward()
    opt.step()
    return loss.detach()


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_with_no_batch_dims_saveable"])
def test_hundred_cpu_steps_bitwise(policy):
    device = torch.device("cpu")
    ref, ours = _pair(device, policy)
    opt_r = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    live = []
    for step in range(100):
        idx = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=gen)
        tgt = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=gen)
        lr = _step(ref, opt_r, idx, tgt, step, device)
        lo = _step(ours, opt_o, idx, tgt, step, device)
        assert torch.equal(lo, lr), f"step {step}: loss {lo} vs {lr}"
        for (n, p), q in zip(ref.named_parameters(), ours.parameters(), strict=True):
            assert torch.equal(q, p), f"step {step}: parameter {n} differs"
        if step in (10, 99):
            live.append(_live_tensors())
    assert live[1] <= live[0], f"live tensors grew from {live[0]} to {live[1]}"


@pytest.mark.xla
def test_twenty_xla_steps_no_recompilation(xla_device):
    import torch_xla
    import torch_xla.debug.metrics as met

    ref, ours = _pair(xla_device, "dots_with_no_batch_dims_saveable")
    opt_r = torch.optim.SGD(ref.parameters(), lr=1e-2)
    opt_o = torch.optim.SGD(ours.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    compiles = []
    for step in range(20):
        idx = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=gen).to(xla_device)
        tgt = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=gen).to(xla_device)
        lr = _step(ref, opt_r, idx, tgt, step, xla_device)
        torch_xla.sync()
        lo = _step(ours, opt_o, idx, tgt, step, xla_device)
        torch_xla.sync()
        torch.testing.assert_close(lo.cpu(), lr.cpu(), **XLA_TOL)
        compiles.append(met.metric_data("CompileTime")[0])
    assert compiles[-1] == compiles[4], f"graphs compiled after step 4: {compiles}"
    for (n, p), q in zip(ref.named_parameters(), ours.parameters(), strict=True):
        torch.testing.assert_close(q.cpu(), p.cpu(), msg=lambda m, n=n: f"{n}: {m}", **XLA_TOL)
