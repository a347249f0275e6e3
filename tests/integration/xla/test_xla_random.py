"""Random ops recomputed on XLA when the policy says so: the same numbers as the forward, the RNG stream after
the step the plain step's.

torch_xla's RNG is a base seed (advanced by each sync) and a running seed (advanced by each traced random op);
``set_rng_state`` sets both. The replay sets the running seed to the forward's for each recomputed random op
and back after it; the base it moved is put back at the end of backward (``_record.replay_state.settle_xla``). So the
state is read both before the sync (a draw too many shows only there) and after it (a moved base shows only
there), and a mask drawn after the step must equal the plain step's.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import xla_ckpt
from helpers import replay_kind
from xla_ckpt import policies
from xla_ckpt._engine import program as _program

aten = torch.ops.aten
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}  # the checkpointed and the plain step compile to other graphs
RANDOM = (aten.bernoulli, aten.native_dropout, aten.rand, aten.uniform)

POLICIES = {"nothing": lambda: "nothing_saveable", "matmuls": lambda: policies.save_ops(aten.mm, aten.addmm)}


class _Count(TorchDispatchMode):
    """Counts random ops (by packet) that pass the caller's level."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func.overloadpacket in RANDOM:
            self.n += 1
        return func(*args, **(kwargs or {}))


def _block(device: torch.device) -> nn.Module:
    gen = torch.Generator().manual_seed(3)
    block = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.3), nn.Linear(32, 16), nn.Dropout(0.2))
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return block.to(device)


def _step(device: torch.device, policy: Any = None, sync_between: bool = False, micro: int = 1) -> dict[str, Any]:
    """``micro`` forward+backward of the block (plain when ``policy`` is None), then the RNG stream."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    block = _block(device)
    xs = [torch.randn(4, 8, 16, generator=torch.Generator().manual_seed(i)).to(device) for i in range(micro)]
    torch_xla.sync()
    xm.set_rng_state(1234, device)
    got: dict[str, Any] = {}
    for i, x in enumerate(xs):
        x.requires_grad_()
        out = block(x) if policy is None else xla_ckpt.checkpoint(block, x, policy=policy)
        if sync_between and i == 0:
            torch_xla.sync()  # a user's sync between forward and backward (the next forward has none)
        (out * torch.arange(16, device=device)).sum().backward()
        got[f"out{i}"], got[f"x{i}.grad"] = out.detach(), x.grad
    got["state"] = xm.get_rng_state(device)  # the running seed: a draw too many shows here
    got["next mask"] = F.dropout(torch.ones(256, device=device), 0.5)
    torch_xla.sync()
    got["state after sync"] = xm.get_rng_state(device)  # the base seed's successor: a moved base shows here
    got.update({f"{n}.grad": p.grad for n, p in block.named_parameters()})
    return {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in got.items()}


def _assert_same(ref: dict[str, Any], got: dict[str, Any]) -> None:
    for name, r in ref.items():
        g = got[name]
        assert g is not None, f"{name} is None"
        if name.startswith("state"):
            assert g == r, f"the RNG {name} differs: {g} vs {r}"
        elif name == "next mask":
            assert torch.equal(g, r), "the mask drawn after the step differs from the plain step's"
        else:
            torch.testing.assert_close(g, r, msg=lambda m, name=name: f"{name} differs: {m}", **XLA_TOL)


@pytest.mark.parametrize("direct", [True, False], ids=["program", "general"])
@pytest.mark.parametrize("name", list(POLICIES))
def test_recomputed_dropout_is_exact_on_xla(xla_device, name, direct, monkeypatch):
    """Both dropouts recomputed (not kept): values, grads and the RNG stream equal the plain step's."""
    runs = []
    original = _program.Program.run
    monkeypatch.setattr(_program.Program, "run", lambda self, *a: runs.append(1) or original(self, *a))
    ref = _step(xla_device)
    with replay_kind(direct):
        with xla_ckpt.saved_activations() as probe:
            xla_ckpt.checkpoint(_block(xla_device), torch.randn(4, 8, 16, device=xla_device, requires_grad=True),
                                policy=POLICIES[name]())
        got = _step(xla_device, POLICIES[name]())
    assert "bernoulli" not in str(probe), f"a dropout mask is kept:\n{probe}"
    assert bool(runs) == direct, "the recorded program ran" if not direct else "the recorded program did not run"
    _assert_same(ref, got)


@pytest.mark.parametrize("direct", [True, False], ids=["program", "general"])
def test_a_sync_between_forward_and_backward_and_accumulation(xla_device, direct):
    """A sync between forward and backward (the draw still comes from the forward's seed), and two
    micro-batches before the sync (the second forward draws after the first backward's replay)."""
    ref = _step(xla_device, sync_between=True, micro=2)
    with replay_kind(direct):
        got = _step(xla_device, "nothing_saveable", sync_between=True, micro=2)
    _assert_same(ref, got)


