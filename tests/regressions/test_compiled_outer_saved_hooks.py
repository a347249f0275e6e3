"""A user's ``saved_tensors_hooks`` pair open around a compiled, checkpointed model (compiled-path sweep).

Under ``torch.compile`` the pair packs what the compiled forward saves. A checkpointed region saved
less and recomputed the rest in backward from its packed inputs, so a lossy pair (activations packed
as bf16) gave other gradients than the same compile without the library, silently (0.004 on a 2-block
MLP, 0.08 with BatchNorm; aot_eager and inductor, every preset), and the pack counts differed (24 vs
20). torch's own checkpoint under compile does the same. Now a region traced while a user's pair is open
leaves the partition to the compiler (nothing marked): the plain compile's values, counts, buffers and
RNG state, with a warning that the region saves no memory in that graph (``_compile/marks.py``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import xla_ckpt

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"), pytest.mark.filterwarnings("ignore")]


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 8)
        self.drop, self.bn = nn.Dropout(0.3), nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bn(self.b(self.drop(torch.tanh(self.a(x)))))


def _step(backend: str, preset):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(_Block(), _Block())
    if preset is not None:
        xla_ckpt.apply(model, preset)
    counts = [0, 0]

    def pack(t):
        counts[0] += 1
        return t.to(torch.bfloat16) if t.is_floating_point() else t

    def unpack(t):
        counts[1] += 1
        return t.float() if t.dtype == torch.bfloat16 else t

    compiled = torch.compile(model, backend=backend)
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = compiled(x)
        y.sin().sum().backward()
    return (y.detach(), [p.grad for p in model.parameters()], [b.clone() for b in model.buffers()],
            torch.get_rng_state(), counts)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("preset", ["megatron_selective", "full"])
def test_lossy_pair_around_the_compiled_call_gives_the_plain_compile(backend: str, preset: str) -> None:
    assert_close(_step(backend, preset), _step(backend, None))
