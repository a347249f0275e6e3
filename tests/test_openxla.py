"""``torch.compile(backend="openxla")`` over a model the library wrapped: works with nothing else from the user.

torch's checkpoint looks up ``torch.xla`` (a device module torch_xla 2.9 does not register); the
library supplies a stand-in for the duration of each compile (``_compile_scope``). Each test compiles
on XLA:CPU (seconds per graph on two cores), so the fast tier keeps one small GPT; the rest is slow.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from xla_ckpt import _compile_scope
from xla_ckpt.models import GPT, GPTConfig

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32)


def _gpt(dev: torch.device) -> GPT:
    torch.manual_seed(0)
    return GPT(CFG).to(dev)


def _idx(dev: torch.device) -> torch.Tensor:
    return torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=torch.Generator().manual_seed(1)).to(dev)


def _step(model: torch.nn.Module, idx: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    import torch_xla

    model.zero_grad(set_to_none=True)
    loss = model(idx, idx)
    loss.backward()
    torch_xla.sync()
    return loss.detach().cpu(), [p.grad.cpu() if p.grad is not None else None for p in model.parameters()]


def _lazy_none(dev: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    return _step(_gpt(dev), _idx(dev))


def _compiled(dev: torch.device, config: object) -> tuple[tuple[torch.Tensor, list[torch.Tensor]], dict]:
    import torch._dynamo.utils as dynamo_utils

    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    model = _gpt(dev)
    xla_ckpt.apply(model, config)
    compiled = torch.compile(model, backend="openxla")
    out = _step(compiled, _idx(dev))
    return out, {"graphs": dynamo_utils.counters["stats"]["unique_graphs"],
                 "breaks": sum(dynamo_utils.counters["graph_break"].values())}


def _assert_equal_grads(ref: tuple, got: tuple) -> None:
    torch.testing.assert_close(got[0], ref[0])
    for i, (r, g) in enumerate(zip(ref[1], got[1])):
        assert g is not None, f"parameter {i} has no grad"
        torch.testing.assert_close(g, r)


@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
def test_openxla_compiles_a_wrapped_gpt_in_one_graph_and_leaves_no_torch_xla(xla_device):
    ref = _lazy_none(xla_device)
    got, stats = _compiled(xla_device, "megatron_selective")
    _assert_equal_grads(ref, got)
    assert stats == {"graphs": 1, "breaks": 0}
    # The stand-in device module lived for the compile only.
    assert not hasattr(torch, "xla")
    assert _compile_scope.active() == []


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
@pytest.mark.filterwarnings("ignore:Decision.OFFLOAD")
@pytest.mark.parametrize("config", ["none", "full", "dots", "names", "fsdp_xla",
                                    {"checkpoint": [{"blocks": True, "budget": 0.3}]}],
                         ids=["none", "full", "dots", "names", "fsdp_xla", "budget"])
def test_openxla_every_preset_and_a_budget(xla_device, config):
    ref = _lazy_none(xla_device)
    got, stats = _compiled(xla_device, config)
    _assert_equal_grads(ref, got)
    assert stats == {"graphs": 1, "breaks": 0}
    assert not hasattr(torch, "xla")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
def test_openxla_scan_layers_runs_as_compiled_regions(xla_device):
    import torch._dynamo.utils as dynamo_utils
    import torch_xla
    from torch import nn

    from xla_ckpt.models import Block

    torch.manual_seed(0)
    layers = nn.ModuleList(Block(CFG) for _ in range(3)).to(xla_device)
    x = torch.randn(2, CFG.seq_len, CFG.d_model).to(xla_device)

    def plain(x):
        for layer in layers:
            x = layer(x)
        return x.square().sum()

    def grads(f):
        layers.zero_grad(set_to_none=True)
        f(x).backward()
        torch_xla.sync()
        return [p.grad.cpu() for p in layers.parameters()]

    ref = grads(plain)
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    got = grads(torch.compile(lambda x: xla_ckpt.scan_layers(layers, x, policy="dots_saveable").square().sum(),
                              backend="openxla"))
    for r, g in zip(ref, got):
        torch.testing.assert_close(g, r)
    assert dynamo_utils.counters["stats"]["unique_graphs"] == 1
    assert not dynamo_utils.counters["graph_break"]
