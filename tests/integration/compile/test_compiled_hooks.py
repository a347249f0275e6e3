"""Module and tensor hooks inside a compiled region, and a region Dynamo cannot trace.

The compiled fuzz (``tests/fuzz/test_fuzz_compiled.py``) never traces a hooked module inside a region:
its hooks record into a Python list (and a global forward hook records every module call), a side
effect Dynamo refuses inside torch's checkpoint (``Mutating a variable not in the current scope``), so
the region runs in the eager engine (``_compile.marks._torch_checkpoint``). Here hooks without side
effects, which Dynamo does trace into the region (a forward hook or pre-hook changing its module's
value; on torch >= 2.15 also a tensor hook registered on the output), are compared with the plain
compile, and hooks with side effects with it too (each fires once, with the plain run's values).

The fuzz's "hook record 5" and autocast + moe differences (before ``check_compiled`` compared with the
eager run where the plain compile is off it) came from such eager regions: the checkpointed region
ran eagerly as a whole, bit for bit the eager run, while the plain compile compiles the pieces around
the graph break. Those pieces differ from eager: a module counting its calls in a buffer (a wrong
gradient, 0.30; ``test_compiled_writes``) and a bfloat16 dropout's backward (``native_dropout_backward``
scales by the Python float 1/(1-p), eager multiplies by its bfloat16-rounded noise tensor: 0.4%
relative, up to 0.0156 on a.grad), 1-ulp sums elsewhere. ``test_untraceable_region_is_the_eager_run``
pins the eager half of that.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt

N = 4
POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable"]


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def _hooked(kind: str, log: list) -> nn.Sequential:
    """Three linears; the middle one carries the hook ``kind`` (those ending in ``_log`` record into ``log``)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(N, N), nn.Linear(N, N), nn.Linear(N, N))
    mid = model[1]
    if kind == "forward":
        mid.register_forward_hook(lambda m, args, out: out * 0.5 + 0.25)
    elif kind == "forward_pre":
        mid.register_forward_pre_hook(lambda m, args: (args[0] * 2.0,))
    elif kind == "tensor":
        def on_output(m, args, out):
            out.register_hook(lambda g: g * 2.0)
        mid.register_forward_hook(on_output)
    elif kind == "tensor_log":
        def on_output_log(m, args, out):
            def on_grad(g):
                log.append(g.detach().clone())
                return g * 2.0
            out.register_hook(on_grad)
        mid.register_forward_hook(on_output_log)
    elif kind == "backward_log":
        def halve(m, grad_output):
            log.append(grad_output[0].detach().clone())
            return (grad_output[0] * 0.5,)
        mid.register_full_backward_pre_hook(halve)
        mid.register_full_backward_hook(lambda m, gi, go: log.append(gi[0].detach().clone()))
    else:  # pragma: no cover
        raise AssertionError(kind)
    return model


def _fn(model: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(model[2](torch.sin(model[1](torch.tanh(model[0](x))))))


def _run(kind: str, policy) -> list:
    log: list = []
    model = _hooked(kind, log)
    x = torch.randn(N, N, generator=torch.Generator().manual_seed(1)).requires_grad_()

    def call(t):
        return _fn(model, t) if policy is None else xla_ckpt.checkpoint(_fn, model, t, policy=policy)

    torch._dynamo.reset()
    y = torch.compile(call, backend="aot_eager")(x * 1.0)
    y.pow(2).sum().backward()
    return [y.detach(), x.grad, *(p.grad for p in model.parameters()), *log]


KINDS = ["forward", "forward_pre", "tensor", "tensor_log", "backward_log"]


def _pairs() -> list:
    """Every (hook kind, policy) pair; the fast tier runs each kind once, the policies in turn (each at least
    once), `make test-all` all of them (each pair is a compile of its own)."""
    fast = {(k, POLICIES[i % len(POLICIES)]) for i, k in enumerate(KINDS)}
    return [(k, p) if (k, p) in fast else pytest.param(k, p, marks=pytest.mark.slow) for k in KINDS for p in POLICIES]


@pytest.mark.parametrize("kind,policy", _pairs())
def test_hooks_in_a_compiled_region_equal_the_plain_compile(kind: str, policy: str) -> None:
    ref, got = _run(kind, None), _run(kind, policy)
    assert len(got) == len(ref)  # each hook fired as often as in the plain compile
    for r, g in zip(ref, got, strict=True):
        torch.testing.assert_close(g, r)


def test_untraceable_region_is_the_eager_run() -> None:
    """bf16 dropout then a data-dependent ``torch.where`` (a graph break): the region runs eagerly, as a whole."""
    w0 = 0.5 * torch.randn(N, N, generator=torch.Generator().manual_seed(2))
    x0 = torch.randn(N, N, generator=torch.Generator().manual_seed(3))

    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.dropout(x @ w, 0.25, training=True) @ w.t()
        h = h.to(x.dtype) + x
        rows, _ = torch.where(h > 0)  # nonzero: Dynamo breaks the graph here
        return h * (1.0 + rows.numel())

    def go(call):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        torch.manual_seed(5)
        y = call(x * 1.0, w)
        (y * torch.arange(16.0).reshape(N, N)).sum().backward()
        return [y.detach(), x.grad, w.grad, torch.get_rng_state()]

    eager = go(fn)
    torch._dynamo.reset()
    got = go(torch.compile(lambda x, w: xla_ckpt.checkpoint(fn, x, w, policy="nothing_saveable"), backend="aot_eager"))
    for e, g in zip(eager, got, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
