"""Host offload (``Decision.OFFLOAD``): a kept output waits in host memory between forward and backward.

At the end of a region's forward (after liveness: only what backward reads moves), each OFFLOAD
output goes to the host tier of its device; the replay gets it back at the position that reads it.

- CUDA: pinned host memory. The device->host copy runs on a side stream after the forward
  (``record_stream``: the caching allocator does not reuse the device block before the copy ran).
  When a region's replay starts, the host->device copies of that region *and of the region that ran
  before it in forward* (the next one in backward order) are issued on the side stream; the
  position that reads a value waits on its event, so copies overlap the recompute.
- CPU: host memory is the device's, so a separate copy stands in for it: the forward's buffer is
  released, the copy is held, and a new buffer comes back for backward. It saves nothing on a CPU;
  it runs the same bookkeeping as CUDA (minus streams) so the mechanism is tested without a GPU.
- XLA: torch_xla's placement annotations (``place_to_host`` after forward, ``place_to_device`` where
  the replay reads the value); XLA's host offloader and scheduler move and prefetch on TPU/GPU.
  XLA:CPU has one memory space and cannot compile the annotation: there the value stays SAVE.
- Other devices: SAVE. Either fallback is warned once.

A region output the caller holds stays on the device (SAVE): moving it would free nothing. The
ledger (``saved_activations()``) reports what moved as kind ``"offloaded"`` (``host_nbytes``).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator, Optional, Protocol

import torch
from torch.utils._pytree import tree_leaves, tree_map

from xla_ckpt._base import xla as _xla
from xla_ckpt._base.warn import warn_once
from xla_ckpt._record.opcall import Decision
from xla_ckpt._engine.entries import Away
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.record import tensors

__all__ = ["Offloaded", "Link", "move_out", "prefetch", "annotate_on_xla_cpu"]

SAVE, OFFLOAD = Decision.SAVE, Decision.OFFLOAD


class _Tier(Protocol):
    prefetches: bool  # back() may run ahead of the position that reads the value

    def out(self, t: torch.Tensor) -> torch.Tensor: ...

    def back(self, host: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, Any]: ...

    def ready(self, dev: torch.Tensor, event: Any) -> torch.Tensor: ...


class _StandIn:
    """CPU: a separate buffer stands in for host memory (the CUDA bookkeeping without streams)."""

    prefetches = True

    def out(self, t: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(t).copy_(t)

    def back(self, host: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, Any]:
        return torch.empty_like(host).copy_(host), None

    def ready(self, dev: torch.Tensor, event: Any) -> torch.Tensor:
        return dev


_STREAMS: dict[int, Any] = {}
_STREAMS_LOCK = threading.Lock()


def _side_stream(device: torch.device) -> Any:
    """One copy stream per CUDA device, shared by every region (streams are process-wide resources)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _STREAMS_LOCK:
        stream = _STREAMS.get(index)
        if stream is None:
            stream = _STREAMS[index] = torch.cuda.Stream(device=index)
        return stream


class _Cuda:
    """Pinned host memory, copies on a side stream (the approach of torch's and torchtune's offloading)."""

    prefetches = True

    def out(self, t: torch.Tensor) -> torch.Tensor:
        stream = _side_stream(t.device)
        stream.wait_stream(torch.cuda.current_stream(t.device))  # t is written on the current stream
        with torch.cuda.stream(stream):
            host = torch.empty_like(t, device="cpu", pin_memory=True)
            host.copy_(t, non_blocking=True)
        # The region drops t now; its block must not be reused before the side stream has read it.
        t.record_stream(stream)
        return host

    def back(self, host: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, Any]:
        stream = _side_stream(device)
        with torch.cuda.stream(stream):  # after this tensor's device->host copy: same stream, in order
            dev = torch.empty_like(host, device=device)
            dev.copy_(host, non_blocking=True)
            event = torch.cuda.Event()
            event.record(stream)
        return dev, event

    def ready(self, dev: torch.Tensor, event: Any) -> torch.Tensor:
        current = torch.cuda.current_stream(dev.device)
        current.wait_event(event)
        dev.record_stream(current)  # allocated on the side stream, read and freed on this one
        return dev


class _Xla:
    """torch_xla's placement annotations; XLA schedules the transfers (no prefetch of ours)."""

    prefetches = False

    def out(self, t: torch.Tensor) -> torch.Tensor:
        return _xla.place_to_host(t)

    def back(self, host: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, Any]:
        return _xla.place_to_device(host), None

    def ready(self, dev: torch.Tensor, event: Any) -> torch.Tensor:
        return dev


_STAND_IN, _CUDA, _XLA = _StandIn(), _Cuda(), _Xla()


class _Local(threading.local):
    def __init__(self) -> None:
        self.annotate_xla_cpu = 0
        self.last: Optional[weakref.ref[Link]] = None  # the latest region of this thread's forward that offloaded


_local = _Local()


