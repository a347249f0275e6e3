"""Accelerator memory per chip, as the vendors publish it (data only; ``fit`` reads it).

Figures: Google Cloud TPU system-architecture pages (v4: 32 GiB HBM2; v5e: 16 GB HBM2; v5p: 95 GB
HBM2e; v6e: 32 GB HBM), NVIDIA data sheets (H100 SXM: 80 GB HBM3; H200: 141 GB HBM3e). Google's
"GB" for TPU HBM are GiB in practice (16 GiB per v5e chip), and NVIDIA's are the stacks' GiB; the
usable memory is a little less (an H200 reports about 140 GiB), which ``fit``'s reserve covers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Chip", "CHIPS", "GIB"]

GIB = 1 << 30


@dataclass(frozen=True)
class Chip:
    """One accelerator: its name, HBM bytes per chip, and whether it runs XLA (the band applies)."""

    name: str
    hbm_bytes: int
    xla: bool
    source: str


CHIPS: dict[str, Chip] = {c.name: c for c in (
    Chip("v4", 32 * GIB, True, "cloud.google.com/tpu/docs/v4: 32 GiB HBM2 per chip"),
    Chip("v5e", 16 * GIB, True, "cloud.google.com/tpu/docs/v5e: 16 GB HBM2 per chip"),
    Chip("v5p", 95 * GIB, True, "cloud.google.com/tpu/docs/v5p: 95 GB HBM2e per chip"),
    Chip("v6e", 32 * GIB, True, "cloud.google.com/tpu/docs/v6e: 32 GB HBM per chip"),
    Chip("h100", 80 * GIB, False, "nvidia.com H100 SXM data sheet: 80 GB HBM3"),
    Chip("h200", 141 * GIB, False, "nvidia.com H200 data sheet: 141 GB HBM3e"),
)}
