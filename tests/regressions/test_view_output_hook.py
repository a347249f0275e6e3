"""A region output that is a view of a tensor fn wrote through another view.

On XLA such a view gets its ``grad_fn`` rebuilt when it is first read, and ``Tensor.register_hook``
sets its hook dict before that read: torch_xla 2.9 segfaults (a plain ``register_hook`` on the tensor
crashes too). The engine registers a hook on each output to fence the recompute on the incoming
gradient, so the checkpointed forward crashed where the plain one works. A crash, so the programs run
in a subprocess; they compare each one's grads with the plain run's.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import ROOT_DIR

PROGRAM = """
import torch, torch_xla, xla_ckpt
d = torch_xla.device()

def copy_of_expand(x):  # reshape of an expand: a view of a fresh copy
    return (x * 2)[0:1].expand(4, 4).reshape(4, 4)

def through_unfold(x):
    a = copy_of_expand(x)
    a.unfold(1, 2, 2).mul_(3.0)
    return a

def through_complex(x):
    a = copy_of_expand(x)
    torch.view_as_complex(a.view(4, 2, 2)).mul_(1j)
    return a

def through_t(x):
    a = copy_of_expand(x)
    a.t()[0].mul_(3.0)
    return a

for fn in (through_unfold, through_complex, through_t):
    for policy in ("nothing_saveable", "everything_saveable"):
        x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).to(d).requires_grad_()
        fn(x).pow(2).sum().backward()
        torch_xla.sync()
        ref, x.grad = x.grad.cpu(), None
        xla_ckpt.checkpoint(fn, x, policy=policy).pow(2).sum().backward()
        torch_xla.sync()
        torch.testing.assert_close(x.grad.cpu(), ref, rtol=1e-5, atol=1e-5)

# The fuzz's program (a fresh chain's expand-reshape copy written through view_as_complex / unfold views).
from fuzz_programs import Step
from helpers import replay_kind
import fuzz_check
for variant in (4, 5):
    with replay_kind(True):
        assert fuzz_check.check((Step("view_chain", (0,), 2269), Step("inplace_last", (), variant)),
                               "nothing_saveable", d, fuzz_check.XLA_TOL) == "exact"
print("exact")
"""


@pytest.mark.xla
def test_output_viewing_a_tensor_written_through_another_view():
    tests = os.path.join(ROOT_DIR, "tests")
    env = {**os.environ, "PJRT_DEVICE": "CPU",
           "PYTHONPATH": os.pathsep.join([ROOT_DIR, tests, os.path.join(tests, "fuzz")])}
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "exact", proc.stdout
