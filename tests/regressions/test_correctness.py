"""The seven silent-wrong-gradient cases of issue "Never a silently wrong gradient", as tests.

Each case gives gradients equal to running the function without checkpointing, or raises a
``CheckpointError`` that says why: never a different number.
"""

from __future__ import annotations

import random
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import seed_all, sync
from xla_ckpt import Decision, policies

aten = torch.ops.aten
ALL_POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable", "dots_with_no_batch_dims_saveable"]


def _grads(f, x, params):
    for t in [x, *params]:
        t.grad = None
    y = f(x)
    y.sum().backward()
    return y.detach(), [x.grad] + [p.grad for p in params]


def _assert_same(ref, got):
    torch.testing.assert_close(got[0], ref[0], rtol=0, atol=0)
    for r, g in zip(ref[1], got[1], strict=True):
        assert g is not None
        torch.testing.assert_close(g, r, rtol=0, atol=0)


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_inplace_right_after_saved_op(policy):
    """Case 1: `lin(t).mul_(0.5)`: the in-place op must not be applied twice on replay."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4, requires_grad=True)
    f = lambda t: torch.sin(lin(t).mul_(0.5))  # noqa: E731
    ref = _grads(f, x, list(lin.parameters()))
    got = _grads(lambda t: xla_ckpt.checkpoint(f, t, policy=policy), x, list(lin.parameters()))
    _assert_same(ref, got)


@pytest.mark.parametrize("policy", ALL_POLICIES)
@pytest.mark.parametrize("reshape", ["unsqueeze_", "t_"])
def test_inplace_shape_change_replays(policy, reshape, device):
    """An in-place op that changes its tensor's shape (`x.t_()`): each position is recorded as the
    replay sees it (arguments before the op, outputs right after it), so no spurious mismatch."""
    def fn(a, w):
        x = a * 2
        getattr(x, reshape)(*([0] if reshape == "unsqueeze_" else []))
        return torch.sin(x) @ w

    def run(wrap):
        torch.manual_seed(0)
        a = torch.randn(3, 4).to(device).requires_grad_()
        w = torch.randn(3 if reshape == "t_" else 4, 2).to(device).requires_grad_()
        y = wrap(fn, a, w)
        y.sum().backward()
        sync(device)
        assert a.grad is not None and w.grad is not None
        return y.detach().cpu(), a.grad.cpu(), w.grad.cpu()

    ref = run(lambda f, *a: f(*a))
    got = run(lambda f, *a: xla_ckpt.checkpoint(f, *a, policy=policy))
    torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_saved_random_op_keeps_the_stream(device):
    """Case 2: a saved random op still advances the RNG on replay, so later random ops match."""
    def f(t):
        return t * (torch.rand_like(t) > 0.5) * torch.randn_like(t)

    x = torch.randn(8, 8).to(device).requires_grad_()
    policy = policies.save_ops(aten.rand_like)

    def run(fn):
        seed_all(device)
        x.grad = None
        y = fn(x)
        y.sum().backward()
        sync(device)
        return y.detach().cpu(), x.grad.cpu()

    ref = run(f)
    got = run(lambda t: xla_ckpt.checkpoint(f, t, policy=policy))
    torch.testing.assert_close(got, ref, rtol=0, atol=0)


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_shape_changed_on_recompute_raises(policy):
    """Case 3: Python-side state picks a shape; the replay must not hand back the forward's values silently."""
    calls = {"n": 0}

    def f(t):
        calls["n"] += 1
        return (t[: 2 + calls["n"] % 2] * 2.0).sin()

    x = torch.randn(4, 4, requires_grad=True)
    y = xla_ckpt.checkpoint(f, x, policy=policy)
    with pytest.raises(xla_ckpt.CheckpointError, match="other arguments|produced|diverged|more ops"):
        y.sum().backward()


