"""Replay under the caller's dispatch modes, and saved ops with non-tensor outputs.

A dispatch mode around ``loss.backward()`` (a profiler, an op counter) must change nothing: the
recompute gives the plain run's gradients, on CPU and on XLA through both replays (the recorded
program and fn run again), and the mode still sees the recomputed ops. On XLA a stand-in the
recompute makes under such a mode must stay in functionalization, or fn's dropout replays as another op
(a false ``CheckpointError``). A saved op returning ``(Tensor, int)`` hands out its cached results in
backward, the int included: it runs once, as under torch's SAC (its ``test_function_with_non_tensor_output``).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import xla_ckpt
from helpers import OpCounter, replay_kind, seed_all
from xla_ckpt import policies

aten = torch.ops.aten
# XLA:CPU compiles the checkpointed and the plain step into different graphs (fusion rounding).
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}
POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable", policies.save_ops(aten.mm, aten.mul)]


class Decompose(TorchDispatchMode):
    """Runs each op's decomposition where it has one (a mode that re-dispatches ops differently)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func.decompose(*args, **kwargs)
        return func(*args, **kwargs) if out is NotImplemented else out


@pytest.fixture(params=[True, False], ids=["direct", "fn_again"])
def direct(request):
    """XLA: the recorded-program replay where the region allows it, or fn run again (CPU: fn again)."""
    with replay_kind(request.param):
        yield request.param


def _dropout_between_matmuls(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # x * 2: backward reads nothing of x, so the region drops it and the replay starts from a stand-in.
    h = torch.dropout(x * 2.0, 0.5, True)
    return (h @ w).sin() @ w


def _step(device: torch.device, policy, mode) -> tuple[list[torch.Tensor], OpCounter]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=gen).to(device).requires_grad_()
    w = torch.randn(8, 8, generator=gen).to(device).requires_grad_()
    seed_all(device, 3)
    out = _dropout_between_matmuls(x, w) if policy is None else xla_ckpt.checkpoint(
        _dropout_between_matmuls, x, w, policy=policy)
    with OpCounter() as counter, mode():
        out.sum().backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    return [out.detach().cpu(), x.grad.cpu(), w.grad.cpu()], counter


@pytest.mark.parametrize("mode", [OpCounter, Decompose], ids=["counter", "decompose"])
@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_dropout_region_under_a_mode_around_backward(device, direct, policy, mode):
    ref, plain = _step(device, None, mode)
    got, counted = _step(device, policy, mode)
    tol = XLA_TOL if device.type == "xla" else {"rtol": 0.0, "atol": 0.0}
    for name, r, g in zip(("output", "x.grad", "w.grad"), ref, got, strict=True):
        torch.testing.assert_close(g, r, msg=lambda m, name=name: f"{name}: {m}", **tol)
    if policy == "nothing_saveable":
        # The caller's modes still see the recompute: matmuls run again in backward.
        assert counted.count(aten.mm) > plain.count(aten.mm), (counted.counts, plain.counts)


# torch's test_function_with_non_tensor_output (test_autograd.py, TestSelectiveActivationCheckpoint).
_CALLS = [0]


