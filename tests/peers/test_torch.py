"""torch's own checkpoint tests, ported to xla_ckpt.

Sources (pytorch/pytorch): test/test_autograd.py (TestAutograd's non-reentrant checkpoint cases,
TestNestedCheckpoint, TestSelectiveActivationCheckpoint), test/test_utils.py (TestCheckpoint) and
test/dynamo/test_activation_checkpointing.py (ActivationCheckpointingViaTagsTests: the functions and
policies of its compiled cases, run eagerly). Each case names its source. ``checkpoint(fn, *args,
use_reentrant=False)`` is ``xla_ckpt.checkpoint(fn, *args)`` (``nothing_saveable``); a
``context_fn`` of ``create_selective_checkpoint_contexts(policy_fn)`` is ``policy=from_torch(policy_fn)``
or one of our policies; an op count in a compiled backward graph is the count of ATen ops that
backward runs (``OpCounter``).

Semantics we match: gradients (inputs, parameters, kwargs, dicts, non-tensor inputs and outputs,
inputs that need no grad, outputs under no_grad), RNG replay (dropout, rand_like), autocast replay,
nesting, ``torch.autograd.grad`` on a region's outputs with ``create_graph``, recompute on access to a
saved tensor outside backward, non-determinism detected, SAC policies saving the ops they name
(FLOPs and op counts), multi-output and non-tensor-output ops, version-counter checks.

Deliberate differences, asserted as ours:
- a second backward with ``retain_graph=True`` works (the region recomputes again); torch's SAC
  raises "Trying to backward an extra time";
- the policy is asked once per op, in forward (torch asks again in the recompute, with
  ``ctx.is_recompute``): stateful policies need no care;
- a tensor unpacked twice in one backward is recomputed again (torch raises "Unpack is being
  triggered for a tensor that was already unpacked once");
- a recompute that runs *more* ops than the forward is an error (torch's early stop ignores them):
  never a silently different function.

Left out, and why:
- reentrant checkpoint cases (``use_reentrant=True``: test_checkpoint_valid's error,
  test_checkpointing's reentrant half, test_checkpoint_sequential_deprecated_*): we have no
  reentrant mode.
- ``set_checkpoint_early_stop`` cases (test_nested_checkpoint_set_early_stop*,
  test_checkpointing_without_reentrant_early_free): a torch option with no counterpart.
- ``preserve_rng_state=False`` (test_checkpoint_not_preserve_rng_state_and_without_reentrant): we
  always replay the RNG.
- CUDA-only cases (test_checkpoint_rng_cuda, test_checkpointing_without_reentrant_dataparallel,
  test_checkpointing_non_reentrant_autocast_gpu, CUDA memory measurements): ported to saved bytes
  or to CPU where the semantics are device-independent.
- test_subclass_dispatching_sizes, test_output_already_has_autograd_meta's subclass half: tensor
  subclasses inside regions are not supported yet.
- dynamo-only cases (test_fallback, test_symints_location, test_pattern_matcher,
  test_distributed_utils_checkpoint_wrapper, test_tags_function_via_global_checkpoint): graph
  breaks, symbolic shapes and torch's own wrappers, not checkpoint semantics.
"""

from __future__ import annotations

import copy
import functools
import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy
from torch.utils.flop_counter import FlopCounterMode

import xla_ckpt
from helpers import OpCounter, assert_same, grads_of
from xla_ckpt import Decision, policies

aten = torch.ops.aten


def c(fn, policy="nothing_saveable"):
    return lambda *a, **k: xla_ckpt.checkpoint(fn, *a, policy=policy, **k)


def grad(fn):
    return lambda x: torch.autograd.grad(fn(x), x, create_graph=True)[0]


def total(fn):
    return lambda x: fn(x).sum()


def _no_state_left():
    from xla_ckpt._hooks import saved as _saved

    assert _saved.state.region is None and _saved.state.recompute is None
    assert torch._C._len_torch_dispatch_stack() == 0


