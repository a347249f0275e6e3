"""Known library failures the fuzz found, kept as strict xfails until the library is fixed.

These are known failures kept as strict xfails: each is the fuzz's minimised program (a ``Step``
tuple), so a fix turns it into an XPASS, which fails the run (strict) and says to make it a plain test.

A write through an ``unfold`` or ``view_as_complex`` view of a tensor the region made by a copying
reshape of an expand (``fuzz_programs._fresh_chain(2269)``: ``a[...].expand(2, 2, 4).reshape(4, 4)``,
``a.t().contiguous()`` crashes the same way), that tensor then one of the region's outputs: on XLA
the checkpointed forward crashes the process (segmentation fault; faulthandler shows it in
``register_hook`` under ``Device.watch_grad`` at the end of forward); the plain run works. Found by
``XLA_CKPT_FUZZ=hunt`` with the unfold / view_as_complex write kinds (``inplace_last`` 4 and 5). A
crash, so each program runs in a subprocess.

A relu's output (which relu saves) written through an ``unfold`` or ``view_as_complex`` view, after a
tagged value (``xla_ckpt.tag``), then read: the plain run raises autograd's "modified by an inplace
operation"; on XLA the checkpointed run returns values instead (the first law: it must raise too).
Without the tag, or with a plain ``mul_``, both raise; on CPU both raise. Found by the same hunt.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import test_fuzz
from fuzz_programs import Step
from helpers import ROOT_DIR, replay_kind

PROGRAM = """
import torch, torch_xla
torch_xla.device()
from fuzz_programs import Step
from helpers import replay_kind
import test_fuzz
steps = (Step("view_chain", (0,), 2269), Step("inplace_last", (), {variant}))
with replay_kind({direct}):
    print(test_fuzz.check(steps, "nothing_saveable", torch_xla.device(), test_fuzz.XLA_TOL))
"""


@pytest.mark.xla
@pytest.mark.xfail(strict=True, reason="known failure: XLA segfault on a written unfold/view_as_complex view of an "
                                       "expand-reshape copy returned by the region")
@pytest.mark.parametrize("variant", [4, 5], ids=["view_as_complex_write", "unfold_write"])
def test_write_through_unfold_or_complex_view_of_an_expand_copy(variant: int) -> None:
    """The fuzz's program on XLA, checkpointed: outputs, grads and buffers as the plain run's ("exact")."""
    tests = os.path.join(ROOT_DIR, "tests")
    env = {**os.environ, "PJRT_DEVICE": "CPU",
           "PYTHONPATH": os.pathsep.join([ROOT_DIR, tests, os.path.join(tests, "fuzz")])}
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(variant=variant, direct=True)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "exact", proc.stdout


@pytest.mark.xla
@pytest.mark.xfail(strict=True, reason="known failure: on XLA a tagged region misses autograd's in-place error "
                                       "for a saved output written through an unfold/view_as_complex view")
@pytest.mark.parametrize("variant", [4, 5], ids=["view_as_complex_write", "unfold_write"])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
def test_saved_relu_output_written_through_unfold_or_complex_view_after_a_tag(xla_device, variant: int,
                                                                             direct: bool) -> None:
    """The fuzz's minimised program: the checkpointed run raises where the plain run does."""
    steps = (Step("act", (0,), 0), Step("tag_last", (), 1), Step("act", (2,), 3), Step("inplace_last", (), variant),
             Step("act", (3,), 0))
    with replay_kind(direct):
        assert test_fuzz.check(steps, "nothing_saveable", xla_device, test_fuzz.XLA_TOL) == "both raised"