@contextlib.contextmanager
def annotate_on_xla_cpu() -> Iterator[None]:
    """Regions whose forward runs inside annotate on XLA:CPU too. For tests that lower and never run:
    XLA:CPU cannot compile the annotation, so a graph built this way must be dropped unexecuted."""
    _local.annotate_xla_cpu += 1
    try:
        yield
    finally:
        _local.annotate_xla_cpu -= 1


def _tier(device: torch.device) -> Optional[_Tier]:
    if device.type == "cuda":
        return _CUDA
    if device.type == "cpu":
        return _STAND_IN
    if device.type == "xla":
        hardware = _xla.hardware_type(device)
        if hardware != "CPU" or _local.annotate_xla_cpu:
            return _XLA
        warn_once(("offload", "xla-cpu"), "xla_ckpt: Decision.OFFLOAD on XLA:CPU: one memory space, and XLA:CPU cannot "
                  "compile torch_xla's placement annotation; offloaded values are kept on the device (as SAVE) there. "
                  "On a TPU or GPU they go to host memory; on XLA:CPU a policy that saves instead of offloading "
                  "keeps the same bytes without this notice.")
        return None
    warn_once(("offload", device.type), f"xla_ckpt: Decision.OFFLOAD: no host tier for {device.type} tensors; they are "
              "kept on the device (as SAVE). Offload needs a CUDA or XLA (TPU) device; elsewhere use a policy that "
              "saves instead (the same bytes, without this notice).")
    return None


class _Moved:
    """One tensor in the host tier; ``dev`` holds its device copy between prefetch and hand-out."""

    __slots__ = ("host", "device", "tier", "dev", "event")

    def __init__(self, t: torch.Tensor, tier: _Tier) -> None:
        self.host, self.device, self.tier = tier.out(t), t.device, tier
        self.dev: Optional[torch.Tensor] = None
        self.event: Any = None

    def prefetch(self) -> None:
        if self.dev is None:
            self.dev, self.event = self.tier.back(self.host, self.device)

    def take(self) -> torch.Tensor:
        self.prefetch()
        assert self.dev is not None
        dev, event = self.dev, self.event
        # The replay owns the device copy now (freed with the recompute graph); the host copy stays
        # for a second backward (retain_graph), which fetches again.
        self.dev = self.event = None
        return self.tier.ready(dev, event)


class Offloaded(Away):
    """A cache entry in the host tier: the cached structure with each tensor replaced by its host copy."""

    __slots__ = ("tree",)

    def __init__(self, tree: Any) -> None:
        self.tree = tree

    def _moved(self) -> list[_Moved]:
        return [m for m in tree_leaves(self.tree) if isinstance(m, _Moved)]

    def host_tensors(self) -> list[torch.Tensor]:
        """The host copies (what the ledger reports as offloaded)."""
        return [m.host for m in self._moved()]

    def prefetch(self) -> None:
        for m in self._moved():
            if m.tier.prefetches:
                m.prefetch()

    def fetch(self) -> Any:
        """The cached structure back on its device, ready to be read on the current stream."""
        return tree_map(lambda m: m.take() if isinstance(m, _Moved) else m, self.tree)


class Link:
    """A region's offloaded entries, linked weakly to the region that offloaded before it in forward."""

    __slots__ = ("entries", "prev", "__weakref__")

    def __init__(self, entries: list[Offloaded], prev: Optional[weakref.ref["Link"]]) -> None:
        self.entries, self.prev = entries, prev


def move_out(region: RegionState, outputs: list[torch.Tensor]) -> Optional[Link]:
    """End of forward: move each OFFLOAD cache entry to its host tier; where none applies it becomes SAVE.

    Args:
        region: the region, after liveness (its cache holds only what backward reads).
        outputs: the region's outputs: the caller holds them, so values they alias stay on the device.
    """
    held = set()
    for t in outputs:
        held.add(_xla.buffer_key(t))
        if t._base is not None:
            held.add(_xla.buffer_key(t._base))
    entries = []
    for pos, (cached, _versions) in list(region.cache.items()):
        rec = region.records[pos]
        if rec.decision is not OFFLOAD:
            continue
        ts = tensors(cached)
        tiers = [_tier(t.device) for t in ts]
        if not ts or any(tier is None for tier in tiers) or any(_xla.buffer_key(t) in held for t in ts):
            region.on_device(pos)
            continue
        by_id = {id(t): tier for t, tier in zip(ts, tiers, strict=True)}
        moved = Offloaded(tree_map(
            lambda t, by_id=by_id: _Moved(t, by_id[id(t)]) if isinstance(t, torch.Tensor) else t, cached))
        region.moved(pos, moved)
        entries.append(moved)
    if not entries:
        return None
    link = Link(entries, _local.last)
    _local.last = weakref.ref(link)
    return link


def prefetch(link: Optional[Link]) -> None:
    """A region's replay starts: bring back its offloaded values and the next region's in backward order."""
    if link is None:
        return
    for entry in link.entries:
        entry.prefetch()
    before = link.prev() if link.prev is not None else None
    if before is not None:
        for entry in before.entries:
            entry.prefetch()
