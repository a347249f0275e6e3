"""Autocast's weight-cast cache and the recompute (the fuzz's ``autocast`` kind, CPU).

Autocast caches the cast of a leaf that requires grad (a weight) while any autocast context is open,
and clears the cache when the outermost one exits. The recompute ran ``fn`` inside autocast contexts
of its own (to restore the forward's state), so a block that closes its own ``torch.autocast`` no
longer cleared the cache: the forward cast the weight in each of two blocks, the recompute once, and
the checkpointed step raised a false ``CheckpointError`` ("diverged ... _to_copy"). The same with the
forward inside the user's own autocast: a weight cast before the region (a shared layer, ALBERT's
shared blocks) is a cache hit in the forward and a cast in the recompute.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt
from helpers import assert_same, grads_of, replay_kind

POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable"]
BF16 = torch.bfloat16


def _params(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    w = (0.5 * torch.randn(8, 8, generator=gen)).to(device).requires_grad_()
    b = torch.randn(8, generator=gen).to(device).requires_grad_()
    return w, b


def _two_blocks(w: torch.Tensor, b: torch.Tensor):
    def fn(x: torch.Tensor) -> torch.Tensor:
        # Each block casts w again (its own autocast context clears the cache when it exits).
        with torch.autocast(x.device.type, dtype=BF16):
            h = F.gelu(F.linear(x, w, b))
        with torch.autocast(x.device.type, dtype=BF16):
            h = F.linear(h.float(), w) * 2
        return h.float().sin()
    return fn


def _x(device: torch.device) -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
@pytest.mark.parametrize("policy", POLICIES)
def test_two_autocast_blocks_cast_the_weight_twice(device, policy, direct):
    """No autocast around the region: the recompute casts w in each block, as the forward did."""
    if not direct and device.type != "xla":
        pytest.skip("the recorded program is XLA's: CPU has the general replay only (the other case)")
    w, b = _params(device)
    fn = _two_blocks(w, b)
    ref = grads_of(fn, [_x(device)], [w, b])
    with replay_kind(direct):
        got = grads_of(lambda x: xla_ckpt.checkpoint(fn, x, policy=policy), [_x(device)], [w, b])
    assert_same(ref, got)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
@pytest.mark.parametrize("policy", POLICIES)
def test_shared_weight_cast_before_the_region_under_the_users_autocast(device, policy, direct):
    """The whole step in the user's autocast; w cast before the region (cached) and read again inside,
    in two regions that share it (ALBERT's shared layers); the grads as the plain step's. On XLA's
    general replay (not the default there) a CheckpointError naming the cache instead."""
    if not direct and device.type != "xla":
        pytest.skip("the recorded program is XLA's: CPU has the general replay only (the other case)")
    w, b = _params(device)

    def block(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, w, b)) + x

    def step(checkpointed: bool):
        def model(x: torch.Tensor) -> torch.Tensor:
            with torch.autocast(x.device.type, dtype=BF16):
                h = F.linear(x, w)  # w's cast now in the cache
                for _ in range(2):
                    h = xla_ckpt.checkpoint(block, h, policy=policy) if checkpointed else block(h)
            return h.float()
        return grads_of(model, [_x(device)], [w, b])

    ref = step(False)
    with replay_kind(direct):
        if device.type == "xla" and not direct:
            # Below autograd the XLA replay cannot recognise the weight's cast: an error naming the cache.
            with pytest.raises(xla_ckpt.CheckpointError, match="autocast's cast cache"):
                step(True)
            return
        got = step(True)
    assert_same(ref, got)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
@pytest.mark.parametrize("policy", POLICIES)
def test_block_input_read_by_three_linears_under_the_users_autocast(device, policy, direct):
    """The common mixed-precision step: the user's autocast around it, a block's q, k and v projections of
    its input, the previous layer's output (a non-leaf: autocast casts it at each linear, caching nothing).
    The replay started from a leaf, whose cast autocast caches: one cast instead of three, a false
    ``CheckpointError`` on every such block (eager, and XLA's general replay)."""
    if not direct and device.type != "xla":
        pytest.skip("the recorded program is XLA's: CPU has the general replay only (the other case)")
    gen = torch.Generator().manual_seed(0)
    q, k, v = ((0.5 * torch.randn(8, 8, generator=gen)).to(device).requires_grad_() for _ in range(3))

    def block(h: torch.Tensor) -> torch.Tensor:
        return (F.linear(h, q) * F.linear(h, k) + F.linear(h, v)).sin()

    def step(checkpointed: bool):
        def model(x: torch.Tensor) -> torch.Tensor:
            with torch.autocast(x.device.type, dtype=BF16):
                h = x * 2  # a non-leaf, as every block's input after the first
                h = xla_ckpt.checkpoint(block, h, policy=policy) if checkpointed else block(h)
            return h.float()
        return grads_of(model, [_x(device)], [q, k, v])

    ref = step(False)
    with replay_kind(direct):
        got = step(True)
    assert_same(ref, got)


def test_a_recompute_in_another_thread_leaves_this_threads_cast_cache_alone():
    """Autocast's cast cache is one per process; its switch and nesting count are per thread. Another
    thread's recompute of a region that ran outside autocast emptied it while this thread's forward ran
    inside autocast: this forward cast w twice, its recompute once, a false ``CheckpointError`` (the fuzz,
    ``thread`` with the ``autocast`` context), and a plain forward here cast w twice too, rounding its
    gradient otherwise."""
    import threading

    from helpers import OpCounter

    cpu = torch.device("cpu")
    w, b = _params(cpu)
    mark = torch.nn.Identity()

    def elsewhere() -> None:  # another thread's checkpointed step, no autocast in it
        v = torch.randn(4, 8, requires_grad=True)
        xla_ckpt.checkpoint(lambda t: t.sin().cos(), v, policy="nothing_saveable").sum().backward()

    def between(*_: object) -> None:  # a forward hook: once, in the forward, between w's two reads
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()

    mark.register_forward_hook(between)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.linear(mark(F.linear(x, w, b)).relu(), w).sin()

    results = []
    for policy in (None, *POLICIES):
        x = _x(cpu)
        with torch.autocast("cpu", dtype=BF16), OpCounter() as counter:
            out = fn(x) if policy is None else xla_ckpt.checkpoint(fn, x, policy=policy)
        if policy is None:
            assert counter.count(torch.ops.aten._to_copy) == 3  # x, w and b, each once (cached)
        results.append(grads_of(lambda _, out=out: out, [x], [w, b]))
    for got in results[1:]:
        assert_same(results[0], got)