def _torch_policy(save):
    def policy_fn(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE

    return policies.from_torch(policy_fn)


def _bw(fn, *xs):
    out = fn(*xs)
    with OpCounter() as cnt:
        out.sum().backward()
    return cnt


# ======================================================================== test/test_autograd.py


def test_checkpointing_without_reentrant_correct_grad():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_correct_grad."""
    a = torch.randn(2, requires_grad=True)
    torch.exp(a).sum().backward()
    expected = a.grad
    a.grad = None
    c(torch.exp)(a).sum().backward()
    torch.testing.assert_close(a.grad, expected)


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_checkpointing_without_reentrant_input_requires_grad(input_requires_grad, device):
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_input_requires_grad."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(5, 5), nn.ReLU()) for _ in range(3)]).to(device)
    x = torch.randn(4, 5).to(device).requires_grad_(input_requires_grad)

    def ckpt(x):
        for layer in model:
            x = c(layer)(x)
        return x

    inputs = [x] if input_requires_grad else []
    run = (lambda x: ckpt(x)) if input_requires_grad else (lambda: ckpt(x))
    plain = model if input_requires_grad else (lambda: model(x))
    assert_same(grads_of(plain, inputs, list(model.parameters())), grads_of(run, inputs, list(model.parameters())))


def test_checkpointing_without_reentrant_parameter_used_in_an_out():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_parameter_used_in_an_out."""
    w = torch.randn(10, 10, requires_grad=True)
    count = 0

    def hook(g):
        nonlocal count
        count += 1

    w.register_hook(hook)
    x = torch.rand(10, 10, requires_grad=True)
    h = w[:, 0:1]  # a view of w made outside, used inside
    out = xla_ckpt.checkpoint(lambda x: x * h + torch.mm(x, w), x)
    out.sum().backward()
    assert count == 1
    torch.testing.assert_close(x.grad, h.expand(10, 10) + w.sum(1).expand(10, 10))


def test_checkpointing_without_reentrant_arbitrary_input_output():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_arbitrary_input_output."""
    class MyModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(5, 5, bias=False)

        def forward(self, dict_input):
            return {"result": self.layer(dict_input["tensor"])}

    plain = MyModel()
    ckpt = copy.deepcopy(plain)
    inp = {"tensor": torch.randn(5, 5)}
    out_plain = plain(inp)["result"].sum()
    out_ckpt = xla_ckpt.checkpoint(ckpt, inp)["result"].sum()
    torch.testing.assert_close(out_ckpt, out_plain)
    out_plain.backward()
    out_ckpt.backward()
    for p1, p2 in zip(plain.parameters(), ckpt.parameters(), strict=True):
        assert p2.grad is not None
        torch.testing.assert_close(p2.grad, p1.grad)


def test_checkpointing_without_reentrant_memory_savings():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_memory_savings (as saved bytes)."""
    n, width, batch = 3, 16, 4
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width))
                           for _ in range(n))

    def run(use_checkpoint):
        x = torch.randn(batch, width, requires_grad=True)
        with xla_ckpt.saved_activations() as report:
            for layer in layers:
                x = c(layer)(x) if use_checkpoint else layer(x)
        return report.nbytes

    unit = batch * width * 4
    assert run(False) == 3 * n * unit  # every Linear keeps its input
    assert run(True) == n * unit  # each checkpointed layer keeps its input only


def test_checkpointing_without_reentrant_detached_tensor():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_detached_tensor (use_reentrant=False)."""
    class NoGradModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2, bias=False)
            self.lin2 = nn.Linear(2, 2, bias=False)

        def forward(self, x):
            with torch.no_grad():
                return self.lin2(self.linear(x))

    module = NoGradModule()
    a = torch.randn(2, 2, requires_grad=True)
    for _ in range(3):
        out = xla_ckpt.checkpoint(module, a)
        out += a
        out.sum().backward()
    torch.testing.assert_close(a.grad, torch.full((2, 2), 3.0))


def test_checkpointing_non_reentrant_autocast_cpu():
    """test_autograd.py TestAutograd.test_checkpointing_non_reentrant_autocast_cpu."""
    def foo(x, y, z):
        z = torch.mm(x, y)
        y = torch.mm(x, z)
        z = torch.mm(z, z)
        y = torch.mm(y, z)
        return y

    def run(fn):
        torch.manual_seed(0)
        x, y, z = (torch.randn(4, 4, requires_grad=True) for _ in range(3))
        with torch.autocast("cpu"):
            out = fn(x, y, z)
        assert out.dtype == torch.bfloat16
        out.sum().backward()
        return out, x.grad, y.grad

    for r, g in zip(run(foo), run(c(foo, "dots_saveable")), strict=True):
        torch.testing.assert_close(g, r)


def test_checkpointing_without_reentrant_custom_function_works():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_custom_function_works.

    Ours, deliberately: the second ``ctx.saved_tensors`` inside one backward recomputes again (torch
    raises "Unpack is being triggered for a tensor that was already unpacked once").
    """
    calls = []

    class MyFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
            w = x * y * z
            out = w + w
            ctx.save_for_backward(x, y, z, w, out)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            x, y, z, w, out = ctx.saved_tensors
            x2, y2, z2, w2, out2 = ctx.saved_tensors  # a second access
            torch.testing.assert_close((w2, out2), (w, out))
            return grad_out * 2 * y * z, grad_out * 2 * x * z, grad_out * 2 * x * y

    def foo(x, y, z):
        calls.append(1)
        x = x * y * z
        y = y * y * z
        z = z * z
        return MyFunc.apply(x, y, z)

    x, y, z = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0))
    xla_ckpt.checkpoint(foo, x, y, z).sum().backward()
    assert len(calls) == 3  # forward, then one replay per access to the saved tensors
    xr, yr, zr = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0))
    foo(xr, yr, zr).sum().backward()
    torch.testing.assert_close((x.grad, y.grad, z.grad), (xr.grad, yr.grad, zr.grad))


def test_access_saved_tensor_twice_without_recomputation_works():
    """test_autograd.py TestAutograd.test_access_saved_tensor_twice_without_recomputation_works."""
    count = [0]

    def foo(a):
        count[0] += 1
        b = a * a
        c_ = a * b
        return torch.exp(a) + c_ * 0

    a = torch.randn(5, requires_grad=True)
    d = xla_ckpt.checkpoint(lambda a: torch.exp(foo(a)), a)
    assert count[0] == 1
    d.grad_fn._saved_result  # noqa: B018 - access outside backward triggers a recompute
    assert count[0] == 2
    d.grad_fn._saved_result  # noqa: B018
    assert count[0] == 3
    d.sum().backward()
    assert count[0] == 4
    with pytest.raises(RuntimeError, match="already been freed"):
        d.grad_fn._saved_result  # noqa: B018