def test_python_random_scale_raises():
    """Case 3, values: a scale drawn from Python's `random` differs on recompute: a CheckpointError."""
    def f(t):
        return torch.sin(t * random.random())

    x = torch.randn(4, 4, requires_grad=True)
    y = xla_ckpt.checkpoint(f, x, policy="everything_saveable")
    with pytest.raises(xla_ckpt.CheckpointError, match=r"aten\.mul\.Tensor.*other arguments.*argument 1"):
        y.sum().backward()


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_input_updated_in_place_inside_fn(policy, device):
    """Case 4: `x.add_(1)` inside fn is applied once, and the replay starts from x before it."""
    def fn(x, w):
        x.add_(1.0)
        return x * w

    def run(wrap):
        x = torch.ones(2, 3).to(device)
        w = torch.full((2, 3), 2.0).to(device).requires_grad_()
        y = wrap(fn, x, w)
        y.sum().backward()
        sync(device)
        return y.detach().cpu(), w.grad.cpu(), x.cpu()

    ref = run(lambda f, *a: f(*a))
    got = run(lambda f, *a: xla_ckpt.checkpoint(f, *a, policy=policy))
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    assert float(got[2][0, 0]) == 2.0


def test_input_with_grad_updated_in_place_inside_fn():
    """Case 4 with an input that requires grad (a non-leaf): exact grads through the in-place op."""
    def fn(h):
        h.mul_(3.0)
        return h.sin()

    def run(wrap):
        a = torch.linspace(-1, 1, 6, requires_grad=True)
        h = a * 1.0
        y = wrap(fn, h)
        y.sum().backward()
        return y.detach(), a.grad

    ref = run(lambda f, h: f(h))
    for policy in ALL_POLICIES:
        torch.testing.assert_close(run(lambda f, h, policy=policy: xla_ckpt.checkpoint(f, h, policy=policy)), ref, rtol=0, atol=0)


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_input_modified_after_forward_raises(policy):
    """Case 5: like autograd's version check, an input changed after the forward is an error."""
    a = torch.randn(4, requires_grad=True)
    h = a * 1.0
    y = xla_ckpt.checkpoint(torch.sin, h, policy=policy)
    h.mul_(2.0)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"input #0 .*modified by an inplace operation"):
        y.sum().backward()
    # Plain autograd raises too (sin saves its input): the same contract.
    h2 = a * 1.0
    y2 = torch.sin(h2)
    h2.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()


class _DropMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return self.down(F.dropout(torch.tanh(self.up(x)), 0.5, training=True))


def test_threads_sharing_the_cpu_rng_never_give_wrong_grads():
    """Case 6: threads drawing from the process-wide CPU RNG: exact, or a CheckpointError; never wrong.

    Each thread compares its checkpointed grads with an uncheckpointed run that used the same dropout
    masks (recorded by the replay-free reference: the forward's own masks are what the gradient needs).
    """
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker(seed: int) -> None:
        torch.manual_seed(seed)
        model = _DropMLP()
        for _ in range(20):
            x = torch.randn(8, 16, requires_grad=True)
            masks: list[torch.Tensor] = []

            def fn(t, masks=masks):
                h = torch.tanh(model.up(t))
                y = F.dropout(h, 0.5, training=True)
                masks.append((y != 0).detach().clone())
                return model.down(y)

            try:
                out = xla_ckpt.checkpoint(fn, x, policy="dots_saveable")
                out.sum().backward()
            except xla_ckpt.CheckpointError as e:  # allowed: a draw landed inside one op's window
                assert "Another thread" in str(e)
                with lock:
                    outcomes.append("error")
                continue
            # Reference with the forward's mask (masks[0]): what the gradient must be.
            x2 = x.detach().clone().requires_grad_()
            h = torch.tanh(model.up(x2))
            ref = model.down(h * masks[0] * 2.0)
            g = torch.autograd.grad(ref.sum(), x2)[0]
            torch.testing.assert_close(x.grad, g)
            with lock:
                outcomes.append("exact")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 80 and "exact" in outcomes


