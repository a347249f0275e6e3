"""Stock torch modules that real models put inside a checkpointed block, each against the plain step.

Each test builds the same module twice (same seed, same weights), runs one training step plain and one
with xla_ckpt, and compares everything the first law covers: outputs, the input's grad, every
parameter's grad (a None grad fails), every buffer after the step (spectral norm's power-iteration
vectors, fake-quant observers, an Embedding's renormalised rows), what user hooks recorded (backward
hooks and tensor hooks inside the region: the same calls, the same values) and the RNG streams (the CPU
generator, and torch_xla's running seed read before the sync) with dropout in the region.

The models are built afresh for each run; ``test_deep_copy_keeps_the_original`` is the deep-copy case
(on XLA a deep copy shares its device buffers with the original until they are written, and a
checkpointed step that wrote such a buffer in place deleted the original's).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import sync
from module_zoo import POLICIES_XLA_ONCE, check_module, fixed_randn, module_step

# --------------------------------------------------------------------------- buffers written in forward


@pytest.mark.parametrize("api", ["old", "parametrizations"])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_spectral_norm(device, policy, api):
    """Spectral norm's power iteration writes its u/v vectors under no_grad in every training forward
    (the old API from a forward pre-hook, the new one inside a parametrization): written once."""
    sn = nn.utils.spectral_norm if api == "old" else nn.utils.parametrizations.spectral_norm

    def make() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), sn(nn.Linear(8, 8)), nn.GELU(), nn.Linear(8, 4))

    check_module(make, [fixed_randn(3, 8)], device, policy)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_fused_moving_average_fake_quantize(device, policy):
    """QAT's fused observer + fake-quant: min/max, scale and zero_point written by one op in forward."""
    from torch.ao.quantization.fake_quantize import FusedMovingAvgObsFakeQuantize

    def make() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 8), FusedMovingAvgObsFakeQuantize(), nn.Tanh(), nn.Linear(8, 4))

    check_module(make, [fixed_randn(3, 8)], device, policy)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_fake_quantize_eager(policy):
    """The unfused FakeQuantize (a MovingAverageMinMaxObserver, which branches in Python on its own
    min/max buffers). CPU only: on XLA nothing_saveable and dots_saveable raise a CheckpointError (the
    replay diverges at the observer's branch)."""
    from torch.ao.quantization import FakeQuantize

    def make() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 8), FakeQuantize(), nn.Tanh(), nn.Linear(8, 4))

    check_module(make, [fixed_randn(3, 8)], torch.device("cpu"), policy)


@pytest.mark.xla
def test_fake_quantize_xla_everything_saveable(xla_device):
    from torch.ao.quantization import FakeQuantize

    def make() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 8), FakeQuantize(), nn.Tanh(), nn.Linear(8, 4))

    check_module(make, [fixed_randn(3, 8)], xla_device, "everything_saveable")


def _qat(warm: bool = False) -> nn.Module:
    """``prepare_qat`` with the default qconfig: per-channel observers made ``empty(0)``, resized at their
    first call. ``warm``: after one forward under ``torch.no_grad()`` (the buffers have their shapes)."""
    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).train()
    m.qconfig = torch.ao.quantization.get_default_qat_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
        m = torch.ao.quantization.prepare_qat(m)
    if warm:
        with torch.no_grad():
            m(fixed_randn(3, 8))
    return m


