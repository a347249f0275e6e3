"""A compiled checkpointed model whose attention routes kernel functions per model stays one graph.

transformers >= 5.25 with the ``kernels`` package decorates its attention classes with ``use_kernelized_func``:
each forward sets a global routing table (an attribute of a module-level object) and puts it back. Dynamo
refuses that write inside a checkpoint's higher-order op, so every checkpointed layer broke the graph. The
library's region lets Dynamo trace the write for such modules (recognised by their ``_kernel_funcs`` table):
done once, in forward. The stand-in below does what that decorator does, without the package; the real
model is compiled in tests/integration/hf/test_hf_models.py (test_default_config_compiles_to_one_graph)
wherever transformers >= 5.25 is installed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import xla_ckpt


class _Routing:
    """Stands in for kernels' routing variable: a module-level object each routed forward writes."""

    def __init__(self) -> None:
        self.table: Any = None


ROUTING = _Routing()


class RoutedAttention(nn.Module):
    def __init__(self, d: int, routed: bool = True) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        if routed:
            self._kernel_funcs = {"rotate": object()}  # use_kernelized_func's per-instance table (a plain dict)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        before = ROUTING.table
        ROUTING.table = {"rotate": id(self)}
        try:
            return torch.tanh(self.proj(x)) * (2.0 if ROUTING.table is not None else 1.0)
        finally:
            ROUTING.table = before


class Block(nn.Module):
    def __init__(self, d: int, routed: bool) -> None:
        super().__init__()
        self.attn = RoutedAttention(d, routed)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x)
        return x + self.down(torch.relu(self.up(x)))


def _model(routed: bool = True) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[Block(16, routed) for _ in range(3)])


def _run(model: nn.Module, x: torch.Tensor, compiled: bool):
    graphs: list[Any] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example_inputs)

    torch._dynamo.reset()
    fn = torch.compile(model, backend=backend, fullgraph=True) if compiled else model
    x = x.clone().requires_grad_()
    with xla_ckpt.saved_activations() as kept:
        out = fn(x)
    out.sum().backward()
    return out.detach(), x.grad, {n: p.grad for n, p in model.named_parameters()}, kept.nbytes, len(graphs)


def test_a_region_that_routes_kernel_functions_compiles_to_one_graph():
    x = torch.randn(4, 8, 16)
    ref_out, ref_x, ref_grads, plain, _ = _run(_model(), x, compiled=False)
    model = _model()
    xla_ckpt.apply(model, {"checkpoint": [{"classes": "Block", "policy": "nothing_saveable"}]})
    out, gx, grads, kept, graphs = _run(model, x, compiled=True)
    assert graphs == 1
    assert ROUTING.table is None  # put back, as without the library
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(gx, ref_x)
    for name, g in grads.items():
        assert g is not None, name
        torch.testing.assert_close(g, ref_grads[name])
    _, _, _, compiled_plain, _ = _run(_model(), x, compiled=True)
    assert kept < compiled_plain, (kept, compiled_plain)  # still recomputed: the region kept less


def test_only_kernel_routing_regions_are_traced_with_their_writes():
    """What the region looks for: the per-instance table use_kernelized_func gives each module. Other regions
    go to torch's checkpoint as they are (a write there is Dynamo's to judge, as without the library)."""
    from xla_ckpt._compile.prepare import routes_kernel_funcs

    assert routes_kernel_funcs(Block(4, routed=True)) and not routes_kernel_funcs(Block(4, routed=False))
    assert not routes_kernel_funcs(None)