def test_another_threads_draw_between_random_ops_stays_exact():
    """Case 6, deterministic: another thread draws from the CPU generator while this region's forward
    runs (between its two dropouts): each recomputed random op draws from its own forward state, so
    the gradient is exact. Draws between forward and backward do not matter either."""
    x = torch.randn(8, 8, requires_grad=True)
    inside, drawn = threading.Event(), threading.Event()
    masks: list[torch.Tensor] = []

    def other_thread() -> None:
        inside.wait(10)
        torch.rand(3)
        drawn.set()

    def fn(t):
        a = F.dropout(t, 0.5, training=True)
        if not inside.is_set():  # forward only: let the other thread draw now
            inside.set()
            drawn.wait(10)
        b = F.dropout(a.sin(), 0.5, training=True)
        masks.append(torch.stack([a != 0, b != 0]))
        return b

    th = threading.Thread(target=other_thread)
    th.start()
    y = xla_ckpt.checkpoint(fn, x, policy="dots_saveable")
    th.join()
    torch.rand(5)
    y.sum().backward()
    assert len(masks) == 2  # forward and replay (the replay's copy is a stand-in: nothing backward needs)
    x2 = x.detach().requires_grad_()
    m = masks[0].float() * 2.0
    ref = torch.autograd.grad(((x2 * m[0]).sin() * m[1]).sum(), x2)[0]
    torch.testing.assert_close(x.grad, ref)


def test_draw_interleaved_inside_an_op_is_an_error():
    """If another draw lands *inside* one random op's window, the op's stream cannot be reproduced:
    the replay says so (``Draw`` is what the engine records per random op)."""
    from contextlib import nullcontext

    from xla_ckpt._record.replay_state import Draw

    def op_and_another_draw():
        torch.rand(3)  # the op
        torch.rand(2)  # another thread's draw, inside the op's window

    d, _ = Draw.record(torch.device("cpu"), op_and_another_draw, nullcontext)
    _, matched = d.replay(lambda: torch.rand(3))
    assert not matched
    d, first = Draw.record(torch.device("cpu"), lambda: torch.rand(3), nullcontext)
    torch.rand(7)  # the caller keeps drawing: the replay restores the op's state, then the caller's
    before = torch.get_rng_state()
    again, matched = d.replay(lambda: torch.rand(3))
    assert matched and torch.equal(first, again) and torch.equal(torch.get_rng_state(), before)


