"""The engine's per-op cost, as deterministic counts: Python calls the engine makes per op of ``fn``.

Timings on a shared machine are noise; call counts are not. A region of ``n`` chained ops is run
forward and backward under cProfile for two lengths, and the difference divided by the extra ops is
the cost of one op (forward record and decision, one saved tensor packed, replay check, unpack),
without the per-region fixed part. Gradients are compared first: a cheap path must stay exact.
"""

from __future__ import annotations

import cProfile
import os
import pstats

import pytest
import torch

import xla_ckpt
from xla_ckpt._engine import forward as _forward

# Engine functions called per op (forward + replay): measured 33.2 / 33.0 / 34.2 for these regions
# (nothing_saveable, everything_saveable, dots_with_no_batch_dims_saveable). The budget leaves no room
# for a second walk over each op's arguments: a feature on the per-op path must pay for its calls.
ENGINE_CALLS_PER_OP = 35
SHORT, LONG = 1, 11


def _chain(n: int):
    def f(x: torch.Tensor) -> torch.Tensor:
        for _ in range(n):
            x = x.sin()
        return x

    return f


def _profile(n: int, policy: str) -> pstats.Stats:
    x = torch.randn(4, 4, requires_grad=True)
    fn = _chain(n)
    xla_ckpt.checkpoint(fn, x, policy=policy).sum().backward()  # warm: op info, module trees
    pr = cProfile.Profile()
    pr.enable()
    xla_ckpt.checkpoint(fn, x, policy=policy).sum().backward()
    pr.disable()
    return pstats.Stats(pr)


# The library's files, by the package's real folder: a path substring such as "xla_ckpt/" also matches
# torch's own files when the checkout's folder is named xla_ckpt and its .venv lies inside it.
LIBRARY_DIR = os.path.realpath(os.path.dirname(xla_ckpt.__file__)) + os.sep
TORCH_PYTREE = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "utils", "_pytree.py"))


def is_library_file(filename: str) -> bool:
    """Whether a profiled code object's file is one of the library's own (under its package folder)."""
    return os.path.realpath(filename).startswith(LIBRARY_DIR)


def _calls(stats: pstats.Stats, counted) -> int:
    return sum(v[1] for (filename, _, _), v in stats.stats.items() if counted(filename))


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable", "dots_with_no_batch_dims_saveable"])
def test_engine_calls_per_op(policy):
    x = torch.randn(4, 4, requires_grad=True)
    ref, got = x.clone().detach().requires_grad_(), x.clone().detach().requires_grad_()
    _chain(LONG)(ref).sum().backward()
    xla_ckpt.checkpoint(_chain(LONG), got, policy=policy).sum().backward()
    assert got.grad is not None
    torch.testing.assert_close(got.grad, ref.grad, rtol=0, atol=0)

    short, long = _profile(SHORT, policy), _profile(LONG, policy)
    per_op = (_calls(long, is_library_file) - _calls(short, is_library_file)) / (LONG - SHORT)
    assert 10 <= per_op <= ENGINE_CALLS_PER_OP, f"{per_op:.1f} engine calls per op"


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable"])
def test_no_pytree_walk_per_op(policy):
    """Plain tensor arguments and outputs are walked by the engine itself, not by torch's pytree
    (a generic tree walk costs tens of calls per op, paid again for each list the engine walks)."""
    short, long = _profile(SHORT, policy), _profile(LONG, policy)
    def pytree(filename: str) -> bool:
        return os.path.realpath(filename) == TORCH_PYTREE

    per_op = (_calls(long, pytree) - _calls(short, pytree)) / (LONG - SHORT)
    assert per_op == 0, f"{per_op:.1f} pytree calls per op"


def test_library_files_by_package_folder():
    """A checkout folder named xla_ckpt with its .venv inside: torch's files there are not the library's,
    though their path holds "xla_ckpt/" (the substring this counter once used)."""
    torch_file = "/x/xla_ckpt/.venv/lib/python3.11/site-packages/torch/foo.py"
    assert "xla_ckpt/" in torch_file
    assert not is_library_file(torch_file)
    assert not is_library_file(LIBRARY_DIR.rstrip(os.sep) + "_extra" + os.sep + "x.py")  # a sibling named alike
    assert is_library_file(_forward.__file__)
    assert is_library_file(os.path.join(LIBRARY_DIR, "_engine", "forward.py"))