class _Grow(nn.Module):
    """A buffer made empty and resized in forward, as the per-channel observers do."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("low", torch.empty(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        with torch.no_grad():
            self.low.resize_(h.shape[-1:])
            self.low.copy_(h.amin(0))
        return torch.tanh(h) * self.low


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_buffer_resized_in_forward(device, policy):
    """Eager: the replay starts from the buffer's old shape and value, backward ends with the new ones
    (before, the put-back copy raised a raw RuntimeError: "size of tensor a (8) must match ... (0)").
    XLA: a CheckpointError naming the op (the put-back cannot resize below functionalization)."""
    if device.type == "xla":
        with pytest.raises(xla_ckpt.CheckpointError, match="resize"):
            module_step(_Grow, [fixed_randn(3, 8)], device, policy)
        return
    check_module(_Grow, [fixed_randn(3, 8)], device, policy)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_prepare_qat_default_qconfig(device, policy):
    """QAT as users prepare it. XLA: the first call's resize is refused in forward, naming the observer
    and the fix (one forward under no_grad first), which then trains as without the library."""
    if device.type == "xla":
        with pytest.raises(xla_ckpt.CheckpointError, match="weight_fake_quant' resizes.*torch.no_grad"):
            module_step(_qat, [fixed_randn(3, 8)], device, policy)
        check_module(lambda: _qat(warm=True), [fixed_randn(3, 8)], device, policy)
        return
    check_module(_qat, [fixed_randn(3, 8)], device, policy)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_embedding_max_norm_renormalises_once(device, policy):
    """``Embedding(max_norm=1.0)`` renormalises the looked-up rows of its weight in place in forward."""

    def make() -> nn.Module:
        m = nn.Sequential(nn.Embedding(10, 8, max_norm=1.0), nn.Linear(8, 8), nn.Tanh())
        with torch.no_grad():
            m[0].weight.mul_(3)  # every row above the norm
        return m

    ids = torch.tensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    check_module(make, [ids], device, policy, fewer_bytes=False)


@pytest.mark.parametrize("mode", ["mean", "sum", "max"])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_embedding_bag(device, policy, mode):
    def make() -> nn.Module:
        return nn.Sequential(nn.EmbeddingBag(10, 8, mode=mode), nn.Linear(8, 8), nn.Tanh())

    ids = torch.tensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    check_module(make, [ids], device, policy, fewer_bytes=False)


# --------------------------------------------------------------------------- attention and recurrence


class _Attention(nn.Module):
    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, dropout=0.2, batch_first=True)
        self.out = nn.Linear(16, 16)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> Any:
        o, w = self.mha(x, x, x, need_weights=self.need_weights)
        return (self.out(o), w) if w is not None else self.out(o)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_multihead_attention_with_dropout(device, policy, need_weights):
    check_module(lambda: _Attention(need_weights), [fixed_randn(2, 5, 16)], device, policy)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_transformer_encoder_layer(device, policy, norm_first):
    """Default dropout 0.1 in three places, post- and pre-norm."""

    def make() -> nn.Module:
        return nn.Sequential(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=norm_first))

    check_module(make, [fixed_randn(2, 4, 8)], device, policy)


@pytest.mark.parametrize("preset", ["megatron_selective", "full"])
def test_transformer_encoder_presets(device, preset):
    """``xla_ckpt.apply`` finds nn.TransformerEncoder's layers as blocks and checkpoints both."""

    def make() -> nn.Module:
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def apply(model: nn.Module) -> None:
        report = xla_ckpt.apply(model, preset)
        assert "layers.0" in str(report) and "layers.1" in str(report)

    check_module(make, [fixed_randn(2, 5, 8)], device, apply)


class _Recurrent(nn.Module):
    def __init__(self, cls: type) -> None:
        super().__init__()
        self.rnn = cls(8, 8, num_layers=2, dropout=0.3, batch_first=True)
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> Any:
        o, h = self.rnn(x)
        return self.out(o), h


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_lstm_two_layers_with_dropout(device, policy):
    check_module(lambda: _Recurrent(nn.LSTM), [fixed_randn(2, 3, 8)], device, policy, fewer_bytes=False)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_gru_two_layers_with_dropout(device, policy):
    """torch's GRU on CPU splits its gate matmuls with ``unsafe_split`` and writes each gate in place:
    pieces of one storage that share no version counter. The engine, keying buffers by storage, took
    the write to one gate for a write to the gate saved before it: a false CheckpointError saying plain
    autograd raises the same. Writes that provably miss a saved tensor's elements are judged by its
    version (``_base.overlap``). Importing torch_xla puts
    its scan-based GRU at ``nn.GRU`` (XLA tensors only): CPU takes torch's own from ``nn.modules.rnn``."""
    cls = nn.GRU if device.type == "xla" else nn.modules.rnn.GRU
    check_module(lambda: _Recurrent(cls), [fixed_randn(2, 3, 8)], device, policy, fewer_bytes=False)


class _Cell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = None
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return h


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_gru_cell_unrolled(device, policy):
    """The same gates one step at a time (``nn.GRUCell``), the form the false error was reported in."""
    check_module(_Cell, [fixed_randn(2, 3, 8)], device, policy, fewer_bytes=policy == "nothing_saveable")


class _Sdpa(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.o = nn.Linear(8, 8)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=self.causal)
        return self.o(a.transpose(1, 2).reshape(2, 5, 8))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_sdpa_with_dropout(device, policy, causal):
    check_module(lambda: _Sdpa(causal), [fixed_randn(2, 5, 8)], device, policy)