def test_checkpointing_without_reentrant_saved_object_identity():
    """test_autograd.py TestAutograd.test_checkpointing_without_reentrant_saved_object_identity."""
    x_backward = None

    class Test(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x

        @staticmethod
        def backward(ctx, x):
            nonlocal x_backward
            (x_backward,) = ctx.saved_tensors
            return x, None

    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(2.0, requires_grad=False)
    xla_ckpt.checkpoint(Test.apply, a, b).backward()
    assert x_backward is b


def test_checkpoint_detects_non_determinism():
    """test_autograd.py TestAutograd.test_checkpoint_detects_non_determinism.

    Ours, deliberately: a recompute that runs more ops is an error too (torch's early stop ignores it).
    """
    def save_3_tensors(x):
        return x.sin().exp().sin()

    def save_2_tensors(x):
        return x.sin().exp()

    def save_2_tensors_alt(x):
        return x.sin() * torch.tensor([1.0, 2.0], requires_grad=True)

    def get_non_det_fn(orig_fn, recompute_fn):
        counter = [0]

        def fn(x):
            counter[0] += 1
            return orig_fn(x) if counter[0] == 1 else recompute_fn(x)

        return fn

    a = torch.randn(1, requires_grad=True)
    for orig, recompute, msg in [
        (save_3_tensors, save_2_tensors, "recomputation ran 2 ops"),
        (save_2_tensors, save_3_tensors, "more ops than the forward"),
        (save_2_tensors, save_2_tensors_alt, r"forward ran aten\.exp.*recompute ran aten\.mul"),
    ]:
        out = xla_ckpt.checkpoint(get_non_det_fn(orig, recompute), a)
        with pytest.raises(xla_ckpt.CheckpointError, match=msg):
            out.sum().backward()
        _no_state_left()


def test_checkpoint_valid_reset_on_error():
    """test_autograd.py TestAutograd.test_checkpoint_valid_reset_on_error: an error leaves nothing behind."""
    a = torch.randn(2, 2, requires_grad=True)

    def boom(x):
        torch.exp(x)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        xla_ckpt.checkpoint(boom, a)
    _no_state_left()
    xla_ckpt.checkpoint(torch.exp, a).sum().backward()
    torch.testing.assert_close(a.grad, torch.exp(a).detach())


# ------------------------------------------------------------------------ TestNestedCheckpoint
def _f(x):
    return x.sin().exp().sin()


def _g(x):
    return x.cos().sin().exp()


NESTED = {
    # name: (checkpointed composition, plain composition, needs autograd.grad inside a region)
    "c(f)": (lambda: c(_f), lambda: _f, False),
    "c(c(f))": (lambda: c(c(_f)), lambda: _f, False),
    "c(c(c(f)))": (lambda: c(c(c(_f))), lambda: _f, False),
    "grad(c(f))": (lambda: grad(total(c(_f))), lambda: grad(total(_f)), False),
    "c(grad(f))": (lambda: c(grad(total(_f))), lambda: grad(total(_f)), True),
    "grad(c(grad(c(f))))": (lambda: grad(total(c(grad(total(c(_f)))))), lambda: grad(total(grad(total(_f)))), True),
    "c(grad(c(grad(f))))": (lambda: c(grad(total(c(grad(total(_f)))))), lambda: grad(total(grad(total(_f)))), True),
}


@pytest.mark.parametrize("name", list(NESTED))
def test_nested_checkpoint(name, request):
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint: compositions of checkpoint and grad."""
    ckpt, plain, inner_grad = NESTED[name]
    x = torch.randn(3, requires_grad=True)
    expected = plain()(x)
    actual = ckpt()(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(torch.autograd.grad(actual.sum(), x)[0], torch.autograd.grad(expected.sum(), x)[0])
    _no_state_left()


def test_autograd_grad_inside_region_create_graph():
    """Double backward through a region: g(x) = grad(x.sin().exp(), x, create_graph=True) under checkpoint."""
    def g(x):
        return torch.autograd.grad(x.sin().exp(), x, create_graph=True)[0]

    x = torch.randn((), requires_grad=True)
    out = xla_ckpt.checkpoint(g, x)
    torch.testing.assert_close(out, g(x))


def test_nested_checkpoint_two_children():
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint_two_children: double backward."""
    def hc(x):
        return c(_g)(c(_f)(x))

    def h(x):
        return _g(_f(x))

    a = torch.randn(3, 3, requires_grad=True)
    expected = grad(total(grad(total(h))))(a)
    actual = grad(total(grad(total(c(hc)))))(a)
    torch.testing.assert_close(actual, expected)


def test_nested_checkpoint_two_children_grad_inside():
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint_two_children: grad(sum(c(grad(...))))."""
    def hc(x):
        return c(_g)(c(_f)(x))

    def h(x):
        return _g(_f(x))

    a = torch.randn(3, 3, requires_grad=True)
    expected = grad(total(grad(total(h))))(a)
    actual = grad(total(c(grad(total(c(hc))))))(a)
    torch.testing.assert_close(actual, expected)


def test_nested_checkpoint_non_tensor_inputs_and_outputs():
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint_non_tensor_inputs_and_outputs."""
    def fn(k, a, b, f):
        return f(k * a * b.exp()), 1, "abcd"

    k = 3
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)

    def f(x):
        return x.sin()

    out, one, s = c(c(fn))(k, a, b, f)
    assert (one, s) == (1, "abcd")
    got = torch.autograd.grad(out, (a, b))
    expected = torch.autograd.grad(fn(k, a, b, f)[0], (a, b))
    torch.testing.assert_close(got, expected)


