"""xla_ckpt.scan_layers: torch_xla's scan over identical layers, our policy choosing what the body saves."""

from __future__ import annotations

from helpers import PROBES_DIR

import json
import os
import subprocess
import sys

import pytest
import torch

import xla_ckpt
from xla_ckpt._api import scan as _scan

from helpers import assert_same
from scan_layers import gpt_layers as _layers, layer_grads as _run, unrolled as _unrolled

PROBES = PROBES_DIR
pytestmark = pytest.mark.xla


# The fast tier runs the selective policy (marks inside the scanned body); the other two are slow tier.
@pytest.mark.parametrize("policy", [pytest.param("nothing_saveable", marks=pytest.mark.slow), "dots_saveable",
                                    pytest.param("everything_saveable", marks=pytest.mark.slow)])
def test_scan_gradients_equal_unrolled(xla_device, policy):
    layers = _layers(3, xla_device)
    x = torch.randn(2, 16, 32).to(xla_device).requires_grad_()
    ref = _run(layers, x, _unrolled(layers))
    got = _run(layers, x, lambda h: xla_ckpt.scan_layers(layers, h, policy=policy))
    assert_same(ref, got)


def test_scan_policy_marks_the_body(xla_device):
    """The partition function asks the policy about the body's ops and saves what it says."""
    asked = []

    def spy(call):
        asked.append(call.op.overloadpacket)
        return xla_ckpt.Decision.SAVE if call.op.overloadpacket is torch.ops.aten.mm else xla_ckpt.Decision.RECOMPUTE

    layers = _layers(2, xla_device)
    x = torch.randn(2, 16, 32).to(xla_device).requires_grad_()
    ref = _run(layers, x, _unrolled(layers))
    got = _run(layers, x, lambda h: xla_ckpt.scan_layers(layers, h, policy=spy))
    assert_same(ref, got)
    # The body as torch_xla traces it (a Linear is mm + add on XLA): qkv, proj, up, down, once for both layers.
    assert asked.count(torch.ops.aten.mm) == 4, asked
    assert torch.ops.aten._softmax in asked


def test_scan_bad_input_is_clear(xla_device):
    layers = _layers(2, xla_device)
    with pytest.raises(ValueError, match="XLA device"):
        xla_ckpt.scan_layers(layers, torch.randn(2, 16, 32))
    xla_ckpt.checkpointed(layers[0], policy="dots_saveable")
    with pytest.raises(ValueError, match=r"layers\[0\].*checkpointed.*uncheckpointed"):
        xla_ckpt.scan_layers(layers, torch.randn(2, 16, 32).to(xla_device))
    xla_ckpt.uncheckpointed(layers[0])
    with pytest.raises(ValueError, match="unknown checkpoint policy"):
        xla_ckpt.scan_layers(layers, torch.randn(2, 16, 32).to(xla_device), policy="nope")


def test_scan_partition_fn_is_reused():
    # torch_xla caches a traced body by id(partition_fn): one function per policy object.
    assert _scan.partition_fn("dots_saveable") is _scan.partition_fn(xla_ckpt.policies.dots_saveable)


def _hlo_lines(n: int, device: torch.device, scan: bool) -> int:
    import torch_xla

    layers = _layers(n, device)
    x = torch.randn(2, 16, 32).to(device).requires_grad_()
    h = xla_ckpt.scan_layers(layers, x, policy="nothing_saveable") if scan else _unrolled(layers)(x)
    h.square().sum().backward()
    grads = [t.grad for t in [x, *layers.parameters()]]
    text = torch_xla._XLAC._get_xla_tensors_hlo(grads)
    torch_xla.sync()
    return len(text.splitlines())


@pytest.mark.slow  # traces 4- and 16-layer models, scanned and unrolled; scan's gradients stay fast
def test_scan_graph_size_flat_in_depth(xla_device):
    """The deterministic proxy for trace + compile time: the step's HLO does not grow with depth."""
    scan4, scan16 = _hlo_lines(4, xla_device, True), _hlo_lines(16, xla_device, True)
    unrolled4, unrolled16 = _hlo_lines(4, xla_device, False), _hlo_lines(16, xla_device, False)
    assert scan16 <= 1.5 * scan4, (scan4, scan16)
    assert unrolled16 >= 3 * unrolled4, (unrolled4, unrolled16)  # the unrolled graph grows with depth


def _probe(variant: str, tmp_path, layers: int = 8) -> dict:
    out = subprocess.run(
        [sys.executable, os.path.join(PROBES, "xla_scan_probe.py"), variant, str(tmp_path / variant.replace(":", "_")),
         "--layers", str(layers)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # subprocess probes (tests/probes/xla_scan_probe.py), 8 layers each
def test_scan_compiled_peak(xla_device, tmp_path):
    """8 GPT blocks, one graph: nothing_saveable's compiled peak is far below scan without checkpointing."""
    r = {v: _probe(v, tmp_path) for v in ["scan_plain", "scan:nothing_saveable", "scan:dots_saveable"]}
    for v in r:
        torch.testing.assert_close(torch.tensor(r[v]["grads"]), torch.tensor(r["scan_plain"]["grads"]))
    plain = r["scan_plain"]["peak"]
    assert r["scan:nothing_saveable"]["peak"] <= 0.5 * plain, r
    assert r["scan:nothing_saveable"]["peak"] < r["scan:dots_saveable"]["peak"] < plain, r
