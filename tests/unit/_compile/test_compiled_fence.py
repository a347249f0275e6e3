"""The fenced compiled backward: every recomputed chain waits for the gradient that first needs it.

Run with a backend built like torch_tpu's (AOTAutograd + torch's min-cut partitioner, graphs run as
FX code), the partition function wrapped by ``_compile.fence.fenced``. The graph is checked by
structure (deterministic): without the fence a recomputed chain reads only saved values and could
run at the start of backward; with it every chain reads a tangent. Peaks on XLA: tests/integration/compile/test_openxla.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch.fx import GraphModule, Node

import xla_ckpt
from xla_ckpt._compile import fence as _compiled_fence
from xla_ckpt.models import GPT, GPTConfig

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=3, n_head=2, d_model=32)
RECOMPUTES = (torch.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE,
              torch.utils.checkpoint.CheckpointPolicy.MUST_RECOMPUTE)


def _backend(fence: bool, backward_graphs: list[GraphModule]) -> Any:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    def fw(gm: GraphModule, _: Any) -> Any:
        return make_boxed_func(gm)

    def bw(gm: GraphModule, _: Any) -> Any:
        backward_graphs.append(gm)
        return make_boxed_func(gm)

    part = _compiled_fence.fenced(min_cut_rematerialization_partition) if fence else min_cut_rematerialization_partition
    return aot_autograd(fw_compiler=fw, bw_compiler=bw, partition_fn=part)


def _run(policy: str | None, fence: bool) -> tuple[list[torch.Tensor], GraphModule]:
    torch.manual_seed(0)
    model = GPT(CFG)
    if policy is not None:
        xla_ckpt.apply(model, policy)
    graphs: list[GraphModule] = []
    torch._dynamo.reset()
    idx = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = torch.compile(model, fullgraph=True, backend=_backend(fence, graphs))(idx, idx)
    loss.backward()
    return [loss.detach(), *(p.grad for p in model.parameters())], graphs[-1]


def _unfenced_chains(bw: GraphModule) -> list[str]:
    """Recomputed nodes (policy marks) that read a saved activation and do not depend on any tangent."""
    grad_dep: set[Node] = set()
    for n in bw.graph.nodes:
        if (n.op == "placeholder" and n.name.startswith("tangents")) or any(i in grad_dep for i in n.all_input_nodes):
            grad_dep.add(n)
    return [n.name for n in bw.graph.nodes
            if n.op == "call_function" and n.meta.get("recompute") in RECOMPUTES and n not in grad_dep
            and any(i.op == "placeholder" and not i.name.startswith("primals")
                    and isinstance(i.meta.get("val"), torch.Tensor) and i.meta["val"].is_floating_point()
                    for i in n.all_input_nodes)]


# `full` (everything recomputed) in the slow tier: megatron_selective's fence ties its recomputes the same way.
@pytest.mark.parametrize("policy", ["megatron_selective", pytest.param("full", marks=pytest.mark.slow)])
def test_fenced_backward_ties_every_recompute_to_a_gradient(policy: str) -> None:
    ref, _ = _run(None, fence=False)
    plain, bw_plain = _run(policy, fence=False)
    fenced, bw = _run(policy, fence=True)
    for r, p, f in zip(ref, plain, fenced, strict=True):
        assert f is not None
        torch.testing.assert_close(p, r)
        torch.testing.assert_close(f, r)
    # Unfenced, recomputed chains start from saved values alone (free to run at once, up front).
    assert _unfenced_chains(bw_plain), "the unfenced partition should recompute from saved values"
    assert _unfenced_chains(bw) == []
    # One fence per block, each one scalar read of a gradient.
    fence_nodes = [n for n in bw.graph.nodes if n.meta.get(_compiled_fence.FENCE_KEY)]
    assert sum(n.target is torch.ops.aten.ne.Tensor for n in fence_nodes) == CFG.n_layer


def test_no_checkpointing_no_fence() -> None:
    _, bw = _run(None, fence=True)
    assert not [n for n in bw.graph.nodes if n.meta.get(_compiled_fence.FENCE_KEY)]