@torch.library.custom_op("xla_ckpt_test::sin_with_extra", mutates_args=())
def sin_with_extra(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    _CALLS[0] += 1
    return x.sin(), 2


def _save_x(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    ctx.save_for_backward(inputs[0])


sin_with_extra.register_autograd(lambda ctx, g, _n: g * ctx.saved_tensors[0].cos(), setup_context=_save_x)
SIN_WITH_EXTRA = torch.ops.xla_ckpt_test.sin_with_extra.default


@pytest.mark.parametrize("use", ["returned", "as_scale", "as_size"])
@pytest.mark.parametrize(
    "policy, calls", [(policies.save_ops(SIN_WITH_EXTRA), 1), ("everything_saveable", 1), ("nothing_saveable", 2)],
    ids=["save_ops", "everything", "nothing"])
def test_saved_op_with_a_non_tensor_output_runs_once(device, direct, policy, calls, use):
    """Saved: one call (its int comes from the cache too). Recomputed by the policy: two."""
    def fn(x: torch.Tensor):
        y, n = sin_with_extra(x)
        if use == "returned":
            return y, n
        if use == "as_scale":
            return (y * n).cos()
        return torch.cat([y[:, :n].exp(), x[:, n:]], dim=1)

    def plain_grad() -> torch.Tensor:
        x = x0.detach().clone().to(device).requires_grad_()
        out = fn(x)
        (out[0] if use == "returned" else out).sum().backward()
        return x.grad.cpu()

    x0 = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    ref = plain_grad()
    x = x0.to(device).requires_grad_()
    _CALLS[0] = 0
    out = xla_ckpt.checkpoint(fn, x, policy=policy)
    if use == "returned":
        assert out[1] == 2
        out = out[0]
    out.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad.cpu(), ref, **(XLA_TOL if device.type == "xla" else {}))
    if device.type == "xla" and direct and use == "returned":
        calls = 1  # the recorded program runs only what backward reads: nothing reads y or n
    assert _CALLS[0] == calls


def test_saved_item_is_not_read_again():
    """``item()`` (an op returning a Python number) under a policy that saves it: not run in backward."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.sin() * x.sum().item()

    x = torch.randn(3, requires_grad=True)
    for policy, reads in (("everything_saveable", 0), ("nothing_saveable", 1)):
        x.grad = None
        out = xla_ckpt.checkpoint(fn, x, policy=policy)
        with OpCounter() as counter:
            out.sum().backward()
        assert counter.count(aten._local_scalar_dense) == reads, (policy, counter.counts)
        x2 = x.detach().requires_grad_()
        fn(x2).sum().backward()
        torch.testing.assert_close(x.grad, x2.grad)


def test_only_the_callers_modes_are_taken_off_for_the_recompute_inputs():
    """A profiler's mode is off the stack while the recompute makes its inputs; fake tensors stay fake."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from xla_ckpt._base import compat as _compat

    with OpCounter() as counter:
        with _compat.without_callers_modes():
            torch.empty(2)
        torch.empty(1)
    assert counter.count(aten.empty) == 1
    with FakeTensorMode():
        with _compat.without_callers_modes():
            assert isinstance(torch.empty(2), FakeTensor)


def test_callers_mode_sees_the_replay_of_a_region_that_writes_a_buffer(device, direct):
    """fn writes running statistics (an outside write the replay puts back): the caller's mode around
    backward still sees the replayed ops, as for any region (the put-back once ran the whole replay with
    the caller's modes off: a FlopCounterMode counted no recompute for a BatchNorm block)."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(8).to(device)
    w = torch.randn(8, 8, device=device, requires_grad=True)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (bn(x @ w).tanh() @ w).sin()

    x = torch.randn(4, 8, device=device, requires_grad=True)
    ref_out = fn(x)
    ref_out.sum().backward()
    ref = [ref_out.detach().cpu(), x.grad.cpu(), w.grad.cpu(), bn.weight.grad.cpu(), bn.bias.grad.cpu()]
    stats = [bn.running_mean.cpu(), bn.running_var.cpu(), bn.num_batches_tracked.cpu()]
    bn.reset_running_stats()
    for t in (x, w, bn.weight, bn.bias):
        t.grad = None
    out = xla_ckpt.checkpoint(fn, x, policy="nothing_saveable")
    with OpCounter() as counter:
        out.sum().backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    got = [out.detach().cpu(), x.grad.cpu(), w.grad.cpu(), bn.weight.grad.cpu(), bn.bias.grad.cpu()]
    tol = XLA_TOL if device.type == "xla" else {"rtol": 0.0, "atol": 0.0}
    torch.testing.assert_close(got, ref, **tol)
    torch.testing.assert_close([bn.running_mean.cpu(), bn.running_var.cpu(), bn.num_batches_tracked.cpu()], stats,
                               **tol)
    # tanh runs again only in the recompute (its backward is tanh_backward).
    assert counter.count(aten.tanh) >= 1, sorted(str(k) for k in counter.counts)


def test_flop_counter_around_autograd_grad_of_a_region_that_runs_fn_again(device, direct):
    """A ``FlopCounterMode`` around ``torch.autograd.grad`` (not ``backward``) over a region the replay runs
    ``fn`` again for (a parametrized weight): as without the library. Its module tracker, run in that
    replay, would register gradient hooks on the leaf parameter mid-backward, and autograd.grad raise "A leaf
    node was passed to _will_engine_execute_node" (the fuzz's ``BACKWARD`` axis draws such programs)."""
    from torch.nn.utils import parametrizations
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    lin = parametrizations.orthogonal(torch.nn.Linear(8, 8)).to(device)
    original = lin.parametrizations.weight.original
    x = torch.randn(4, 8, device=device, requires_grad=True)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return lin(torch.tanh(lin(t))).sin()

    results = []
    for policy in (None, "nothing_saveable"):
        out = fn(x) if policy is None else xla_ckpt.checkpoint(fn, x, policy=policy)
        with FlopCounterMode(display=False) as flops:
            grads = torch.autograd.grad(out.square().sum(), [x, original, lin.bias])
        if device.type == "xla":
            import torch_xla

            torch_xla.sync()
        assert all(g is not None for g in grads)
        results.append(([out.detach().cpu()] + [g.cpu() for g in grads], flops.get_total_flops()))
    (ref, plain_flops), (got, flops_got) = results
    tol = XLA_TOL if device.type == "xla" else {"rtol": 0.0, "atol": 0.0}
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r, **tol)
    assert flops_got > plain_flops  # the mode still counts the recomputed matmuls
    assert not original._backward_hooks  # no tracker hook left on the user's parameter


def test_another_threads_flop_counter_keeps_its_module_tracker_during_a_replay():
    """The tracker's hooks sit in torch's process-wide hook dictionaries: while this thread's replay calls a
    module (its tracker hooks skipped for that call), another thread's ``FlopCounterMode`` still attributes
    its own module's FLOPs to that module."""
    import threading

    from torch.nn.utils import parametrizations
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    lin = parametrizations.orthogonal(torch.nn.Linear(8, 8))  # its region's replay calls fn again
    theirs = torch.nn.Linear(8, 8)
    calls = {"n": 0}
    ready, in_replay, counted = threading.Event(), threading.Event(), threading.Event()
    seen: dict = {}

    class Pausing(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            calls["n"] += 1
            if calls["n"] == 2:  # the replay: let the other thread count its module now
                in_replay.set()
                assert counted.wait(30)
            return lin(t)

    pausing = Pausing()

    def other() -> None:
        with FlopCounterMode(display=False) as flops:  # its tracker's hooks are in the global dictionaries
            ready.set()
            assert in_replay.wait(30)
            theirs(torch.randn(4, 8))
        seen.update({k: sum(v.values()) for k, v in flops.get_flop_counts().items()})
        counted.set()

    x = torch.randn(4, 8, requires_grad=True)
    out = xla_ckpt.checkpoint(lambda t: pausing(t).sin(), x, policy="nothing_saveable")
    thread = threading.Thread(target=other)
    thread.start()
    assert ready.wait(30)
    out.sum().backward()
    thread.join()
    assert calls["n"] == 2 and x.grad is not None
    assert seen.get("Linear", 0) == 2 * 4 * 8 * 8, seen  # theirs, by its module name
