"""OpCall.module and the report's module names: fully qualified from the model the user called.

Whatever the entry point (apply, checkpointed on an instance or a class, a function, an explicit
checkpoint call inside a forward, Hugging Face's gradient-checkpointing hook), with or without
saved_activations(), and from every thread.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
from collections import defaultdict

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt import Decision, policies
from xla_ckpt._api.config import glob_regex

D, B = 8, 4


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(D, 2 * D)
        self.down = nn.Linear(2 * D, D)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.Linear(D, D)
        self.moe = nn.Module()
        self.moe.router = nn.Module()
        self.moe.router.gate = nn.Linear(D, D)  # called from Layer.forward: never through its parents
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(x)
        x = x * torch.sigmoid(self.moe.router.gate(x))
        return x + self.mlp(x)


class Model(nn.Module):
    def __init__(self, layer_cls=Layer, n: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(D, D)
        self.layers = nn.ModuleList(layer_cls() for _ in range(n))
        self.head = nn.Linear(D, D)
        self.inline_policy = None  # "explicit": forward calls xla_ckpt.checkpoint itself

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = xla_ckpt.checkpoint(layer, x, policy=self.inline_policy) if self.inline_policy else layer(x)
        return self.head(x)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model()

    def forward(self, x):
        return self.model(x)


class Recorder:
    """A module-glob policy that logs (op, module, decision) per thread."""

    def __init__(self, pattern: str) -> None:
        self.regex = glob_regex(pattern)
        self.log: dict[int, list[tuple[object, str, Decision]]] = defaultdict(list)

    def __call__(self, call):
        d = Decision.SAVE if self.regex.match(call.module) else Decision.RECOMPUTE
        self.log[threading.get_ident()].append((call.op, call.module, d))
        return d

    def mine(self):
        return self.log[threading.get_ident()]


def _layer_class():
    # A fresh subclass per use: class-level wrapping must not leak into other tests.
    return type("LayerCopy", (Layer,), {})


ENTRY_POINTS = ["apply", "instance", "class", "function", "explicit"]


def _wrapped(entry, rec, monkeypatch):
    """A model whose layers (or whole forward) are checkpointed with ``rec`` through ``entry``."""
    torch.manual_seed(0)
    model = Model(_layer_class() if entry == "class" else Layer)
    if entry == "apply":
        monkeypatch.setitem(policies._REGISTRY, "recording_for_test", lambda: rec)
        xla_ckpt.apply(model, {"checkpoint": [{"match": ["layers.*"], "policy": "recording_for_test"}]})
        return model
    if entry == "instance":
        for layer in model.layers:
            xla_ckpt.checkpointed(layer, policy=rec)
        return model
    if entry == "class":
        xla_ckpt.checkpointed(type(model.layers[0]), policy=rec)
        return model
    if entry == "function":
        return xla_ckpt.checkpointed(policy=rec)(lambda x: model(x))
    model.inline_policy = rec
    return model


def _layer_decisions(log):
    return [(op, m, d) for op, m, d in log if m.startswith("layers.")]


@pytest.mark.parametrize("report", [False, True], ids=["plain", "under_report"])
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_glob_policy_same_decisions_every_entry_point(entry, report, monkeypatch):
    reference = Recorder("layers.*.mlp.*")
    ref_model = _wrapped("instance", reference, monkeypatch)
    x = torch.randn(B, D, requires_grad=True)
    ref_model(x)
    expected = _layer_decisions(reference.mine())
    saves = [m for _, m, d in expected if d is Decision.SAVE]
    # The policy acted: it saved the mlp projections of both layers, by their full names.
    assert {"layers.0.mlp.up", "layers.0.mlp.down", "layers.1.mlp.up", "layers.1.mlp.down"} <= set(saves)
    assert {m for _, m, _ in expected} >= {"layers.0.moe.router.gate", "layers.1.attn"}

    rec = Recorder("layers.*.mlp.*")
    model = _wrapped(entry, rec, monkeypatch)
    with xla_ckpt.saved_activations() if report else contextlib.nullcontext():
        model(x)
    assert _layer_decisions(rec.mine()) == expected


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_report_by_module_fully_qualified(entry, monkeypatch):
    rec = Recorder("layers.*.mlp.*")
    model = _wrapped(entry, rec, monkeypatch)
    with xla_ckpt.saved_activations() as report:
        model(torch.randn(B, D, requires_grad=True))
    by_module = report.by_module()
    for i in range(2):
        assert by_module.get(f"layers.{i}.mlp.up", 0) > 0, by_module  # its addmm output, saved by the policy
    assert not [m for m in by_module if m.startswith(("mlp", "moe", "up", "gate"))], by_module


def test_grandchild_called_from_grandparent_forward():
    """torchtitan's ToyModule: self.moe.router.gate(x) in Layer.forward is 'moe.router.gate', never ''."""
    seen = []

    def spy(call):
        if call.op.overloadpacket is torch.ops.aten.addmm:
            seen.append(call.module)
        return Decision.RECOMPUTE

    layer = Layer()
    xla_ckpt.checkpoint(layer, torch.randn(B, D, requires_grad=True), policy=spy)
    assert seen == ["attn", "moe.router.gate", "mlp.up", "mlp.down"]