@pytest.mark.parametrize("direct", [True, False], ids=["program", "general"])
def test_torch_random_op_case_sees_the_dropout_once_in_backward(xla_device, direct):
    """torch's test_compile_selective_checkpoint_random_op: sigmoid saved, dropout recomputed exactly once
    in backward (it was kept on XLA, and seen zero times there)."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    def gn(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.dropout(torch.sigmoid(x), p=0.5, train=True))

    def run(policy: Any) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).to(xla_device).requires_grad_()
        torch_xla.sync()
        xm.set_rng_state(11, xla_device)
        out = gn(x) if policy is None else xla_ckpt.checkpoint(gn, x, policy=policy)
        with _Count() as count:
            out.sum().backward()
        state = xm.get_rng_state(xla_device)
        torch_xla.sync()
        return out.detach().cpu(), x.grad.cpu(), count.n, state

    ref = run(None)
    with replay_kind(direct):
        got = run(policies.save_ops(aten.sigmoid))
    torch.testing.assert_close(got[0], ref[0], **XLA_TOL)
    torch.testing.assert_close(got[1], ref[1], **XLA_TOL)
    assert got[2] == 1, f"the dropout ran {got[2]} times in backward, not once"
    assert got[3] == ref[3], "the RNG state after backward differs"


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["full", "megatron_selective"])
def test_gpt2_with_dropout_keeps_on_xla_what_it_keeps_on_the_cpu(xla_device, preset):
    """HF GPT-2 with its default dropouts (0.1): what the checkpointed blocks keep is within 5% of the CPU's
    (the dropout masks were 9 MiB of 12 on XLA). Outside the blocks torch_xla's own autograd keeps a little
    more than the CPU's (views are buffers of their own there), with or without the library."""
    pytest.importorskip("transformers")
    from xla_ckpt import hf_models

    base = hf_models.build("gpt2", d_model=64, n_layer=2, n_head=4, seq_len=256)
    assert base.config.attn_pdrop == base.config.resid_pdrop == 0.1
    ids = torch.randint(0, 128, (4, 256), generator=torch.Generator().manual_seed(0))
    kept = {}
    for device in (torch.device("cpu"), xla_device):
        model = copy.deepcopy(base).to(device)
        xla_ckpt.apply(model, preset)
        with xla_ckpt.saved_activations() as report:
            model(ids.to(device), labels=ids.to(device)).loss.backward()
        blocks = sum(v for m, v in report.by_module().items() if m.startswith("transformer.h."))
        kept[device.type] = (blocks, str(report))
    (cpu, _), (xla, table) = kept["cpu"], kept["xla"]
    assert "bernoulli" not in table, f"a dropout mask is kept on XLA:\n{table}"
    assert xla <= 1.05 * cpu, f"the blocks keep {xla / 2**20:.2f} MiB on XLA, {cpu / 2**20:.2f} MiB on the CPU"


def _two_regions(device: torch.device, policy: Any, hook: Any) -> dict[str, Any]:
    """Two checkpointed blocks; ``hook`` runs on the gradient between them (after the second's recompute,
    before the first's)."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    first, second = _block(device), _block(device)
    x = torch.randn(4, 8, 16, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
    torch_xla.sync()
    xm.set_rng_state(99, device)
    h = first(x) if policy is None else xla_ckpt.checkpoint(first, x, policy=policy)
    h.register_hook(hook)
    out = second(h) if policy is None else xla_ckpt.checkpoint(second, h, policy=policy)
    out.sum().backward()
    got = {"state": xm.get_rng_state(device), "x.grad": x.grad}
    torch_xla.sync()
    got["state after sync"] = xm.get_rng_state(device)
    return {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in got.items()}


@pytest.mark.parametrize("direct", [True, False], ids=["program", "general"])
def test_a_sync_inside_backward_between_two_recomputes(xla_device, direct):
    """A sync between two regions' recomputes derived the next seed from the base a replay had moved:
    put right when nothing drew since; a draw after that sync and before the next recompute raises."""
    import torch_xla

    def sync(grad: torch.Tensor) -> None:
        torch_xla.sync()

    ref = _two_regions(xla_device, None, sync)
    with replay_kind(direct):
        got = _two_regions(xla_device, "nothing_saveable", sync)
    _assert_same(ref, got)

    def sync_and_draw(grad: torch.Tensor) -> None:
        torch_xla.sync()
        torch.rand(3, device=grad.device)

    with replay_kind(direct), pytest.raises(xla_ckpt.CheckpointError, match="a sync .* ran during backward"):
        _two_regions(xla_device, "nothing_saveable", sync_and_draw)
