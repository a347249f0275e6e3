"""Matmul-class detection: batch dimensions come from the call's shapes, not from the op's name."""

from __future__ import annotations

import pytest
import torch

from xla_ckpt import Decision, policies
from xla_ckpt._policy.dots import dot_batch, einsum_batch
from xla_ckpt._record.opcall import OpCall

aten = torch.ops.aten


def t(*shape):
    return torch.empty(shape)


@pytest.mark.parametrize("eq, shapes, batch", [
    ("ij,jk->ik", [(3, 4), (4, 5)], 1),
    ("ij,jk", [(3, 4), (4, 5)], 1),  # implicit output
    ("bij,bjk->bik", [(3, 2, 4), (3, 4, 5)], 3),
    ("bhqd,bhkd->bhqk", [(2, 4, 8, 16), (2, 4, 8, 16)], 8),
    ("btd,bTd->btT", [(1, 1, 1), (1, 1, 1)], 1),  # batch dim of size 1: no batch
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 6)], 6),  # broadcast under the ellipsis
    ("...ij,jk->...ik", [(2, 3, 4, 5), (5, 6)], 1),  # ellipsis in one operand only: folded rows
    ("i,j->ij", [(3,), (4,)], 1),  # outer product
])
def test_einsum_batch(eq, shapes, batch):
    assert einsum_batch(eq, [t(*s) for s in shapes]) == batch


def test_not_one_matmul():
    assert einsum_batch("ii->i", [t(3, 3)]) is None
    assert dot_batch(aten.gelu.default, (t(3),)) is None


@pytest.mark.parametrize("op, args, batch", [
    (aten.mm.default, (t(3, 4), t(4, 5)), 1),
    (aten.addmm.default, (t(5), t(3, 4), t(4, 5)), 1),
    (aten.bmm.default, (t(1, 3, 4), t(1, 4, 5)), 1),
    (aten.bmm.default, (t(6, 3, 4), t(6, 4, 5)), 6),
    (aten.baddbmm.default, (t(6, 3, 5), t(6, 3, 4), t(6, 4, 5)), 6),
    (aten.einsum.default, ("ij,jk->ik", [t(3, 4), t(4, 5)]), 1),
])
def test_dot_batch(op, args, batch):
    assert dot_batch(op, args) == batch


def test_policies_read_the_batch():
    bmm1 = OpCall(aten.bmm.default, (t(1, 3, 4), t(1, 4, 5)), {}, t(1, 3, 5))
    bmm6 = OpCall(aten.bmm.default, (t(6, 3, 4), t(6, 4, 5)), {}, t(6, 3, 5))
    gelu = OpCall(aten.gelu.default, (t(3),), {}, t(3))
    no_batch, dots = policies.dots_with_no_batch_dims_saveable, policies.dots_saveable
    assert [no_batch(c) for c in (bmm1, bmm6, gelu)] == [Decision.SAVE, Decision.RECOMPUTE, Decision.RECOMPUTE]
    assert [dots(c) for c in (bmm1, bmm6, gelu)] == [Decision.SAVE, Decision.SAVE, Decision.RECOMPUTE]
    assert aten.einsum in policies.DOT_OPS