class _Rotary(nn.Module):
    """A function made a module at import, held by no model (``kernels``' ``use_kernel_forward_from_hub``,
    which transformers >= 5.25 puts on ``apply_rotary_pos_emb``)."""

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return q * q.sin()


_ROTARY = _Rotary()


class _Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ROTARY(self.q(x))


def test_a_module_no_model_holds_is_named_as_its_caller():
    """Its ops were reported under '' (the model's root): the report's per-layer bytes grew the root's with
    depth and ``estimate_layers`` stopped extrapolating HF Llama (CI with transformers 5.25)."""
    seen = []

    def spy(call):
        if call.op.overloadpacket in (torch.ops.aten.sin, torch.ops.aten.mul):
            seen.append(call.module)
        return Decision.SAVE

    model = nn.Sequential(nn.Sequential(_Attn()))
    xla_ckpt.checkpoint(model, torch.randn(B, D, requires_grad=True), policy=spy)
    assert seen == ["0.0", "0.0"]


def test_forward_called_directly_on_a_checkpointed_instance():
    """layer.forward(x) runs no module hook: the wrapper still names the layer (entered())."""
    seen = []

    def spy(call):
        if call.op.overloadpacket is torch.ops.aten.addmm:
            seen.append(call.module)
        return Decision.RECOMPUTE

    model = Model()
    xla_ckpt.checkpointed(model.layers[1], policy=spy)
    model.layers[1].forward(torch.randn(B, D, requires_grad=True))
    assert seen == ["attn", "moe.router.gate", "mlp.up", "mlp.down"]
    seen.clear()
    with xla_ckpt.saved_activations():  # tracking already on when the wrapper runs
        model.layers[1].forward(torch.randn(B, D, requires_grad=True))
    assert seen == ["attn", "moe.router.gate", "mlp.up", "mlp.down"]


def test_gradients_unchanged_by_naming(monkeypatch):
    """The glob policy saves by name; gradients equal the unwrapped model's."""
    torch.manual_seed(0)
    plain = Model()
    model = _wrapped("class", Recorder("layers.*.mlp.*"), monkeypatch)
    model.load_state_dict(plain.state_dict())
    x = torch.randn(B, D, requires_grad=True)
    assert_same(grads_of(plain, [x], list(plain.parameters())), grads_of(model, [x], list(model.parameters())))


def _hf_model():
    from xla_ckpt.models import llama_hf

    torch.manual_seed(0)
    return llama_hf(vocab_size=64, d_model=32, n_layer=2, n_head=4, seq_len=8)