class _Rotary(nn.Module):
    """Rotary embedding through complex numbers (view_as_complex, a complex buffer, view_as_real)."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.o = nn.Linear(8, 8)
        t = torch.arange(5.0)[:, None] * torch.arange(1, 5.0)[None] * 0.3
        self.register_buffer("freqs", torch.polar(torch.ones_like(t), t))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q(x)
        qc = torch.view_as_complex(q.reshape(*q.shape[:-1], 4, 2))
        return self.o(F.silu(torch.view_as_real(qc * self.freqs).flatten(-2)))


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_rotary_through_complex(device, policy):
    check_module(_Rotary, [fixed_randn(2, 5, 8)], device, policy)


# --------------------------------------------------------------------------- hooks and nested wrappers


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_full_backward_hooks_fire_once(device, policy):
    """A full backward hook and pre-hook on a module inside the region: one call each, the same grads."""

    def hooks(m: nn.Module, log: list) -> None:
        def post(mod: nn.Module, gi: tuple, go: tuple) -> None:
            log.extend(["post"] + [g.detach().clone() for g in gi + go if g is not None])

        def pre(mod: nn.Module, go: tuple) -> None:
            log.extend(["pre"] + [g.detach().clone() for g in go if g is not None])

        m[2].register_full_backward_hook(post)
        m[2].register_full_backward_pre_hook(pre)

    check_module(_mlp, [fixed_randn(3, 8)], device, policy, hooks)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_backward_hooks_that_change_grads(device, policy):
    def hooks(m: nn.Module, log: list) -> None:
        def pre(mod: nn.Module, go: tuple) -> tuple:
            log.append(go[0].detach().clone())
            return (go[0] * 2,)

        def post(mod: nn.Module, gi: tuple, go: tuple) -> tuple:
            log.append(gi[0].detach().clone())
            return (gi[0] * 0.5,)

        m[2].register_full_backward_pre_hook(pre)
        m[1].register_full_backward_hook(post)

    check_module(_mlp, [fixed_randn(3, 8)], device, policy, hooks)


class _TensorHooks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)
        self.log: list = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        h.register_hook(lambda g: self.log.append(g.detach().clone()))
        h2 = h * 3
        h2.register_hook(lambda g: g * 0.1)  # changes the grad flowing on
        return self.b(h2)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_tensor_hooks_on_intermediates(device, policy):
    def hooks(m: nn.Module, log: list) -> None:
        m.log = log

    check_module(_TensorHooks, [fixed_randn(3, 8)], device, policy, hooks)


class _NestedTorchCheckpoint(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(lambda t: self.drop(torch.tanh(self.a(t))), x,
                                              use_reentrant=self.reentrant)
        return self.b(h).sin()


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_torch_checkpoint_nested_inside(policy, reentrant):
    """torch.utils.checkpoint inside a region, with dropout (CPU: torch's checkpoint itself does not run
    on XLA tensors, plain or not; torch_xla has its own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_module(lambda: _NestedTorchCheckpoint(reentrant), [fixed_randn(3, 8)], torch.device("cpu"), policy, fewer_bytes=False)


class _FunctionalCall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.GELU())
        self.w = nn.Parameter(torch.randn(8, 8) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        params = {"0.weight": self.w, "0.bias": self.inner[0].bias}
        return torch.func.functional_call(self.inner, params, (x,)) @ self.w


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_functional_call_inside(device, policy):
    check_module(_FunctionalCall, [fixed_randn(3, 8)], device, policy)


class _Decay(nn.Module):
    """Writes its buffer in place in forward (as spectral norm's power iteration does)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("v", torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.v.mul_(0.5)
        return torch.tanh(self.lin(x)) * self.v


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_deep_copy_keeps_the_original(device, policy):
    """A deep copy of a model whose data exists, stepped (forward and backward in one XLA graph): the
    original keeps its buffers and the copy trains as without the library. On XLA the copy shares the
    original's device buffers until written; the replay's restore wrote the bare buffer under the copy's
    buffer, and the step's graph donated it: the original's was deleted ("buffer ... is deleted")."""
    runs = {}
    for wrap in (None, policy):
        torch.manual_seed(0)
        original = nn.Sequential(_Decay(), nn.Tanh(), _Decay()).to(device)
        x = fixed_randn(3, 8).to(device).requires_grad_()
        sync(device)
        model = copy.deepcopy(original)
        if wrap is not None:
            xla_ckpt.checkpointed(model, policy=wrap)
        out = model(x)
        out.sum().backward()
        sync(device)
        runs[wrap] = ([out.detach().cpu(), x.grad.cpu()] + [p.grad.cpu() for p in model.parameters()]
                      + [b.cpu() for b in model.buffers()] + [b.cpu() for b in original.buffers()])
    for got, ref in zip(runs[policy], runs[None], strict=True):
        torch.testing.assert_close(got, ref)
