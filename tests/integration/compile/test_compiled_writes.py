"""In-place writes to a compiled graph's inputs inside a region (``xla_ckpt._compile.input_writes``).

Under ``torch.compile`` a region that writes one of its inputs in place (``b.add_(0.5)``), or a module
that counts its calls in a buffer it then reads, would recompute the write from the written input in
backward: silently wrong gradients under every policy, ``everything_saveable`` too. The write
is saved; a recomputed read of
the input before the write is a ``CheckpointError``. Each case is compared with the same program run
without xla_ckpt (eager: torch's own compile of the counting module is off the eager run, see below).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from xla_ckpt._base import compat as _compat
from xla_ckpt._compile import input_writes as _input_writes

aten = torch.ops.aten
POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable"]


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


class Counting(nn.Module):
    """Counts its calls in a buffer and scales by the count it just wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.lin(x) * self.calls


def _step(case: str, policy: str | None, compiled: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    counting, bn = Counting(), nn.BatchNorm1d(4)

    def region(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if case == "input":  # writes its input b, then reads it
            b.add_(0.5)
            b[1:3].mul_(2)  # and a view of it, after the first write
            b.split(2, dim=1)[1].sub_(0.25)  # and one piece of a multi-output view
            return torch.tanh(F.linear(a * b, w))
        if case == "buffer":
            return torch.tanh(counting(a * b))
        return torch.tanh(F.linear(bn(a * b), w))  # BatchNorm writes its running statistics

    call = region if policy is None else (lambda a, b: xla_ckpt.checkpoint(region, a, b, policy=policy))
    if compiled:
        call = torch.compile(call, backend="aot_eager")
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
    b = torch.randn(4, 4, generator=torch.Generator().manual_seed(2))
    out = call(a, b)
    out.sum().backward()
    values = [out.detach(), w.grad, a.grad, b, counting.lin.weight.grad, counting.lin.bias.grad, counting.calls,
              bn.weight.grad, bn.running_mean, bn.running_var, bn.num_batches_tracked]
    return [v for v in values if v is not None]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", ["input", "buffer", "batch_norm"])
def test_a_region_writing_its_inputs_compiles_to_the_unwrapped_gradients(case: str, policy: str) -> None:
    want = _step(case, None, compiled=False)
    if case != "buffer":  # torch's compile of the unwrapped counting module is off eager (a.grad, lin's grads)
        assert len(_step(case, None, compiled=True)) == len(want)
    got = _step(case, policy, compiled=True)
    assert len(got) == len(want)
    for i, (g, r) in enumerate(zip(got, want, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"{case} {policy} value {i}: {m}")


def test_batch_norm_is_not_saved_for_its_statistics(monkeypatch) -> None:
    """BatchNorm writes its statistics, which its outputs do not read: it is recomputed as before, not
    saved (a saved BatchNorm output in every compiled checkpointed block would cost memory for nothing)."""
    seen: list[tuple[object, bool]] = []
    judge = _input_writes.InputWrites.writes_input

    def spy(self, op, *args):
        answer = judge(self, op, *args)
        seen.append((op, answer))
        return answer

    monkeypatch.setattr(_input_writes.InputWrites, "writes_input", spy)
    _step("batch_norm", "nothing_saveable", compiled=True)
    assert (aten._native_batch_norm_legit.default, False) in seen, seen
    _step("input", "nothing_saveable", compiled=True)
    assert (aten.add_.Tensor, True) in seen, seen  # the spy sees the writes it must see


# How a recomputed op reads b before the write: directly, through a view, or through one piece of a
# multi-output view (``split``'s pieces are ``getitem`` nodes of the view: the compiled fuzz found the read
# through them missed, a silently wrong w.grad of 1.85, before ``_graph_input`` followed them).
READS = {
    "exp": (lambda b: torch.exp(b), "aten.exp.default"),
    "view": (lambda b: torch.exp(b.t()), "aten.exp.default"),
    "split": (lambda b: torch.cat(b.split(2, dim=1)[::-1], dim=1), "aten.cat.default"),
    "unbind": (lambda b: torch.stack(b.unbind(0)[::-1]), "aten.stack.default"),
    "chunk_view": (lambda b: torch.exp(b.chunk(2, dim=0)[1].t()).repeat(1, 2), "aten.exp.default"),
}


@pytest.mark.parametrize("reads", list(READS))
def test_a_recomputed_read_before_the_write_is_an_error(reads: str) -> None:
    """exp(b) recomputed in backward would read b after ``b.add_``: named, not a wrong gradient."""
    w = torch.randn(4, 4, requires_grad=True)
    read, op = READS[reads]

    def region(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        e = read(b)
        b.add_(1)
        return torch.tanh(F.linear(a * e, w))

    call = torch.compile(lambda a, b: xla_ckpt.checkpoint(region, a, b, policy="nothing_saveable"),
                         backend="aot_eager")
    with pytest.raises(Exception) as info:
        call(torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)).sum().backward()
    chain = [info.value, getattr(info.value, "inner_exception", None), info.value.__cause__]
    error = next((e for e in chain if isinstance(e, xla_ckpt.CheckpointError)), None)
    assert error is not None, chain
    assert "aten.add_.Tensor" in str(error) and op in str(error), error


def _grad_input_step(call) -> list[torch.Tensor]:
    """``call`` compiled on a non-leaf input that needs grad (as the fuzz's ``a``): output and the leaf's grad."""
    torch._dynamo.reset()
    leaf = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
    out = torch.compile(call, backend="aot_eager")(leaf * 1.0)
    (out * torch.arange(16.0).reshape(4, 4)).sum().backward()
    return [out.detach(), leaf.grad]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_input_that_needs_grad_written_through_a_view(policy: str) -> None:
    """``a.t().clamp_(-1, 1)`` on a region input that requires grad.

    AOTAutograd clones such an input and torch 2.9's min-cut recomputed the region's reads of that clone
    from the input itself, which the graph's epilogue had written: autograd's version check raised a
    RuntimeError where the plain compile runs (torch's own checkpoint raises it too). The view is saved,
    so a policy that saves ops equals the plain compile; one whose recompute must read the input before the write (autograd's copy of ``clamp_``'s input) gets a named ``CheckpointError`` on torch
    < 2.15, and equals the plain compile on torch 2.15, whose min-cut reads the clone.
    """
    def region(a: torch.Tensor) -> torch.Tensor:
        v = a.t()
        v.clamp_(-1, 1)
        return v

    want = _grad_input_step(region)
    try:
        got = _grad_input_step(lambda a: xla_ckpt.checkpoint(region, a, policy=policy))
    except Exception as e:  # BackendCompilerFailed wraps what AOTAutograd raised
        error = getattr(e, "inner_exception", e)
        assert isinstance(error, xla_ckpt.CheckpointError), e
        assert policy != "everything_saveable" and _compat.RECOMPUTES_INPUT_CLONE, error
        assert "aten.clamp_.default" in str(error), error
        return
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r)


def test_a_written_fresh_tensor_with_a_scalar_constant() -> None:
    """``t[1, 0] = 2.0`` writes a fresh tensor from a 0-dim constant: judging the constant's view (not traced)
    formatted it through ``.item()`` under the fake mode, an error where the plain compile runs (fuzz)."""
    def region(a: torch.Tensor) -> torch.Tensor:
        t = torch.full((4, 2, 4), 0.5)
        t[1, 0] = 2.0
        return a * t[:, 0]

    want = _grad_input_step(region)
    for policy in POLICIES:
        got = _grad_input_step(lambda a, policy=policy: xla_ckpt.checkpoint(region, a, policy=policy))
        for g, r in zip(got, want, strict=True):
            torch.testing.assert_close(g, r)
