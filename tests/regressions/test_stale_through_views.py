"""A saved value written afterwards through a view: an error, as in the plain run.

Autograd's views share their base's version counter, so plain autograd raises "modified by an inplace
operation" when a saved tensor is written through any view of it. On XLA every view is a buffer of its
own, and a write through one (``unfold``, ``view_as_complex``, ``t()[0]``) left what was saved from the
base unmarked: the checkpointed run returned values where the plain run raises. Every view maps to
the buffer it views (``Dataflow.view_root``), and a write makes the slots saved from any view of it stale.
"""

from __future__ import annotations

import pytest

import fuzz_check
from fuzz_programs import Step
from helpers import replay_kind


@pytest.mark.xla
@pytest.mark.parametrize("variant", [4, 5], ids=["view_as_complex_write", "unfold_write"])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
def test_saved_relu_output_written_through_unfold_or_complex_view_after_a_tag(xla_device, variant: int,
                                                                             direct: bool) -> None:
    """The fuzz's minimised program: the checkpointed run raises where the plain run does."""
    steps = (Step("act", (0,), 0), Step("tag_last", (), 1), Step("act", (2,), 3), Step("inplace_last", (), variant),
             Step("act", (3,), 0))
    with replay_kind(direct):
        assert fuzz_check.check(steps, "nothing_saveable", xla_device, fuzz_check.XLA_TOL) == "both raised"


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable", "dots_saveable"])
@pytest.mark.parametrize("write", ["direct", "t", "unfold", "complex"])
def test_saved_output_written_through_a_view(device, write, policy):
    """relu saves its output; fn then writes it (directly or through a view) and reads it: both raise."""
    import torch
    import xla_ckpt

    writes = {"direct": lambda r: r.add_(1.0), "t": lambda r: r.t()[0].add_(1.0),
              "unfold": lambda r: r.unfold(1, 2, 2).add_(1.0),
              "complex": lambda r: torch.view_as_complex(r.view(4, 2, 2)).mul_(1j)}

    def fn(x):
        r = torch.relu(x * 1.5)
        writes[write](r)
        return torch.sin(r)

    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
    with pytest.raises(RuntimeError, match="inplace"):
        fn(x).sum().backward()
    with pytest.raises(xla_ckpt.CheckpointError):
        xla_ckpt.checkpoint(fn, x, policy=policy).sum().backward()