def test_nested_checkpoint_kwargs():
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint_kwargs."""
    def fn(a, blah=None):
        out = a.sin().exp()
        if blah is not None:
            out = out * blah
        return out.sin().exp()

    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    expected = torch.autograd.grad(fn(a, blah=b), (a, b))
    actual = torch.autograd.grad(c(c(fn))(a, blah=b), (a, b))
    torch.testing.assert_close(actual, expected)


def test_nested_checkpoint_same_graph():
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint_same_graph: a hook on a node of the
    region's forward graph fires once; the recompute graph is never backpropagated through."""
    counter = [0]

    def hook(*_):
        counter[0] += 1

    def fn(x):
        x = x.sin()
        if torch.is_grad_enabled() and x.grad_fn is not None and counter[0] == 0 and not hasattr(fn, "done"):
            fn.done = True
            x.grad_fn.register_prehook(hook)
        return x.sin()

    a = torch.randn(1, requires_grad=True)
    c(c(fn))(a).sum().backward()
    assert counter[0] == 1


def test_nested_checkpoint_reentrant_backwards():
    """test_autograd.py TestNestedCheckpoint.test_nested_checkpoint_reentrant_backwards: a backward
    started from a hook inside backward."""
    def fn(a):
        x = a.sin().exp()
        out = x.sin()
        return x, out

    def hook(*_):
        # backward again, skipping the part of the graph where the hook is registered
        x.backward(retain_graph=True)

    a = torch.randn(1, requires_grad=True)
    x, out = c(c(fn))(a)
    out.grad_fn.register_prehook(hook)
    out.backward(retain_graph=True)

    a2 = a.detach().requires_grad_()
    x2, out2 = fn(a2)
    x2.backward(retain_graph=True)
    out2.backward()
    torch.testing.assert_close(a.grad, a2.grad)


# ------------------------------------------------------------------------ TestSelectiveActivationCheckpoint
def test_flops_and_mem():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_flops_and_mem: saving mm removes its recompute."""
    def fn(x, y):
        return torch.sigmoid(torch.matmul(torch.matmul(x, y), y))

    def bw_flops_and_bytes(policy):
        x, y = torch.randn(16, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)
        with xla_ckpt.saved_activations() as report:
            out = fn(x, y) if policy is None else xla_ckpt.checkpoint(fn, x, y, policy=policy)
        with FlopCounterMode(display=False) as mode:
            out.sum().backward()
        return mode.get_total_flops(), report.nbytes

    mm = 2 * 16**3
    flops_none, bytes_none = bw_flops_and_bytes(None)
    flops_sac, bytes_sac = bw_flops_and_bytes(_torch_policy({aten.mm.default}))
    flops_full, bytes_full = bw_flops_and_bytes("nothing_saveable")
    assert flops_none == flops_sac == 4 * mm
    assert flops_full == 6 * mm
    unit = 16 * 16 * 4
    assert (bytes_none, bytes_sac, bytes_full) == (4 * unit, 4 * unit, 2 * unit)


def test_output_already_has_autograd_meta():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_output_already_has_autograd_meta."""
    def fn(x):
        return x.view(-1), x.sin().cos()

    x = torch.tensor([[0.3, -0.2]], requires_grad=True)
    view, out = xla_ckpt.checkpoint(fn, x, policy=_torch_policy({aten.sin.default}))
    (view.sum() + out.sum()).backward()
    torch.testing.assert_close(x.grad, 1 - torch.sin(torch.sin(x.detach())) * torch.cos(x.detach()))


