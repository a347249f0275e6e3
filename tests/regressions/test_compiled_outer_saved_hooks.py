"""A user's ``saved_tensors_hooks`` pair open around a compiled, checkpointed model.

Under ``torch.compile`` the pair packs what the compiled forward saves. A checkpointed region saved
less and recomputed the rest in backward from its packed inputs, so a lossy pair (activations packed
as bf16) gave other gradients than the same compile without the library, silently (0.004 on a 2-block
MLP, 0.08 with BatchNorm; aot_eager and inductor, every preset; 0.04-0.06 under openxla on XLA:CPU),
and the pack counts differed (24 vs 20). torch's own checkpoint under compile does the same. A region
traced while a user's pair is open leaves the partition to the compiler (nothing marked): the plain compile's values, counts, buffers and
RNG state, with a warning that the region saves no memory in that graph (``_compile/marks.py``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import xla_ckpt
from helpers import counting_bf16_pair

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"), pytest.mark.filterwarnings("ignore")]


class _Block(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 8)
        self.drop, self.bn = (nn.Dropout(p) if p else nn.Identity()), nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bn(self.b(self.drop(torch.tanh(self.a(x)))))


def _step(backend: str, preset, device=None):
    torch._dynamo.reset()
    torch.manual_seed(0)
    # XLA: no dropout (its generator is not torch.manual_seed's; Dropout(0) before BatchNorm fails plain openxla)
    p = 0.3 if device is None else 0.0
    model = nn.Sequential(_Block(p), _Block(p)).to(device)
    if preset is not None:
        xla_ckpt.apply(model, preset)
    pack, unpack, counts = counting_bf16_pair()

    compiled = torch.compile(model, backend=backend)
    torch.manual_seed(1)
    x = torch.randn(4, 8).to(device)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = compiled(x)
        y.sin().sum().backward()
    if device is not None:
        import torch_xla

        torch_xla.sync()
    return (y.detach().cpu(), [p.grad.cpu() for p in model.parameters()], [b.cpu() for b in model.buffers()],
            torch.get_rng_state(), counts)


# The selective preset under inductor (a cold kernel compile of half a minute) is slow tier; the fast tier
# runs it under aot_eager and `full` under both.
@pytest.mark.parametrize("backend,preset", [("aot_eager", "megatron_selective"), ("aot_eager", "full"), ("inductor", "full"),
                                            pytest.param("inductor", "megatron_selective", marks=pytest.mark.slow)])
def test_lossy_pair_around_the_compiled_call_gives_the_plain_compile(backend: str, preset: str) -> None:
    assert_close(_step(backend, preset), _step(backend, None))


@pytest.mark.xla
@pytest.mark.parametrize("preset", ["megatron_selective", "full"])
def test_lossy_pair_around_openxla_gives_the_plain_compile(xla_device, preset: str) -> None:
    assert_close(_step("openxla", preset, xla_device), _step("openxla", None, xla_device))
