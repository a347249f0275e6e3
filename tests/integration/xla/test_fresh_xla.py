"""Tensors made inside a region on XLA, and views over them: forward values and grads are exact.

Under a ``TorchDispatchMode`` a factory op (``arange``, ``zeros``, ``one_hot``'s zeros, a copy from
the CPU) can return a tensor outside functionalization, and torch_xla gives views their meaning only
through functionalization: ``t.permute(2, 1, 0)[1]`` would read rows of the unpermuted tensor. Every policy
would give a wrong forward value (145 instead of 215 below), ``verify=True`` too, and Hugging Face Mixtral's
experts (``one_hot(...).permute(2, 1, 0)``, then ``expert_mask[i]``) a wrong loss and grads off by 3e-2.
The generated programs of ``test_fuzz.py`` (``FRESH_KINDS``) cover the class; these are its named cases.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import CheckpointPolicy

import xla_ckpt
from helpers import replay_kind

pytestmark = pytest.mark.xla


def _issue(x: torch.Tensor) -> torch.Tensor:
    t = torch.arange(24, device=x.device, dtype=torch.float32).reshape(3, 2, 4)
    return (x.reshape(2, 3) * t.permute(2, 1, 0)[1]).sum()


def _mask(x: torch.Tensor) -> torch.Tensor:
    # Mixtral's expert mask: one_hot, permute, select; a written fresh tensor; a copy from the CPU.
    idx = torch.tensor([[0, 2], [1, 0], [2, 2]], device=x.device)
    mask = F.one_hot(idx, 3).permute(2, 1, 0)  # (3 experts, 2 slots, 3 tokens)
    w = torch.zeros(3, 2, device=x.device)
    w[1:, 0] = torch.linspace(1.0, 2.0, 2, device=x.device)
    w.t()[1, 0] = 5.0
    c = torch.eye(3, 2).to(x.device).flip(0).transpose(0, 1)
    y = x.reshape(3, 2).sin()
    return (y * mask[1].t() + y * w + y * c.t() * torch.full((3, 1), 0.5, device=x.device).expand(3, 2)).sum()


CASES = {"issue": (_issue, 6), "mask": (_mask, 6)}  # (function, length of its input)


def _grad(fn, x0: torch.Tensor, **ckpt):
    x = x0.detach().clone().requires_grad_()
    y = xla_ckpt.checkpoint(fn, x, **ckpt) if ckpt else fn(x)
    y.backward()
    return y.detach().cpu(), x.grad.cpu()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("direct", [True, False], ids=["recorded", "general"])
def test_fresh_tensor_views_are_exact_under_every_policy(xla_device, case, direct):
    """The issue's repro and Mixtral's mask, both replays, every policy, verify too: equal to plain XLA and CPU."""
    fn, n = CASES[case]
    x0 = torch.arange(n, dtype=torch.float32)
    cpu_y, cpu_g = _grad(fn, x0)
    ref_y, ref_g = _grad(fn, x0.to(xla_device))
    torch.testing.assert_close(ref_y, cpu_y)  # plain XLA agrees with CPU (the reference is right)
    torch.testing.assert_close(ref_g, cpu_g)
    if case == "issue":
        assert float(ref_y) == 215.0  # the issue's figure (the bug gave 145.0)
    with replay_kind(direct), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # name policies on an untagged region
        for name in xla_ckpt.policies.names():
            policy = xla_ckpt.policies.get(name, **_ARGS.get(name, {}))
            for verify in (False, True):
                y, g = _grad(fn, x0.to(xla_device), policy=policy, verify=verify)
                msg = f"{case} {name} verify={verify}"
                torch.testing.assert_close(y, ref_y, msg=lambda m, where=msg: f"{where} forward: {m}")
                torch.testing.assert_close(g, ref_g, msg=lambda m, where=msg: f"{where} grad: {m}")


_ARGS = {
    "save_only_these_names": {"names": ["a"]},
    "save_any_names_but_these": {"names": ["a"]},
    "save_ops": {"ops": [torch.ops.aten.mul]},
    "recompute_ops": {"ops": [torch.ops.aten.sin]},
    "any_of": {"policies": ["dots_saveable", "everything_saveable"]},
    "all_of": {"policies": ["everything_saveable", "nothing_saveable"]},
    "from_torch": {"fn": lambda ctx, op, *a, **k: CheckpointPolicy.PREFER_RECOMPUTE},
    "offload": {"policy": "dots_saveable"},
    "save_and_offload_only_these_names": {"names_which_can_be_saved": ["a"], "names_which_can_be_offloaded": ["b"]},
    "memory_budget": {"fraction": 0.5},
}


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _issue(self.lin(x).tanh()) + _mask(x)


def test_fresh_tensor_views_through_checkpointed(xla_device):
    """The same through ``checkpointed`` on a module (the wrapper path a model takes)."""
    torch.manual_seed(0)
    ref = _Block().to(xla_device)
    got = xla_ckpt.checkpointed(copy.deepcopy(ref), policy="nothing_saveable")
    x = torch.linspace(-1.0, 1.0, 6).to(xla_device)
    outs = []
    for m in (ref, got):
        y = m(x)
        y.backward()
        outs.append((y.detach().cpu(), [p.grad.cpu() for p in m.parameters()]))
    torch.testing.assert_close(outs[1][0], outs[0][0])
    for g, r in zip(outs[1][1], outs[0][1], strict=True):
        torch.testing.assert_close(g, r)


def _mixtral():
    import transformers

    # A tiny Mixtral, its config's defaults otherwise (use_cache, router settings). Experts "eager":
    # transformers' default "grouped_mm" calls torch.histc on integers, which XLA cannot run (with or
    # without xla_ckpt); "eager" is the one_hot(...).permute(2, 1, 0) mask, then expert_mask[i].
    cfg = transformers.MixtralConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8,
                                     num_local_experts=4, num_experts_per_tok=2, experts_implementation="eager")
    torch.manual_seed(0)
    return transformers.MixtralForCausalLM(cfg).train()


@pytest.mark.slow
def test_mixtral_full_preset_on_xla_equals_the_plain_model(xla_device):
    """Hugging Face Mixtral under the ``full`` preset on XLA:CPU: loss and every grad equal the plain model's."""
    pytest.importorskip("transformers")
    import torch_xla

    base = _mixtral()
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids.to(xla_device), "labels": ids.to(xla_device)}
    results = []
    for wrap in (False, True):
        model = copy.deepcopy(base).to(xla_device)
        if wrap:
            report = xla_ckpt.apply(model, "full")
            assert len(report.wrapped) == 1, report
        loss = model(**batch).loss
        loss.backward()
        torch_xla.sync()
        results.append((loss.detach().cpu(), [(n, p.grad) for n, p in model.named_parameters()]))
    (ref_loss, ref_grads), (loss, grads) = results
    torch.testing.assert_close(loss, ref_loss)
    for (name, g), (_, r) in zip(grads, ref_grads, strict=True):
        assert r is not None and g is not None, f"grad of {name} is None"
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, name=name: f"{name}: {m}")


def test_a_region_with_cpu_inputs_that_makes_xla_tensors(xla_device):
    """The region's inputs are on the CPU, its work on XLA: its factory tensors' views are exact too."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(24, device=xla_device, dtype=torch.float32).reshape(3, 2, 4)
        return (x.to(xla_device).reshape(2, 3) * t.permute(2, 1, 0)[1]).sum()

    for policy in ("nothing_saveable", "everything_saveable"):
        x = torch.arange(6.0, requires_grad=True)
        y = xla_ckpt.checkpoint(fn, x, policy=policy)
        y.backward()
        assert y.item() == 215.0, policy
        torch.testing.assert_close(x.grad, torch.tensor([1.0, 9.0, 17.0, 5.0, 13.0, 21.0]))