def test_two_threads_replays_never_interleave(monkeypatch):
    """Case 6: a replayed random op sets the process-wide state, runs, checks and restores it; another
    thread's replay inside that window could restore a state equal to this op's forward "after" and
    fool the check (a wrong mask, silently, seen under torch 2.13). The window is exclusive:
    here thread A pauses inside it and invites thread B's whole backward in; B must wait for A."""
    from xla_ckpt._record import replay_state as _replay_state

    events: list[str] = []
    inside, b_done = threading.Event(), threading.Event()
    real_set = _replay_state._set
    paused = []

    def set_and_pause(source, state):
        real_set(source, state)
        if threading.current_thread().name == "A" and not paused:
            paused.append(True)
            inside.set()
            b_done.wait(1.0)  # B gets a second to run its replay inside A's window (if it can)
            events.append("A window ends")

    def fn(t):
        return F.dropout(t.sin(), 0.5, training=True).cos()

    xs = {k: torch.randn(6, 6, requires_grad=True) for k in "AB"}
    refs, grads = {}, {}
    for k in "AB":  # forwards in this thread; the reference uses the forward's own mask
        state = torch.get_rng_state()
        ref_x = xs[k].detach().clone().requires_grad_()
        refs[k] = torch.autograd.grad(fn(ref_x).sum(), ref_x)[0]
        torch.set_rng_state(state)
        xs[k].y = xla_ckpt.checkpoint(fn, xs[k], policy="nothing_saveable")
    monkeypatch.setattr(_replay_state, "_set", set_and_pause)

    def backward(k):
        if k == "B":
            inside.wait(10)
        grads[k] = torch.autograd.grad(xs[k].y.sum(), xs[k])[0]
        if k == "B":
            events.append("B done")
            b_done.set()

    threads = [threading.Thread(target=backward, args=(k,), name=k) for k in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert events == ["A window ends", "B done"]
    for k in "AB":
        torch.testing.assert_close(grads[k], refs[k])


def test_explicit_generator_is_replayed_exactly():
    """The documented way to be exact with several threads: each thread's own torch.Generator."""
    def fn(t, gen):
        return t * torch.rand(t.shape, generator=gen) * torch.randn(t.shape, generator=gen)

    x = torch.randn(4, 4, requires_grad=True)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    ref = torch.autograd.grad(fn(x, g1).sum(), x)[0]
    y = xla_ckpt.checkpoint(fn, x, g2, policy="nothing_saveable")
    torch.rand(4, 4, generator=g2)  # the caller keeps using its generator between forward and backward
    after = g2.get_state()
    got = torch.autograd.grad(y.sum(), x)[0]
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    assert torch.equal(g2.get_state(), after)  # the replay gave the generator back as it found it


def test_autograd_grad_inside_region():
    """torch.autograd.grad (create_graph) inside a checkpointed function, and a second-order gradient."""
    def g(x):
        return torch.autograd.grad(x.sin().exp(), x, create_graph=True)[0]

    for policy in ALL_POLICIES:
        x = torch.randn((), requires_grad=True)
        ref = torch.autograd.grad(g(x), x)[0]
        got = torch.autograd.grad(xla_ckpt.checkpoint(g, x, policy=policy), x)[0]
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_verify_catches_nondeterministic_op():
    """verify=True recomputes saved outputs too and names the first op whose value differs."""
    state = {"k": 0}

    def noisy(t):
        state["k"] += 1
        bump = torch.full_like(t, float(state["k"] == 1))  # a value that differs on recompute
        return torch.tanh(t @ t + bump.detach() * 0)  # same shapes and args, other values

    x = torch.randn(4, 4, requires_grad=True)
    # Without verify: the same ops, shapes and arguments; no error (values are not compared).
    leaky = torch.randn(4, 4)

    def fn(t):
        return torch.sin(t @ leaky)  # leaky is changed between forward and backward: a value difference

    y = xla_ckpt.checkpoint(fn, x, policy="dots_saveable", verify=True)
    # Through .data: no version moves, so only the values tell (a visible in-place write is caught
    # before any replay, see tests/unit/_engine/test_outside.py).
    leaky.data.add_(1.0)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"verify: recomputing aten\.mm.*module ''"):
        y.sum().backward()
    leaky.data.sub_(1.0)
    y = xla_ckpt.checkpoint(fn, x, policy="dots_saveable", verify=True)
    y.sum().backward()  # deterministic: verify passes
    del noisy


_ = Decision


def test_raw_checkpoint_with_a_growing_cache_names_the_cause():
    """A KV-cache-like argument that fn appends to: the recompute sees a longer cache; the error says why."""
    cache: list[torch.Tensor] = []

    def layer(x, past):
        past.append(x * 2.0)
        return torch.cat(past, dim=0).sin().sum(0, keepdim=True)

    x = torch.randn(1, 4, requires_grad=True)
    y = xla_ckpt.checkpoint(layer, x, cache, policy="dots_saveable")
    with pytest.raises(xla_ckpt.CheckpointError, match="key/value cache.*use_cache=False"):
        y.sum().backward()


def test_verify_from_a_config_switch():
    """`verify = true` in a config: every wrapped module recomputes its saved outputs and compares."""
    torch.manual_seed(0)
    shift = torch.zeros(4)

    class Shift(nn.Module):
        def forward(self, x):
            return torch.tanh(x + shift)  # reads a tensor from outside fn

    model = nn.Sequential(Shift(), nn.Linear(4, 4))
    cfg = {"verify": True, "checkpoint": [{"match": ["0"], "policy": "everything_saveable"}]}
    assert xla_ckpt.Config is not None and xla_ckpt.apply(model, cfg).wrapped
    x = torch.randn(2, 4, requires_grad=True)
    model(x).sum().backward()  # deterministic: passes
    y = model(x)
    shift.data.add_(1.0)  # changed unseen (no version moves): only verify's value comparison can tell
    with pytest.raises(xla_ckpt.CheckpointError, match=r"verify: recomputing aten\.add\.Tensor in module '0'"):
        y.sum().backward()