@pytest.mark.parametrize("report", [False, True], ids=["plain", "under_report"])
@pytest.mark.parametrize("entry", ["apply", "instance", "hf_hook"])
def test_hf_model_same_decisions_every_entry_point(entry, report, monkeypatch):
    """HF's own gradient-checkpointing hook with our checkpoint: the same names as apply."""
    idx = torch.randint(0, 64, (2, 8))

    def decisions(entry):
        rec = Recorder("model.layers.*.mlp.*")
        model = _hf_model()
        model.train()
        if entry == "apply":
            monkeypatch.setitem(policies._REGISTRY, "recording_for_test", lambda: rec)
            xla_ckpt.apply(model, {"checkpoint": [{"classes": ["LlamaDecoderLayer"], "policy": "recording_for_test"}]})
        elif entry == "instance":
            for layer in model.model.layers:
                xla_ckpt.checkpointed(layer, policy=rec)
        else:
            model._set_gradient_checkpointing(
                enable=True, gradient_checkpointing_func=functools.partial(xla_ckpt.checkpoint, policy=rec)
            )
        with xla_ckpt.saved_activations() if report else contextlib.nullcontext():
            model(idx, use_cache=False).logits.sum()
        return rec.mine()

    got = decisions(entry)
    assert got == decisions("apply")
    saved = {m for _, m, d in got if d is Decision.SAVE}
    assert {"model.layers.0.mlp.up_proj", "model.layers.1.mlp.down_proj"} <= saved, saved


def test_hf_hook_report_keeps_layer_prefix():
    """saved_activations().by_module() on an HF model without apply: one entry per layer, not merged."""
    model = _hf_model()
    model.train()
    model._set_gradient_checkpointing(
        enable=True, gradient_checkpointing_func=functools.partial(xla_ckpt.checkpoint, policy="dots_saveable")
    )
    with xla_ckpt.saved_activations() as report:
        model(torch.randint(0, 64, (2, 8)), use_cache=False)
    names = set(report.by_module())
    for i in range(2):
        assert f"model.layers.{i}.mlp.up_proj" in names, names
    assert not [n for n in names if n.startswith(("mlp", "self_attn", "up_proj"))], names


def _thread_sequences(n_threads: int, steps: int, with_untracked: bool):
    """Every thread runs its own checkpointed model; returns each thread's OpCall.module sequences."""
    rec = Recorder("layers.*.mlp.*")
    torch.manual_seed(0)
    base = Outer()  # the thread alternates between calling base and base.model: two roots
    for layer in base.model.layers:
        xla_ckpt.checkpointed(layer, policy=rec)
    results: dict[int, list[list[str]]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads + int(with_untracked))
    stop = threading.Event()

    def worker(i):
        try:
            model = copy.deepcopy(base, {id(rec): rec})  # one policy object, logging per thread
            x = torch.randn(B, D, requires_grad=True)
            start.wait()
            out = []
            for _ in range(steps):
                # A root left on this thread's stack by an unbalanced hook (hooks removed by another
                # thread mid-forward) would rename the second call's ops "model.layers...".
                for root in (model, model.model):
                    rec.mine().clear()
                    root(x).sum().backward()
                    out.append([m for _, m, _ in rec.mine()])
            results[i] = out
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    def untracked():
        # Plain forwards in another thread while the hooks are installed: they must not reach any
        # thread's module stack.
        plain = Model()
        start.wait()
        with torch.no_grad():
            while not stop.is_set():
                plain(torch.randn(B, D))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    extra = threading.Thread(target=untracked) if with_untracked else None
    for t in threads + ([extra] if extra else []):
        t.start()
    for t in threads:
        t.join()
    stop.set()
    if extra:
        extra.join()
    assert not errors, errors
    return results


def test_threads_see_their_own_module_names():
    """Each thread's OpCall.module sequence equals the single-threaded one."""
    (single,) = _thread_sequences(1, 1, with_untracked=False).values()
    assert "model.layers.1.mlp.up" in single[0] and "layers.0.moe.router.gate" in single[1]
    results = _thread_sequences(4, 6, with_untracked=True)
    assert len(results) == 4
    for i, seqs in results.items():
        for step, seq in enumerate(seqs):
            assert seq == single[step % 2], f"thread {i} call {step}"


def test_no_hook_outlives_tracking():
    before = len(torch.nn.modules.module._global_forward_pre_hooks)
    with xla_ckpt.saved_activations():
        assert len(torch.nn.modules.module._global_forward_pre_hooks) == before + 1
        with pytest.raises(RuntimeError, match="boom"):
            xla_ckpt.checkpoint(lambda x: (_ for _ in ()).throw(RuntimeError("boom")), torch.randn(2, requires_grad=True))
    assert len(torch.nn.modules.module._global_forward_pre_hooks) == before
    from xla_ckpt._base import modules as _modules

    assert _modules._local.depth == 0 and not _modules._local.stack and not _modules._local.names