def test_bad_inputs():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_bad_inputs."""
    with pytest.raises(TypeError, match="not by string"):
        policies.save_ops(aten.mm, "aten.sin")
    with pytest.raises(TypeError, match="expected a preset name .* a policy name"):
        xla_ckpt.checkpoint(torch.sin, torch.randn(2, requires_grad=True), policy=1)
    with pytest.raises(xla_ckpt.PolicyError, match="must return a CheckpointPolicy or a bool") as info:
        xla_ckpt.checkpoint(torch.sin, torch.randn(2, requires_grad=True),
                            policy=policies.from_torch(lambda ctx, op, *a, **k: "save"))
    assert isinstance(info.value.__cause__, TypeError)  # the policy's own error, chained
    _no_state_left()


def test_policy_with_state():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_policy_with_state.

    Ours, deliberately: the policy is asked once per op, in forward; torch asks again in the recompute.
    """
    counter = [0]

    def policy_fn(ctx, op, *args, **kwargs):
        assert not ctx.is_recompute
        counter[0] += 1
        return CheckpointPolicy.MUST_SAVE if counter[0] % 2 else CheckpointPolicy.PREFER_RECOMPUTE

    def fn(x):
        return x.sin().sin().sin()

    x = torch.randn(3, requires_grad=True)
    out = xla_ckpt.checkpoint(fn, x, policy=policies.from_torch(policy_fn))
    assert counter[0] == 3
    out.sum().backward()
    assert counter[0] == 3
    x2 = x.detach().requires_grad_()
    fn(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_storage_lifetime():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_storage_lifetime: saved outputs die with the graph."""
    storages = []

    def policy(call):
        if call.op.overloadpacket is aten.sin:
            storages.append(call.out.untyped_storage())  # our own reference: use count 1 when nothing else holds it
            return Decision.SAVE
        return Decision.RECOMPUTE

    def uses():
        return torch._C._storage_Use_Count(storages[0]._cdata)

    x = torch.randn(3, requires_grad=True)
    out = xla_ckpt.checkpoint(lambda x: x.sin().cos(), x, policy=policy)
    gc.collect()
    assert uses() > 1  # kept for backward
    out.sum().backward()
    del out
    gc.collect()
    assert uses() == 1


def test_version_counter():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_version_counter: a saved output changed in place."""
    def fn(x):
        s = x.sin()
        return s, s.cos()

    x = torch.randn(3, requires_grad=True)
    s, out = xla_ckpt.checkpoint(fn, x, policy=_torch_policy({aten.sin.default}))
    with torch.no_grad():
        s.mul_(2)
    # cos saved s for backward: our check of what autograd saved fires first (torch raises here too).
    with pytest.raises(xla_ckpt.CheckpointError, match="modified (in place|by an inplace operation)"):
        out.sum().backward()
    _no_state_left()


def test_function_with_more_than_one_output():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_function_with_more_than_one_output."""
    counter = [0]

    def policy_fn(ctx, op, *args, **kwargs):
        if op == aten.var_mean.correction:
            counter[0] += 1
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.MUST_RECOMPUTE

    def fn(x):
        a, b = torch.var_mean(x)
        return a * b

    x = torch.randn(4, requires_grad=True)
    out = xla_ckpt.checkpoint(fn, x, policy=policies.from_torch(policy_fn))
    with OpCounter() as cnt:
        out.sum().backward()
    assert counter[0] == 1 and cnt.count(aten.var_mean) == 0
    x2 = x.detach().requires_grad_()
    fn(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_function_with_non_tensor_output():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_function_with_non_tensor_output: an op
    returning a Python number (``item``), saved and replayed."""
    def fn(x):
        return x.sin() * x.sum().item()

    x = torch.randn(3, requires_grad=True)
    out = xla_ckpt.checkpoint(fn, x, policy="everything_saveable")
    out.sum().backward()
    x2 = x.detach().requires_grad_()
    fn(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_can_only_trigger_recompute_once():
    """test_autograd.py TestSelectiveActivationCheckpoint.test_can_only_trigger_recompute_once.

    Ours, deliberately: a second backward with retain_graph=True recomputes again and accumulates.
    """
    def fn(x):
        return x.sin().cos().exp()

    x = torch.randn(3, requires_grad=True)
    out = xla_ckpt.checkpoint(fn, x, policy=_torch_policy({aten.sin.default}))
    out.sum().backward(retain_graph=True)
    first = x.grad.clone()
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * first)


# ======================================================================== test/test_utils.py


def test_checkpoint_trigger():
    """test_utils.py TestCheckpoint.test_checkpoint_trigger: forward once, recompute once per backward.

    Deliberate difference: torch's module attribute ``self.counter`` reads 2 after backward (its recompute
    assigned it again); ours reads 1, as without checkpointing (the recompute puts the module's attributes
    back, ``_engine/members.py``). The recompute count is read from an object the module holds instead."""
    class Calls:
        n = 0

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.counter = 0
            self.calls = Calls()

        def forward(self, x):
            self.counter += 1
            self.calls.n += 1
            return x.sin()

    modules = [Net() for _ in range(10)]
    x = torch.randn(3, 4, requires_grad=True)
    out = x
    for m in modules:
        out = c(m)(out)
    assert all(m.counter == 1 and m.calls.n == 1 for m in modules)
    out.sum().backward()
    assert all(m.calls.n == 2 for m in modules)  # recomputed once each
    assert all(m.counter == 1 for m in modules)  # torch: 2


def test_checkpoint_valid():
    """test_utils.py TestCheckpoint.test_checkpoint_valid: torch.autograd.grad with create_graph works."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 10), nn.ReLU(), nn.Linear(10, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU())
    x = torch.randn(1, 20, requires_grad=True)
    out = c(model[3:])(c(model[:3])(x))
    (g,) = torch.autograd.grad([out], [x], grad_outputs=[torch.ones(1, 5)], create_graph=True)
    (ref,) = torch.autograd.grad([model(x)], [x], grad_outputs=[torch.ones(1, 5)], create_graph=True)
    torch.testing.assert_close(g, ref)


@pytest.mark.parametrize("segments", [1, 2, 3, 6])
def test_checkpoint(segments, device):
    """test_utils.py TestCheckpoint.test_checkpoint: checkpoint_sequential with any number of segments."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU()).to(device)
    size = len(model) // segments

    def sequential(x):
        for i in range(0, len(model), size):
            x = c(model[i : i + size])(x)
        return x

    x = torch.randn(3, 10).to(device).requires_grad_()
    assert_same(grads_of(model, [x], list(model.parameters())), grads_of(sequential, [x], list(model.parameters())))


def test_checkpoint_module_list():
    """test_utils.py TestCheckpoint.test_checkpoint_module_list."""
    class ModuleListNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module_list = nn.ModuleList([nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 5), nn.ReLU()])

        def forward(self, x, ckpt=False):
            for m in self.module_list:
                x = c(m)(x) if ckpt else m(x)
            return x

    model = ModuleListNet()
    x = torch.randn(2, 10, requires_grad=True)
    assert_same(grads_of(model, [x], list(model.parameters())),
                grads_of(lambda x: model(x, ckpt=True), [x], list(model.parameters())))


