"""``_compile.rng.present_only``: torch's RNG pass gets only the recomputed random ops both graphs run."""

from __future__ import annotations

import pytest
import torch
from torch import fx
from torch.utils.checkpoint import CheckpointPolicy

import xla_ckpt
from xla_ckpt._compile.rng import present_only


def _graph(rand: bool, mark: object = None) -> fx.GraphModule:
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.rand_like.default, (x,), name="rand_like") if rand else x
    if mark is not None:
        y.meta["recompute"] = mark
    g.output(g.call_function(torch.ops.aten.sin.default, (y,)))
    return fx.GraphModule(torch.nn.Module(), g)


def _spy():
    seen = []

    def functionalize(joint, fw, bw, num_sym_nodes):
        seen.append([n.name for n in joint.graph.nodes if n.meta.get("recompute") is not None])
        return fw, bw

    return seen, functionalize


@pytest.mark.parametrize("in_fw,in_bw,passed", [(True, True, ["rand_like"]), (True, False, []), (False, False, [])])
def test_an_op_missing_from_a_graph_is_not_passed_and_its_mark_is_put_back(in_fw, in_bw, passed) -> None:
    joint = _graph(True, CheckpointPolicy.PREFER_RECOMPUTE)
    seen, functionalize = _spy()
    present_only(functionalize)(joint, _graph(in_fw), _graph(in_bw), 0)
    assert seen == [passed]
    node = next(n for n in joint.graph.nodes if n.name == "rand_like")
    assert node.meta["recompute"] is CheckpointPolicy.PREFER_RECOMPUTE


def test_an_op_recomputed_without_its_forward_run_is_an_error() -> None:
    seen, functionalize = _spy()
    with pytest.raises(xla_ckpt.CheckpointError, match=r"random op aten\.rand_like.*fresh random numbers"):
        present_only(functionalize)(_graph(True, CheckpointPolicy.PREFER_RECOMPUTE), _graph(False), _graph(True), 0)
    assert seen == []


def test_wrapping_twice_is_wrapping_once() -> None:
    _, functionalize = _spy()
    once = present_only(functionalize)
    assert present_only(once) is once
