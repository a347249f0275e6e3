"""The one decision site (``_policy.decide``): its rules in order, and a policy's own error named and chained.

Every lowering asks ``decide``: the eager and lazy-XLA forward (``_engine.forward``) and the compile
lowering (``_compile.lowering``); these tests check the rules once, then that each lowering reports a
raising policy the same way and leaves nothing installed behind it.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from xla_ckpt import CheckpointError, Decision, OpCall, PolicyError
from xla_ckpt._policy.decide import Why, decide

aten = torch.ops.aten


def _call(op=aten.sin.default, module: str = "block.mlp") -> OpCall:
    x = torch.randn(2, 3)
    return OpCall(op, (x,), {}, x.sin(), module=module)


def _recompute(call: OpCall) -> Decision:
    return Decision.RECOMPUTE


@pytest.mark.parametrize(("keep", "writes", "planning", "expected"), [
    (True, True, True, (Decision.SAVE, Why.KEEP)),
    (False, True, True, (Decision.RECOMPUTE, Why.WRITES)),
    (False, False, True, (Decision.SAVE, Why.PLANNED)),
    (False, False, False, (Decision.RECOMPUTE, Why.POLICY)),
])
def test_rules_in_order(keep, writes, planning, expected) -> None:
    assert decide(_recompute, _call(), keep, writes, planning) == expected
    assert Why.KEEP.hard and Why.WRITES.hard and not Why.PLANNED.hard and not Why.POLICY.hard


def test_a_policy_answer_that_is_no_decision_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="returned True for aten.sin.default in module 'block.mlp'"):
        decide(lambda c: True, _call(), False, False, False)


def _raising(call: OpCall) -> Decision:
    raise KeyError("my bug")


def test_a_policys_own_error_names_the_op_and_module_and_is_chained() -> None:
    with pytest.raises(PolicyError, match=r"raised KeyError: 'my bug' while deciding op aten.sin.default in "
                                              r"module 'block.mlp'") as info:
        decide(_raising, _call(), False, False, False)
    assert isinstance(info.value.__cause__, KeyError)


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).tanh()


def _step(model: torch.nn.Module, device: torch.device, compiled: bool = False) -> list[torch.Tensor]:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
    step = torch.compile(model, backend="inductor") if compiled else model
    step(x).sum().backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    return [x.grad.cpu(), *(p.grad.cpu() for p in model.parameters())]


def test_a_raising_policy_names_the_op_and_module_in_the_engine_and_leaves_nothing(device) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(_Block()).to(device)
    xla_ckpt.checkpointed(model[0], policy=_raising)
    with pytest.raises(PolicyError, match=r"raised KeyError: 'my bug' while deciding op aten\.\w+\.\w+ in module") as info:
        _step(model, device)
    assert isinstance(info.value.__cause__, KeyError)
    # Nothing left installed: the same model under a working policy is exact afterwards.
    model.zero_grad()
    plain = torch.nn.Sequential(_Block()).to(device)
    plain.load_state_dict(model.state_dict())
    xla_ckpt.uncheckpointed(model[0])
    xla_ckpt.checkpointed(model[0], policy="nothing_saveable")
    got, ref = _step(model, device), _step(plain, device)
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r)


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
def test_a_raising_policy_under_compile_names_the_op_and_module() -> None:
    """Dynamo reports an error of its backend as ``BackendCompilerFailed``; ours is the one it carries."""
    model = torch.nn.Sequential(_Block())
    xla_ckpt.checkpointed(model[0], policy=_raising)
    with pytest.raises(Exception) as info:
        _step(model, torch.device("cpu"), compiled=True)
    err = info.value
    while err is not None and not isinstance(err, CheckpointError):
        err = getattr(err, "inner_exception", None) or err.__cause__
    assert err is not None, f"no CheckpointError in {info.value!r}"
    assert "torch.compile" in str(err) and "raised KeyError: 'my bug' while deciding op aten.addmm.default in " \
        "module '0.proj'" in str(err)
    assert isinstance(err.__cause__, KeyError)
