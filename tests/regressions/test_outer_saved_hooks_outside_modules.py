"""A user's ``saved_tensors_hooks`` pair around a step of a model ``apply`` wrapped, on XLA.

On XLA ``apply`` also corrects the stock ``nn.Linear`` / ``nn.LayerNorm`` it leaves outside the regions
(``_api/outside.py``: an LM head, a final norm): they keep the input and the weight, as CPU does, and
re-derive the rest in backward. Under a user's lossy pair (saved activations packed as bf16) that is
another computation than the plain step's: the corrected layer norm re-derived its normalized input from
the *packed* input, where the stock op packs its own ``x_hat``, so every gradient upstream of it differed,
silently (an HF GPT-2 from ``hf_models``, ``full``: wte.grad 2e-4 off on a 0.14 scale, the pair's pack
count 70 where the plain step's is 67; the small GPT below: 3.8e-5 off, 2.7% relative, with the bf16
pair, 1.0e-4 with the shifting one). Under a user's pair the stock
forward runs, as under ``torch.compile``; the regions pass their tensors through the pair
(``tests/regressions/test_outer_saved_hooks.py``).

``fsdp_xla`` runs the model's forward under ``weights_by_reference()``, whose saved-tensor pair is inside the
user's: what the step saved outside the regions never met the user's pair, and the regions did not see it
either (they look for a user's pair at their start, where the by-reference pair is on top). A lossy pair gave
other grads on CPU and XLA (HF GPT-2: wte.grad 4.4e-4 off). Under a user's pair the by-reference scope
hands every tensor to the user's pair, as without the library, and its regions pass theirs through it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

import xla_ckpt
from helpers import counting_bf16_pair
from xla_ckpt.models import GPT, GPTConfig

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32)


def _shifting_pair() -> tuple[Any, Any, list[int]]:
    """A pair that changes every saved float by a constant: smooth, so rounding cannot hide a difference."""
    counts = [0, 0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        counts[0] += 1
        return t + 1e-2 if t.is_floating_point() else t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        counts[1] += 1
        return t

    return pack, unpack, counts


PAIRS = {"bf16": counting_bf16_pair, "shift": _shifting_pair}


def _step(device: torch.device, preset: Any, pair: str) -> tuple[list[torch.Tensor], list[int]]:
    torch.manual_seed(0)
    model = GPT(replace(CFG)).to(device)
    if preset is not None:
        xla_ckpt.apply(model, preset)
    idx = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=torch.Generator().manual_seed(1)).to(device)
    pack, unpack, counts = PAIRS[pair]()
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = model(idx, idx)
        loss.backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    return [t.detach().cpu() for t in [loss, *grads]], counts


# On XLA the fast tier runs `full` (the corrected outside layers) and `fsdp_xla` (the by-reference scope) with the
# shifting pair, which no rounding hides; CPU runs every case. The other XLA cases compile the GPT again each.
@pytest.mark.parametrize("pair", [p if p == "shift" else pytest.param(p, marks=pytest.mark.slow_on_xla)
                                  for p in sorted(PAIRS)])
@pytest.mark.parametrize("preset", ["full", pytest.param("megatron_selective", marks=pytest.mark.slow_on_xla),
                                    "fsdp_xla"])
def test_a_user_pair_around_an_applied_model_gives_the_plain_grads(device, preset: str, pair: str) -> None:
    ref, ref_counts = _step(device, None, pair)
    got, got_counts = _step(device, preset, pair)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"{'loss' if i == 0 else f'grad {i - 1}'}: {m}")
    assert got_counts == ref_counts


@pytest.mark.parametrize("policy", [None, "nothing_saveable"], ids=["no_region", "region"])
def test_saved_activations_inside_a_user_pair_leaves_the_pair_applied(device, policy) -> None:
    """``xla_ckpt.saved_activations()`` (the report) opened inside a user's lossy pair: its own pair shadowed
    the user's, with or without a region: other grads (4.7e-3 off on this MLP, CPU) and 2 packs for 11."""

    def step(report: bool) -> tuple[list[torch.Tensor], list[int]]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 4)).to(device)
        if report and policy is not None:
            xla_ckpt.checkpointed(model[1], policy=policy)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(device)
        pack, unpack, counts = counting_bf16_pair()
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            if report:
                with xla_ckpt.saved_activations():
                    y = model(x)
            else:
                y = model(x)
            (y * y).sum().backward()
        if device.type == "xla":
            import torch_xla

            torch_xla.sync()
        grads = [p.grad for p in model.parameters()]
        assert all(g is not None for g in grads)
        return [g.cpu() for g in grads], counts

    (ref, ref_counts), (got, got_counts) = step(False), step(True)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"grad {i}: {m}")
    assert got_counts == ref_counts
