"""``saved_activations()``: what autograd keeps for backward, in bytes, by module and by op."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Hashable, Iterator, Literal, Optional

import torch

from xla_ckpt._base import modules as _modules
from xla_ckpt._base import xla as _xla
from xla_ckpt._hooks.params import ParamSource
from xla_ckpt._hooks.saved import ledger
from xla_ckpt._hooks.tags import tag_of

__all__ = ["SavedEntry", "SavedReport", "recording", "saved_activations"]

# The ``grad_fn`` of a tensor a torch.compile-d module's graph saved (one autograd node for the whole
# graph: which op inside produced it is not visible to saved-tensor hooks).
COMPILED = "<compiled graph>"

Kind = Literal["activation", "parameter", "parameter copy", "offloaded"]


@dataclass(frozen=True)
class SavedEntry:
    """One tensor kept for backward (metadata only: the report holds no tensor)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    nbytes: int
    kind: Kind
    grad_fn: str
    module: str
    tag: Optional[str]
    key: Hashable = field(repr=False, compare=False)
    param_key: Optional[Hashable] = field(default=None, repr=False, compare=False)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


class SavedReport:
    """Everything autograd saved while :func:`saved_activations` was active.

    ``nbytes`` counts each buffer kept on the device once and leaves parameters out (they live
    anyway); a copy derived from a parameter counts unless it *is* the parameter's memory (an eager
    view). Values a policy offloaded (``Decision.OFFLOAD``) are entries of kind ``"offloaded"``
    (their host copies), counted in ``host_nbytes`` and not in ``nbytes``.

    ``per_tensor`` (``xla_ckpt.estimate(device="xla")``) counts meta tensors as XLA does: every tensor
    its own buffer of its shape's bytes (a view, a parameter's transpose included), not its storage.
    """

    def __init__(self, *, per_tensor: bool = False) -> None:
        self.entries: list[SavedEntry] = []
        self.per_tensor = per_tensor
        self._alive: list[torch.Tensor] = []  # per_tensor keys are TensorImpl addresses: never reused while held

    def _key(self, t: torch.Tensor) -> Hashable:
        if self.per_tensor and t.is_meta:
            self._alive.append(t)
            return ("tensor", t._cdata)
        return _xla.buffer_key(t)

    # -- recording (called by the hooks and by checkpoint regions) --------------------------------
    def record(
        self,
        t: torch.Tensor,
        source: Optional[ParamSource],
        *,
        by_reference: bool = False,
        grad_fn: Optional[str] = None,
        module: Optional[str] = None,
        tag: Optional[str] = None,
        offloaded: bool = False,
    ) -> None:
        """Add ``t``; ``by_reference`` means only the parameter it derives from is kept.

        Checkpoint regions pass ``grad_fn`` (the op), ``module`` and ``tag`` of what they kept, and
        ``offloaded`` for the host copy of a value moved off the device.
        """
        kind: Kind = "offloaded" if offloaded else "activation"
        param_key = None
        if source is not None:
            kind = "parameter" if (by_reference or not source.steps) else "parameter copy"
            param_key = self._key(source.param)
        if grad_fn is None:
            grad_fn = type(t.grad_fn).__name__ if t.grad_fn is not None else ""
            if not grad_fn and source is None and _modules.in_compiled():
                grad_fn = COMPILED  # saved by a compiled graph's forward: no op or inner module to name
        self.entries.append(
            SavedEntry(
                shape=tuple(t.shape),
                dtype=t.dtype,
                device=t.device,
                nbytes=_xla.shape_nbytes(t) if self.per_tensor and t.is_meta else _xla.buffer_nbytes(t),
                kind=kind,
                grad_fn=grad_fn,
                module=_modules.current_name() if module is None else module,
                tag=tag_of(t) if tag is None else tag,
                key=self._key(t),
                param_key=param_key,
            )
        )

    # -- summaries ------------------------------------------------------------------------------
    def _counted(self, host: bool = False) -> list[SavedEntry]:
        """First entry of each buffer that costs memory beyond the parameters (on the device, or ``host``)."""
        param_keys = {e.param_key for e in self.entries if e.param_key is not None}
        seen: set[Hashable] = set()
        out = []
        for e in self.entries:
            # A parameter kept by reference costs nothing: its own entry is the parameter's buffer.
            if e.kind == "parameter" or e.key in param_keys or e.key in seen or (e.kind == "offloaded") != host:
                continue
            seen.add(e.key)
            out.append(e)
        return out

    @property
    def nbytes(self) -> int:
        """Unique bytes held on the device for backward, parameters excluded."""
        return sum(e.nbytes for e in self._counted())

    @property
    def host_nbytes(self) -> int:
        """Unique bytes moved to host memory for backward (``Decision.OFFLOAD``)."""
        return sum(e.nbytes for e in self._counted(host=True))

    def _group(self, attr: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self._counted():
            k = getattr(e, attr)
            out[k] = out.get(k, 0) + e.nbytes
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def by_module(self) -> dict[str, int]:
        """Counted bytes per module (fully qualified name), largest first."""
        return self._group("module")

    def by_op(self) -> dict[str, int]:
        """Counted bytes per producing op (the saved tensor's ``grad_fn``), largest first."""
        return self._group("grad_fn")

    def by_tag(self) -> dict[str, int]:
        """Counted bytes per tag (``xla_ckpt.tag``'s name, or the role ``apply`` tags an HF projection with),
        largest first; untagged values are left out (an empty dict: nothing kept is tagged).

        Example:
            >>> report.by_tag()
            {'mlp_up': 16384, 'qkv': 12288}
        """
        return {k: n for k, n in self._group("tag").items() if k is not None}

    def by_kind(self) -> dict[str, int]:
        """Counted bytes per kind, ``"offloaded"`` (host bytes) included."""
        out = self._group("kind")
        if self.host_nbytes:
            out["offloaded"] = self.host_nbytes
        return out

    def __str__(self) -> str:
        counted = {id(e) for e in self._counted() + self._counted(host=True)}
        rows = sorted(self.entries, key=lambda e: -e.nbytes)
        lines = [f"{'bytes':>10}  {'kind':14} {'shape':18} {'dtype':9} {'grad_fn':24} {'tag':10} module"]
        for e in rows:
            mark = "" if id(e) in counted else " (not counted)"
            dtype = str(e.dtype).replace("torch.", "")
            lines.append(
                f"{_human(e.nbytes):>10}  {e.kind:14} {str(list(e.shape)):18} {dtype:9} {e.grad_fn or '-':24} "
                f"{e.tag or '-':10} {e.module or '<top>'}{mark}"
            )
        lines.append(f"total kept for backward: {_human(self.nbytes)} in {len(self._counted())} buffers "
                     f"({len(self.entries)} saved tensors, parameters excluded)")
        if self.host_nbytes:
            n = len(self._counted(host=True))
            lines.append(f"offloaded to host memory: {_human(self.host_nbytes)} in {n} buffers")
        lines.append("by module: " + ", ".join(f"{m or '<top>'} {_human(b)}" for m, b in self.by_module().items()))
        lines.append("by op:     " + ", ".join(f"{o or '-'} {_human(b)}" for o, b in self.by_op().items()))
        if any(e.grad_fn == COMPILED for e in self.entries):
            lines.append(f"{COMPILED}: kept by a torch.compile-d module's graph, which autograd sees as one node: "
                         "its bytes are exact, the op and submodule that produced each tensor are not visible")
        return "\n".join(lines)

    def __repr__(self) -> str:
        host = f", host_nbytes={self.host_nbytes}" if self.host_nbytes else ""
        return f"SavedReport(nbytes={self.nbytes}{host}, entries={len(self.entries)})"


@contextlib.contextmanager
def saved_activations() -> Iterator[SavedReport]:
    """Record everything autograd saves for backward while the block runs.

    Works on CPU, CUDA and XLA without forcing a graph execution (sizes come from shapes, buffer
    identity from storages or XLA tensor ids). Checkpoint regions report what they keep (their
    inputs and the outputs their policy saved) instead of the tensors they will recompute.

    Around a ``torch.compile``-d model it reports what the compiled graph keeps for backward (the
    tensors its one autograd node saves, after the partitioner and the policy's marks): exact bytes,
    with ``grad_fn`` ``"<compiled graph>"`` and the compiled module's name, since the op and submodule
    inside the graph that produced each tensor are not visible from outside it.

    Example:
        >>> with xla_ckpt.saved_activations() as report:
        ...     loss = model(x).sum()
        >>> print(report)            # table, largest first
        >>> report.nbytes, report.by_module()
    """
    with recording(SavedReport()) as report:
        yield report


@contextlib.contextmanager
def recording(report: SavedReport) -> Iterator[SavedReport]:
    """:func:`saved_activations` into a given report (``estimate`` passes a ``per_tensor`` one)."""
    with ledger(report), _modules.tracking():
        yield report
