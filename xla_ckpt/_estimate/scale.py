"""``estimate_layers``: the estimate of an N-layer model from three shallow ones, checked for exactness.

A stack of identical blocks (or a pattern repeating every ``period`` blocks) adds the same bytes and
FLOPs per period: the engine decides per region, and each block is a region with the same shapes. So
``E(N) = E(b) + k * (E(b + p) - E(b))`` with ``N = b + k p``. That this holds is *checked*, not assumed:
a third sample ``E(b + 2p)`` must add exactly the same again, field by field and module by module;
otherwise the whole model is estimated. The time then grows with the period, not with N.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from torch import nn

from xla_ckpt._api.blocks import find_blocks
from xla_ckpt._estimate.estimate import Estimate, estimate

__all__ = ["estimate_layers", "block_bytes", "recompute_working_bytes"]

Build = Callable[[int], tuple[nn.Module, tuple, dict]]
_FIELDS = ("activation_bytes", "host_bytes", "forward_flops", "backward_flops", "recompute_flops")


def _run(build: Build, n: int, how: dict[str, Any]) -> tuple[Estimate, Optional[str]]:
    model, args, kwargs = build(n)
    blocks = find_blocks(model)
    prefix = blocks[0].rsplit(".", 1)[0] if blocks and "." in blocks[0] else None
    return estimate(model, *args, **how, **kwargs), prefix


def _layer_of(name: str, prefix: Optional[str]) -> Optional[int]:
    if prefix is None or not name.startswith(prefix + "."):
        return None
    m = re.match(r"(\d+)(\.|$)", name[len(prefix) + 1:])
    return int(m.group(1)) if m else None


def _split(by_module: Any, prefix: Optional[str]) -> tuple[dict[str, int], dict[tuple[int, str], int]]:
    """Entries outside the blocks, and block entries keyed by (layer, name below the layer)."""
    outside, layers = {}, {}
    for name, n in by_module.items():
        i = _layer_of(name, prefix)
        if i is None:
            outside[name] = n
        else:
            layers[(i, name[len(prefix) + 1 + len(str(i)):])] = n  # type: ignore[arg-type]
    return outside, layers


def estimate_layers(build: Build, n_layers: int, period: int = 1, **how: Any) -> tuple[Estimate, bool]:
    """Estimate of ``build(n_layers)`` from ``build(b)``, ``build(b+p)``, ``build(b+2p)``; or of the model itself.

    Args:
        build: ``n -> (model, args, kwargs)``, the same model with ``n`` blocks (on meta, ideally).
        n_layers: blocks of the model wanted; ``period``: blocks after which the pattern repeats.
        **how: ``config=`` or ``policy=``, as :func:`xla_ckpt.estimate` takes them.

    Returns the estimate and whether it was extrapolated (False: the increments were not exactly
    equal, or the model is shallow, and the full model was estimated).

    Example:
        >>> est, scaled = estimate_layers(lambda n: (llama(n), (), batch), 80, config="full")
    """
    if n_layers < 1 or period < 1:
        raise ValueError(f"estimate_layers: n_layers and period must be >= 1, got {n_layers}, {period}")
    b = period + n_layers % period
    if n_layers <= b + 3 * period:
        return _run(build, n_layers, how)[0], False
    (e0, prefix), (e1, _), (e2, _) = (_run(build, n, how) for n in (b, b + period, b + 2 * period))
    d1 = [getattr(e1, f) - getattr(e0, f) for f in _FIELDS]
    d2 = [getattr(e2, f) - getattr(e1, f) for f in _FIELDS]
    out0, lay0 = _split(e0.by_module, prefix)
    out1, lay1 = _split(e1.by_module, prefix)
    out2, lay2 = _split(e2.by_module, prefix)
    ops_d1 = {k: e1.by_op.get(k, 0) - e0.by_op.get(k, 0) for k in set(e0.by_op) | set(e1.by_op)}
    ops_d2 = {k: e2.by_op.get(k, 0) - e1.by_op.get(k, 0) for k in set(e1.by_op) | set(e2.by_op)}
    tags_d1 = {k: e1.by_tag.get(k, 0) - e0.by_tag.get(k, 0) for k in set(e0.by_tag) | set(e1.by_tag)}
    tags_d2 = {k: e2.by_tag.get(k, 0) - e1.by_tag.get(k, 0) for k in set(e1.by_tag) | set(e2.by_tag)}
    # Layers in one period of the deepest sample must repeat the same layers of the middle one.
    shifted = {(i + period, s): n for (i, s), n in lay1.items() if i >= b}
    ok = (d1 == d2 and out0 == out1 == out2 and ops_d1 == ops_d2 and tags_d1 == tags_d2 and prefix is not None
          and all(lay2.get(k) == n for k, n in shifted.items()) and len(lay2) == len(lay1) + len(shifted))
    if not ok:
        return _run(build, n_layers, how)[0], False
    k = (n_layers - b) // period
    by_module = dict(out2)
    last = n_layers - period  # the last period of the model maps to the last period of the deepest sample
    for i in range(n_layers):
        if i < b + period:
            src = i
        elif i >= last:
            src = i - (n_layers - (b + 2 * period))
        else:
            src = b + (i - b) % period  # an interior layer, as the deepest sample's first repeated period
        for (j, s), n in lay2.items():
            if j == src:
                by_module[f"{prefix}.{i}{s}"] = n
    by_op = {key: e0.by_op.get(key, 0) + k * ops_d1[key] for key in ops_d1}
    by_tag = {key: e0.by_tag.get(key, 0) + k * tags_d1[key] for key in tags_d1}
    fields = {f: getattr(e0, f) + k * d for f, d in zip(_FIELDS, d1, strict=True)}
    est = Estimate(by_module=dict(sorted(by_module.items(), key=lambda kv: -kv[1])),
                   by_op=dict(sorted(((o, n) for o, n in by_op.items() if n), key=lambda kv: -kv[1])),
                   by_tag=dict(sorted(((t, n) for t, n in by_tag.items() if n), key=lambda kv: -kv[1])), **fields)
    assert sum(est.by_module.values()) == est.activation_bytes, "internal: by_module does not add up"
    return est, True


def block_bytes(est: Estimate, blocks: list[str]) -> list[int]:
    """``est.activation_bytes`` kept inside each block (``by_module`` entries at or below its name)."""
    out = []
    for b in blocks:
        out.append(sum(n for name, n in est.by_module.items() if name == b or name.startswith(b + ".")))
    return out


def recompute_working_bytes(est: Estimate, unchecked: Estimate, blocks: list[str]) -> int:
    """Bytes a block's recompute brings back while its backward runs: the most any block keeps without
    checkpointing beyond what it keeps under the policy (backward recomputes one block at a time)."""
    kept, full = block_bytes(est, blocks), block_bytes(unchecked, blocks)
    return max((max(f - k, 0) for f, k in zip(full, kept, strict=True)), default=0)