def test_checkpoint_rng_cpu(device):
    """test_utils.py TestCheckpoint.test_checkpoint_rng_cpu: dropout inside a region replays its mask."""
    for _ in range(3):
        inp = torch.randn(2000).to(device).requires_grad_()
        phase1, phase2 = nn.Dropout(), nn.Dropout()

        def run(ckpt, inp=inp, phase1=phase1, phase2=phase2):
            inp.grad = None
            torch.manual_seed(7)
            if device.type == "xla":
                import torch_xla.core.xla_model as xm

                xm.set_rng_state(7, device)
            out = phase1(inp)
            out = c(phase2)(out) if ckpt else phase2(out)
            out.sum().backward()
            if device.type == "xla":
                import torch_xla

                torch_xla.sync()
            return inp.grad.cpu()

        torch.testing.assert_close(run(True), run(False))


def test_checkpoint_non_tensor():
    """test_utils.py TestCheckpoint.test_checkpoint_non_tensor: a None argument."""
    def run_fn(tensor1, tensor2):
        return tensor1.sin() if tensor2 is None else tensor1 + tensor2

    x = torch.randn(1, 4, requires_grad=True)
    out = xla_ckpt.checkpoint(run_fn, x, None)
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.cos(x.detach()))


def test_checkpoint_non_tensor_inputs_outputs():
    """test_utils.py TestCheckpoint.test_checkpoint_non_tensor_inputs_outputs."""
    def foo(t1, t2, scale, t3):
        t4 = t1 + t2 * t3
        t5 = t1 * t2 + t3
        t4 *= scale
        t5 *= scale
        return scale, t4, None, True, t5, "bar", t1

    t1, t2, t3 = (torch.rand(10, requires_grad=True) for _ in range(3))
    scale = torch.randint(0, 10, (10,))
    res = xla_ckpt.checkpoint(foo, t1, t2, scale, t3)
    assert res[0] is scale and res[2] is None and res[3] is True and res[5] == "bar" and res[6] is t1
    torch.testing.assert_close(res[1], (t1 + t2 * t3) * scale)
    torch.testing.assert_close(res[4], (t1 * t2 + t3) * scale)
    res[1].sum().backward(retain_graph=True)
    res[4].sum().backward(retain_graph=True)
    res[6].sum().backward()
    got = [t.grad for t in (t1, t2, t3)]
    for t in (t1, t2, t3):
        t.grad = None
    ref = foo(t1, t2, scale, t3)
    ref[1].sum().backward()
    ref[4].sum().backward()
    ref[6].sum().backward()
    torch.testing.assert_close(got, [t.grad for t in (t1, t2, t3)])


def _no_grad_inputs_run():
    def run_fn(tensor1, tensor2):
        return tensor1 if tensor2 is None else tensor1 * tensor2

    a, b = torch.randn(1, 4), torch.randn(1, 4)
    with xla_ckpt.saved_activations() as report:
        out = xla_ckpt.checkpoint(run_fn, a, b)
    return out, a * b, report


def test_checkpoint_no_tensors():
    """test_utils.py TestCheckpoint.test_checkpoint_no_tensors: nothing needs grad: a plain result."""
    out, expected, _ = _no_grad_inputs_run()
    assert not out.requires_grad
    torch.testing.assert_close(out, expected)


def test_checkpoint_no_tensors_keeps_nothing():
    """test_utils.py TestCheckpoint.test_checkpoint_no_tensors: and nothing is kept for backward."""
    _, _, report = _no_grad_inputs_run()
    assert report.nbytes == 0, str(report)


def test_checkpoint_partial_grad():
    """test_utils.py TestCheckpoint.test_checkpoint_partial_grad: some inputs and outputs need no grad."""
    def run_fn(tensor1, tensor2):
        return tensor1.sin(), tensor2.cos()

    a = torch.randn(1, 4, requires_grad=True)
    b = torch.randn(1, 4, requires_grad=False)
    out = xla_ckpt.checkpoint(run_fn, a, b)
    assert not out[1].requires_grad
    out[0].sum().backward()
    torch.testing.assert_close(a.grad, a.detach().cos())

    def run_fn2(tensor1, tensor2):
        return tensor1 * tensor2.exp()

    a = torch.randn(1, 4, requires_grad=False)
    b = torch.randn(1, 4, requires_grad=True)
    xla_ckpt.checkpoint(run_fn2, a, b).sum().backward()
    torch.testing.assert_close(b.grad, a * b.detach().exp())


