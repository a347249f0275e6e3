"""What a user observes around recompute, beyond values and grads: hooks and buffers.

Each test runs the same model with and without xla_ckpt and compares what the user sees: every
record a hook made (how many calls, which values), every buffer after the step (and the next eval
forward), and the outputs and every gradient. The hook records are the first law's "never a stand-in":
a forward hook inside a region that fired again in backward would read the replay's uninitialised
stand-ins (6.6e21 off), and a BatchNorm would move its running statistics twice per step.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of, seed_all, sync
from module_zoo import rng_state
from xla_ckpt import hf_models

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


def module_step(model: nn.Module, x: torch.Tensor, policy, device):
    """One training step (``policy`` None: plain), its outputs and grads of x and every parameter."""
    if policy is not None:
        xla_ckpt.checkpointed(model, policy=policy)
    x = x.detach().clone().requires_grad_()
    return grads_of(model, [x], list(model.parameters()))


def _same_records(got: list, ref: list) -> None:
    assert len(got) == len(ref), f"hooks fired {len(got)} times, {len(ref)} without the library"
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, i=i: f"hook record {i}: {m}")


@pytest.mark.parametrize("policy", POLICIES)
def test_a_forward_hook_inside_a_region_fires_once_with_the_forward_values(device, policy):
    """The issue's repro: a hook on the Tanh of a checkpointed block (2 calls, the second 6.6e21 off)."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16)).to(device)
    x = torch.randn(4, 16).to(device)
    runs = {}
    for name in (None, policy):
        block, log = copy.deepcopy(base), []
        block[1].register_forward_hook(lambda m, a, out, log=log: log.append(out.detach().clone()))
        block[0].register_forward_pre_hook(lambda m, a, log=log: log.append(a[0].detach().clone()))
        runs[name] = module_step(block, x, name, device), log
    assert_same(runs[policy][0], runs[None][0])
    _same_records(runs[policy][1], runs[None][1])


@pytest.mark.parametrize("policy", POLICIES)
def test_a_hook_that_changes_its_module_output_gives_the_plain_values(device, policy):
    """A hook that returns a new output is part of the computation: the replay uses what it returned."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8)).to(device)
    x = torch.randn(3, 8).to(device)
    runs = {}
    for name in (None, policy):
        block, calls = copy.deepcopy(base), []

        def scale(m, a, out, calls=calls):
            calls.append(1)
            return out * 0.5 + 0.25

        block[0].register_forward_hook(scale)
        runs[name] = module_step(block, x, name, device), len(calls)
    assert_same(runs[policy][0], runs[None][0])
    assert runs[policy][1] == runs[None][1] == 1


def test_a_global_hook_and_one_registered_after_the_forward():
    """A global hook fires once per module call; a hook registered between forward and backward is not
    called by the replay (without the library it would not run for that forward at all)."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
    xla_ckpt.checkpointed(block, policy="nothing_saveable")
    seen, late = [], []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, out: seen.append(type(m).__name__))
    try:
        y = block(torch.randn(2, 8, requires_grad=True))
    finally:
        handle.remove()
    block[1].register_forward_hook(lambda m, a, out: late.append(out))
    y.sum().backward()
    assert seen == ["Linear", "Tanh", "Linear", "Sequential"]
    assert late == []
    assert all(p.grad is not None for p in block.parameters())


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("policy", POLICIES)
def test_batchnorm_statistics_are_written_once(device, policy, momentum):
    """Running statistics and num_batches_tracked equal the plain step's (they moved twice before), and
    so does the next eval forward; the cumulative average (momentum=None), which reads the count it just
    advanced, replays exactly (a false CheckpointError before)."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6, momentum=momentum), nn.Tanh(), nn.Linear(6, 6))
    base = base.to(device)
    x = torch.randn(5, 6).to(device)
    runs = {}
    for name in (None, policy):
        model = copy.deepcopy(base)
        step = module_step(model, x, name, device)
        buffers = {k: v.detach().cpu().clone() for k, v in model.named_buffers()}
        model.eval()
        with torch.no_grad():
            after = model(x).cpu()
        runs[name] = step, buffers, after
    assert_same(runs[policy][0], runs[None][0])
    for k, v in runs[None][1].items():
        torch.testing.assert_close(runs[policy][1][k], v, msg=lambda m, k=k: f"buffer {k}: {m}")
    torch.testing.assert_close(runs[policy][2], runs[None][2])


class _Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return torch.tanh(self.lin(x) * self.count)


def test_a_module_that_reads_the_buffer_it_writes(device):
    """A counter advanced and read in the forward: the replay reads the forward's count, and the count
    ends the step at 1, as without the library (a false error and a count of 2 before)."""
    torch.manual_seed(0)
    base = _Counting().to(device)
    x = torch.randn(2, 4).to(device)
    ref_model, got_model = copy.deepcopy(base), copy.deepcopy(base)
    ref = module_step(ref_model, x, None, device)
    got = module_step(got_model, x, "nothing_saveable", device)
    assert_same(got, ref)
    assert float(got_model.count.cpu()) == float(ref_model.count.cpu()) == 1.0


@pytest.mark.parametrize("preset", ["megatron_selective", "full"])
def test_hooks_on_hugging_face_llama_inner_modules(preset):
    """Hooks on `mlp` and `q_proj` of a default-config HF Llama (values off by 2.6, 1.9e33 or NaN before)."""
    base = hf_models.build("llama")
    ids = torch.randint(0, base.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    runs = {}
    for name in (None, preset):
        model, log = copy.deepcopy(base), []
        layer = model.model.layers[0]
        layer.mlp.register_forward_hook(lambda m, a, out, log=log: log.append(out.detach().clone()))
        layer.self_attn.q_proj.register_forward_hook(lambda m, a, out, log=log: log.append(out.detach().clone()))
        if name is not None:
            xla_ckpt.apply(model, name)
        torch.manual_seed(5)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        runs[name] = ([loss.detach()], [p.grad for p in model.parameters()]), log
    assert_same(runs[preset][0], runs[None][0])
    _same_records(runs[preset][1], runs[None][1])


def test_hooks_under_torch_compile_fire_once():
    """Compiled (torch's selective checkpoint marks, recompute inside the graph): one record per call."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
    x = torch.randn(2, 8)
    runs = {}
    for name in (None, "nothing_saveable"):
        block, log = copy.deepcopy(base), []
        block[1].register_forward_hook(lambda m, a, out, log=log: log.append(out.detach().clone()))
        if name is not None:
            xla_ckpt.checkpointed(block, policy=name)
        compiled = torch.compile(block, backend="aot_eager", fullgraph=False)
        xi = x.clone().requires_grad_()
        runs[name] = grads_of(compiled, [xi], list(block.parameters())), log
    assert_same(runs["nothing_saveable"][0], runs[None][0])
    _same_records(runs["nothing_saveable"][1], runs[None][1])


def test_an_error_in_a_hook_leaves_no_patch_installed():
    """A hook that raises inside a region: the error is the hook's, and nn.Module is as before."""
    original = nn.Module._call_impl
    block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def bad(m, a, out):
        raise ValueError("the user's hook")

    block[1].register_forward_hook(bad)
    xla_ckpt.checkpointed(block, policy="nothing_saveable")
    with pytest.raises(ValueError, match="the user's hook"):
        block(torch.randn(2, 4, requires_grad=True))
    assert nn.Module._call_impl is original
    assert all(type(h).__name__ != "Guard" for h in block[1]._forward_hooks.values())


@pytest.mark.parametrize("policy", POLICIES)
def test_a_saved_input_needing_no_grad_unpacks_as_the_object_the_forward_saved(policy):
    """Without the library ``ctx.saved_tensors`` hands back the very tensor a Function saved when it
    needs no grad (torch's own checkpoint keeps that; a detached alias is another object, and an
    ``nn.Parameter`` came back a plain Tensor). Eager only: on XLA the recompute starts from fenced
    copies of its inputs (docs/correctness.md)."""
    got: dict[str, torch.Tensor] = {}

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, s):  # type: ignore[no-untyped-def]
            ctx.save_for_backward(s)
            return x * s

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            (got["s"],) = ctx.saved_tensors
            return g * got["s"], None

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    for s in (torch.tensor(3.0), nn.Parameter(torch.tensor(3.0), requires_grad=False)):
        a.grad = None
        xla_ckpt.checkpoint(lambda x, s: Scale.apply(x.sin(), s).sum(), a, s, policy=policy).backward()
        assert got["s"] is s
        torch.testing.assert_close(a.grad, 3.0 * a.detach().cos())


