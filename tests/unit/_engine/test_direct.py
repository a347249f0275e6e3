"""XLA's direct replay (``_engine.direct``): the recorded program instead of running fn again.

Each test compares every gradient with the un-checkpointed block and with the general replay
(``switches.general_replay()``), then shows the program did what it is for: fn's Python does not run in backward,
the trace holds fewer ops, and where the program cannot be used, fn runs again.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import OpCounter, assert_same, grads_of, replay_kind
from xla_ckpt.models import Block, GPTConfig

pytestmark = pytest.mark.xla

# XLA:CPU compiles the checkpointed and the plain step into different graphs (fusion rounding).
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}
CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=1, n_head=2, d_model=32)
PRESETS = ["nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable", "everything_saveable", "save_only_these_names"]


class _Calls:
    n = 0


class Counted(nn.Module):
    """A GPT block that counts its forward calls (fn's Python), in an object of its own: the recompute puts
    the module's own attributes back as it found them (``_engine/members.py``), so ``self.calls += 1``
    would read 1 after the general replay too."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block(CFG)
        self.counter = _Calls()

    @property
    def calls(self) -> int:
        return self.counter.n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.counter.n += 1
        return self.block(x)


def _policy(name: str):
    if name == "save_only_these_names":
        return xla_ckpt.policies.get(name, names=("qkv",))
    return name


def _run(device, policy, direct: bool):
    torch.manual_seed(0)
    m = Counted().to(device)
    x = torch.randn(2, CFG.seq_len, CFG.d_model).to(device).requires_grad_()
    fn = m if policy is None else (lambda t: xla_ckpt.checkpoint(m, t, policy=_policy(policy)))
    with replay_kind(direct):
        grads = grads_of(fn, [x], list(m.parameters()))
    return m, grads


# Fast tier: one preset that replays everything and one that replays a part; the other presets (slow tier) run
# XLA's default, the direct replay, in test_engine.py's test_gradients_equal in the fast tier.
@pytest.mark.parametrize("policy", [p if p in ("nothing_saveable", "dots_saveable") else pytest.param(p, marks=pytest.mark.slow)
                                    for p in PRESETS])
def test_direct_replay_gives_the_plain_gradients_without_running_fn_again(xla_device, policy):
    _, ref = _run(xla_device, None, True)
    direct, got = _run(xla_device, policy, True)
    general, again = _run(xla_device, policy, False)
    assert_same(ref, got, **XLA_TOL)
    assert_same(again, got, **XLA_TOL)
    assert direct.calls == 1, "the direct replay ran fn's Python again"
    assert general.calls == 2, "the general replay runs fn once more in backward"


def _backward_ops(device, direct: bool) -> int:
    torch.manual_seed(0)
    m = Counted().to(device)
    x = torch.randn(2, CFG.seq_len, CFG.d_model).to(device).requires_grad_()
    with replay_kind(direct):  # decided when the region's forward runs
        y = xla_ckpt.checkpoint(m, x, policy="dots_with_no_batch_dims_saveable")
    with OpCounter() as ops:
        y.sum().backward()
    return sum(ops.counts.values())


def test_direct_replay_traces_fewer_ops(xla_device):
    """Only what backward reads: no fenced copy of every saved output, no dead op, no view fn made."""
    direct = _backward_ops(xla_device, True)
    general = _backward_ops(xla_device, False)
    assert direct < general, (direct, general)


def test_python_state_read_by_fn_gives_the_forwards_gradient(xla_device):
    """The program is the forward's: a scale from a counter cannot diverge (the general replay raises)."""
    def make():
        calls = iter(range(1, 100))
        return lambda t: torch.sin(t * float(next(calls)))

    x = torch.randn(4, 4).to(xla_device).requires_grad_()
    ref = grads_of(make(), [x], [])
    fn = make()
    got = grads_of(lambda t: xla_ckpt.checkpoint(fn, t, policy="nothing_saveable"), [x], [])
    assert_same(ref, got, **XLA_TOL)
    fn = make()
    with pytest.raises(xla_ckpt.CheckpointError, match="other arguments than in forward"), replay_kind(False):
        grads_of(lambda t: xla_ckpt.checkpoint(fn, t, policy="nothing_saveable"), [x], [])


class WritesInPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.counter = _Calls()  # not a module attribute the recompute puts back (see ``Counted``)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.counter.n += 1
        y = self.lin(x)
        y.mul_(0.5)  # an in-place write: the program is not used, fn runs again
        return torch.sin(y)


def test_a_region_with_an_in_place_write_falls_back_to_the_general_replay(xla_device):
    torch.manual_seed(0)
    m = WritesInPlace().to(xla_device)
    x = torch.randn(4, 8).to(xla_device).requires_grad_()
    ref = grads_of(m, [x], list(m.parameters()))
    m.counter.n = 0
    got = grads_of(lambda t: xla_ckpt.checkpoint(m, t, policy="nothing_saveable"), [x], list(m.parameters()))
    assert_same(ref, got, **XLA_TOL)
    assert m.counter.n == 2