# ======================================================================== test/dynamo/test_activation_checkpointing.py


def test_tags_function():
    """test_activation_checkpointing.py test_tags_function: full checkpoint recomputes the mm once."""
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    cnt = _bw(c(lambda x, y: torch.sigmoid(torch.matmul(x, y))), x, y)
    assert cnt.count(aten.mm) == 3  # 1 recompute + 2 gradient matmuls


def test_tags_module():
    """test_activation_checkpointing.py test_tags_module: a Linear + sigmoid module, recomputed once."""
    class MockModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(10, 10)

        def forward(self, x):
            return torch.sigmoid(self.linear(x))

    mod = MockModule()
    x = torch.randn(10, 10, requires_grad=True)
    cnt = _bw(c(mod), x)
    assert cnt.count(aten.addmm) == 1 and cnt.count(aten.sigmoid) == 1


def test_tags_decomps():
    """test_activation_checkpointing.py test_tags_decomps: gelu(mm) recomputed, same grads."""
    def fn(x, y):
        return F.gelu(torch.matmul(x, y))

    x, y = torch.randn(10, 10, requires_grad=True), torch.randn(10, 10, requires_grad=True)
    assert_same(grads_of(fn, [x, y], []), grads_of(c(fn), [x, y], []))
    # Deliberate difference: gelu's backward reads the mm output, not gelu's own: only mm is
    # recomputed (torch replays gelu too; our replay skips ops backward does not read).
    assert _bw(c(fn), x, y).count(aten.gelu) == 0
    assert _bw(c(fn), x, y).count(aten.mm) == 3  # 1 recomputed + 2 for the grads


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
def test_tags_recomputed_rand(policy, device):
    """test_activation_checkpointing.py test_tags_recomputed_rand and test_tags_rand: rand_like replayed."""
    def gn(x, y):
        return torch.sigmoid(torch.rand_like(x) * y) * x

    def fn(x, y):
        x = torch.sigmoid(torch.matmul(x, y))
        return gn(x, y)

    def seeded(f):
        def run(*a):
            torch.manual_seed(3)
            if device.type == "xla":
                import torch_xla.core.xla_model as xm

                xm.set_rng_state(3, device)
            return f(*a)

        return run

    x = torch.randn(4, 4).to(device).requires_grad_()
    y = torch.randn(4, 4).to(device).requires_grad_()
    assert_same(grads_of(seeded(fn), [x, y], []), grads_of(seeded(c(fn, policy)), [x, y], []))


def test_tags_dropout(device):
    """test_activation_checkpointing.py test_tags_dropout."""
    torch.manual_seed(0)
    mod = nn.Sequential(nn.Linear(10, 10), nn.Dropout(0.2)).to(device)

    def seeded(f):
        def run(x):
            torch.manual_seed(5)
            if device.type == "xla":
                import torch_xla.core.xla_model as xm

                xm.set_rng_state(5, device)
            return torch.sigmoid(f(x))

        return run

    x = torch.randn(10, 10).to(device).requires_grad_()
    assert_same(grads_of(seeded(mod), [x], list(mod.parameters())),
                grads_of(seeded(c(mod)), [x], list(mod.parameters())))


def test_kwargs():
    """test_activation_checkpointing.py test_kwargs."""
    def gn(x, y, z=None):
        a = torch.matmul(x, y)
        return torch.matmul(a, z) if z is not None else a

    x, y, z = (torch.randn(4, 4, requires_grad=True) for _ in range(3))
    assert_same(grads_of(lambda x, y, z: gn(x, y, z=z), [x, y, z], []),
                grads_of(lambda x, y, z: c(gn)(x, y, z=z), [x, y, z], []))


def _gemm_gn(x, y):
    return torch.sigmoid(torch.matmul(torch.matmul(x, y), y)) * y


@pytest.mark.parametrize("policy, mms", [(_torch_policy({aten.mm.default}), 4), (policies.save_ops(aten.mm), 4),
                                         ("nothing_saveable", 6)])
def test_compile_selective_checkpoint_gemm_only(policy, mms, device):
    """test_activation_checkpointing.py test_compile_selective_checkpoint_gemm_only."""
    x = torch.randn(4, 4).to(device).requires_grad_()
    y = torch.randn(4, 4).to(device).requires_grad_()
    assert_same(grads_of(_gemm_gn, [x, y], []), grads_of(c(_gemm_gn, policy), [x, y], []))
    if device.type == "cpu":
        assert _bw(c(_gemm_gn, policy), x, y).count(aten.mm) == mms


def test_compile_selective_checkpoint_custom_rule():
    """test_activation_checkpointing.py test_compile_selective_checkpoint_custom_rule: a stateful policy
    saving every mm but the second (asked once per op here: its state needs no per-mode bookkeeping)."""
    count = [0]

    def policy(call):
        if call.op.overloadpacket is aten.mm:
            count[0] += 1
            return Decision.RECOMPUTE if count[0] == 2 else Decision.SAVE
        return Decision.RECOMPUTE

    def gn(x, y):
        return torch.sigmoid(torch.sigmoid(torch.matmul(torch.matmul(x, y) * y, y) * y))

    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    assert _bw(c(gn, policy), x, y).count(aten.mm) == 5  # 4 gradient matmuls + the second mm again
    count[0] = 0
    assert_same(grads_of(gn, [x, y], []), grads_of(c(gn, policy), [x, y], []))