class _Dropped(nn.Module):
    """A block whose forward reads ``self.training`` itself, besides its BatchNorm and Dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.up, self.bn, self.drop, self.down = nn.Linear(6, 12), nn.BatchNorm1d(12), nn.Dropout(0.5), nn.Linear(12, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.tanh(self.bn(self.up(x))))
        return self.down(h * 1.5 if self.training else h)


@pytest.mark.parametrize("region", ["module", "function"])
@pytest.mark.parametrize("policy", POLICIES)
def test_eval_between_forward_and_backward_leaves_the_forward_graph(device, policy, region):
    """``model.eval()`` after the forward and before ``loss.backward()`` (an evaluation pass in between):
    plain autograd differentiates the graph the forward recorded, in train mode. The recompute ran the
    modules in eval mode (no statistics, no dropout: a CheckpointError, "recomputation diverged"); it runs
    each in the mode the forward found it in, and the modes end as the user set them."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(6, 6), _Dropped(), _Dropped()).to(device)
    x = torch.randn(5, 6).to(device)
    runs = {}
    for name in (None, policy):
        model = copy.deepcopy(base)
        if name is not None and region == "module":
            for block in model[1:]:
                xla_ckpt.checkpointed(block, policy=name)
        body = model if name is None or region == "module" else (
            lambda t, model=model, name=name: xla_ckpt.checkpoint(model, t, policy=name))
        seed_all(device, 1)
        xi = x.detach().clone().requires_grad_()
        out = body(xi)
        model.eval()
        out.square().sum().backward()
        rng = rng_state(device)  # before the sync, which derives torch_xla's next seed from the base seed alone
        sync(device)
        grads = [xi.grad] + [p.grad for p in model.parameters()]
        runs[name] = ([out.detach()], grads), {k: v.detach().cpu().clone() for k, v in model.named_buffers()}, rng
        assert not any(m.training for m in model.modules())
    assert_same(runs[policy][0], runs[None][0])
    for k, v in runs[None][1].items():
        torch.testing.assert_close(runs[policy][1][k], v, msg=lambda m, k=k: f"buffer {k}: {m}")
    assert torch.equal(runs[policy][2][0], runs[None][2][0]), "the CPU RNG state differs"
    assert runs[policy][2][1:] == runs[None][2][1:], "torch_xla's RNG state differs"