def test_compile_selective_checkpoint_partial_ctx_fn():
    """test_activation_checkpointing.py test_compile_selective_checkpoint_partial_ctx_fn: a policy built
    with functools.partial."""
    def policy_fn(no_recompute_list, ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in no_recompute_list else CheckpointPolicy.PREFER_RECOMPUTE

    policy = policies.from_torch(functools.partial(policy_fn, [aten.mm.default]))
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    assert _bw(c(_gemm_gn, policy), x, y).count(aten.mm) == 4


def test_compile_selective_checkpoint_outplace_op():
    """test_activation_checkpointing.py test_compile_selective_checkpoint_outplace_op."""
    def gn(x, y):
        return torch.sigmoid(torch.selu(torch.matmul(torch.matmul(x, y), y))).relu()

    policy = policies.save_ops(aten.mm, aten.sigmoid)
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    cnt = _bw(c(gn, policy), x, y)
    assert cnt.count(aten.mm) == 4 and cnt.count(aten.sigmoid) == 0
    assert_same(grads_of(gn, [x, y], []), grads_of(c(gn, policy), [x, y], []))


def test_compile_selective_checkpoint_list_ops():
    """test_activation_checkpointing.py test_compile_selective_checkpoint_list_ops: cat saved, unbind replayed."""
    def gn(x, y):
        return torch.cat([x, y]).sin()

    policy = policies.save_ops(aten.cat, aten.unbind)
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    assert _bw(c(gn, policy), x, y).count(aten.cat) == 0
    assert_same(grads_of(gn, [x, y], []), grads_of(c(gn, policy), [x, y], []))


@pytest.mark.parametrize("policy", [
    "nothing_saveable",
    pytest.param(policies.save_ops(aten.sigmoid), id="save_sigmoid"),
    pytest.param(policies.save_ops(aten.mm, aten.sigmoid), id="save_mm_sigmoid"),
])
def test_compile_selective_checkpoint_inplace_op(policy):
    """test_activation_checkpointing.py test_compile_selective_checkpoint_inplace_op: selu_ on a saved mm."""
    def gn(x, y):
        # torch's case ends in .relu_() on the sigmoid output, which fails without checkpointing too
        # (sigmoid's backward needs its output): out of place here.
        return torch.sigmoid(torch.selu_(torch.matmul(torch.matmul(x, y), y))).relu()

    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    assert_same(grads_of(gn, [x, y], []), grads_of(c(gn, policy), [x, y], []))


@pytest.mark.parametrize("save_dropout", [True, False])
def test_compile_selective_checkpoint_random_op(save_dropout, device):
    """test_activation_checkpointing.py test_compile_selective_checkpoint_random_op."""
    def gn(x):
        return torch.sigmoid(torch.dropout(torch.sigmoid(x), p=0.5, train=True))

    policy = policies.save_ops(aten.native_dropout) if save_dropout else "nothing_saveable"

    def seeded(f):
        def run(x):
            torch.manual_seed(11)
            if device.type == "xla":
                import torch_xla.core.xla_model as xm

                xm.set_rng_state(11, device)
            return f(x)

        return run

    x = torch.randn(4, 4).to(device).requires_grad_()
    assert_same(grads_of(seeded(gn), [x], []), grads_of(seeded(c(gn, policy)), [x], []))


def test_compile_selective_checkpoint_invalid_context():
    """test_activation_checkpointing.py test_compile_selective_checkpoint_invalid_context."""
    x = torch.randn(4, 4, requires_grad=True)
    with pytest.raises(TypeError, match="returned 'save'"):
        xla_ckpt.checkpoint(torch.sin, x, policy=lambda call: "save")
    _no_state_left()


def test_compile_selective_checkpoint_parametrization():
    """test_activation_checkpointing.py test_compile_selective_checkpoint_parametrization: a
    parametrized weight (computed in forward) inside the region."""
    import torch.nn.utils.parametrize as P

    class Sigmoid(nn.Module):
        def forward(self, w):
            return torch.sigmoid(w)

    torch.manual_seed(0)
    lin = nn.Linear(6, 6)
    P.register_parametrization(lin, "weight", Sigmoid())
    x = torch.randn(3, 6, requires_grad=True)
    params = list(lin.parameters())
    policy = policies.save_ops(aten.sigmoid)
    assert_same(grads_of(lin, [x], params), grads_of(c(lin, policy), [x], params))


def test_autocast_flash_attention():
    """test_activation_checkpointing.py test_autocast_flash_attention (CPU): sdpa under bf16 autocast;
    dots_saveable keeps the attention kernel, so backward does not run it again."""
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    def run(f):
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 2, 8, 16, requires_grad=True) for _ in range(3))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = f(q, k, v)
        with OpCounter() as cnt:
            out.float().sum().backward()
        return cnt, [out, q.grad, k.grad, v.grad]

    _, ref = run(fn)
    cnt, got = run(c(fn, "dots_saveable"))
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r)
    assert cnt.count(*[p for p in policies.DOT_OPS if "attention" in str(p)]) == 0
