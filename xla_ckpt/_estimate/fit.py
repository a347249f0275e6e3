"""``fit``: which checkpoint policy lets a model train on given chips, before renting them.

Per chip: parameters, gradients and optimizer state (sharded by FSDP), the gathered weights FSDP
holds while a block runs, and the activations each policy keeps (``estimate_layers`` on the meta
device). On XLA chips the activations are scaled by the measured band between XLA's compiled peak
and the estimate (docs/estimate.md). The recommendation is the policy that recomputes least among
those that fit, with the headroom it leaves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Optional, Sequence

import torch

from xla_ckpt._estimate.attention import ATTENTION, check_attention, default_attention
from xla_ckpt._api.device_forms import DEVICES, check_device
from xla_ckpt._estimate.chips import CHIPS, GIB
from xla_ckpt._api.config import Config
from xla_ckpt._api.config_dump import config_data
from xla_ckpt._api.config_load import load_config
from xla_ckpt._base.presets import preset_names
from xla_ckpt._api.blocks import find_blocks
from xla_ckpt._estimate.hf_config import hf_builder
from xla_ckpt._estimate.scale import estimate_layers, recompute_working_bytes
from xla_ckpt._base.warn import forgetting
from xla_ckpt._record.opcall import selects_by_tag

__all__ = ["FitRow", "FitReport", "fit", "hf_builder", "DTYPES", "XLA_BAND", "DEFAULT_BUDGETS"]

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Compiled peak on XLA:CPU minus parameters and gradients, over the estimate's activation bytes plus
# one block's recompute working set, for the demo GPT and three HF architectures at two sizes and
# five policies each (bench/xla_band.py, bench/results/xla_band.json; docs/estimate.md).
XLA_BAND = (0.7397, 1.5256)
DEFAULT_BUDGETS = (0.05, 0.1, 0.25, 0.5)
DECODERS = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3")


@dataclass(frozen=True)
class FitRow:
    """One policy's line: what it keeps per chip, what the chip then holds, what it recomputes."""

    policy: str
    activation_bytes: int  # what autograd keeps for backward (xla_ckpt.estimate)
    working_bytes: int  # what a block's recompute brings back while its backward runs (one at a time)
    charged_bytes: int  # activation_bytes + working_bytes, times the XLA band's upper end on XLA chips
    total_bytes: int
    headroom_bytes: int
    fits: bool
    recompute_flops: int
    recompute_share: float
    extrapolated: bool
    config: Config = field(default_factory=Config, repr=False)  # what ``apply`` takes for this row
    # Why the row is not a candidate although it may fit (a name policy on a model that tags nothing).
    note: str = ""


@dataclass(frozen=True)
class FitReport:
    """Everything ``fit`` found; ``str()`` is the table the CLI prints, ``to_json()`` the same as JSON."""

    model: str
    chip: str
    hbm_bytes: int
    chips: int
    fsdp: int
    batch: int
    seq: int
    n_params: int
    param_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    gather_bytes: int
    band: Optional[tuple[float, float]]
    reserve: float
    attention: str = "math"  # the attention kernel the activations are estimated with (estimate's attention=)
    attention_note: str = ""  # why this kernel: the chip's default, an assumption, or as given
    device: str = "cpu"  # whose dropout / LayerNorm forms the activations are estimated with (estimate's device=)
    rows: list[FitRow] = field(default_factory=list)
    # The config of the least-recompute row that fits (``apply(model, report.recommended)``), and its label.
    recommended: Optional[Config] = None
    recommended_policy: Optional[str] = None

    @property
    def static_bytes(self) -> int:
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes + self.gather_bytes

    def to_json(self) -> str:
        """The report as JSON; configs (each row's, ``recommended``) as the data a config file holds."""
        data = asdict(self)
        for row, obj in zip(data["rows"], self.rows, strict=True):
            row["config"] = config_data(obj.config)
        data["recommended"] = config_data(self.recommended) if self.recommended is not None else None
        return json.dumps(data, indent=2)

    def __str__(self) -> str:
        g = lambda n: f"{n / GIB:8.2f} GiB"  # noqa: E731
        usable = int(self.hbm_bytes * (1 - self.reserve))
        lines = [
            f"{self.model}: {self.n_params / 1e9:.2f}B parameters, seq {self.seq}, batch {self.batch} per chip, "
            f"{self.chips} x {self.chip} ({self.hbm_bytes / GIB:.0f} GiB each), FSDP over {self.fsdp}",
            f"per chip:  parameters {g(self.param_bytes)}   gradients {g(self.grad_bytes)}   "
            f"optimizer {g(self.optimizer_bytes)}   FSDP gathered block x2 {g(self.gather_bytes)}   "
            f"= {g(self.static_bytes)}",
        ]
        if self.band is not None:
            lines.append(f"XLA chip: activations charged x{self.band[1]:.2f} (the upper end of the measured "
                         f"XLA:CPU band {self.band[0]:.2f}-{self.band[1]:.2f}, docs/estimate.md)")
        lines.append(f"attention: {self.attention}, {ATTENTION[self.attention]}"
                     + (f" ({self.attention_note})" if self.attention_note else ""))
        lines.append(f"device forms: {self.device}, {DEVICES[self.device]}" + (
            " (the default for this chip: cuda on a GPU chip; cpu, the forms the XLA band was measured against, "
            "otherwise; --device / device= to change)" if self.device == _default_device(self.chip) else ""))
        lines.append(f"usable HBM {g(usable)} ({self.reserve:.0%} reserved for the runtime and fragmentation)")
        lines.append("activations: kept for backward; working: one block's recompute in its backward; charged: "
                     "their sum" + (" x the XLA band" if self.band else ""))
        lines.append(f"{'policy':20s} {'activations':>12s} {'working':>12s} {'charged':>12s} {'total':>12s} "
                     f"{'headroom':>12s}  {'recompute':>9s}  fits")
        for r in self.rows:
            lines.append(f"{r.policy:20s} {g(r.activation_bytes):>12s} {g(r.working_bytes):>12s} "
                         f"{g(r.charged_bytes):>12s} {g(r.total_bytes):>12s} {g(r.headroom_bytes):>12s}  "
                         f"{r.recompute_share:8.1%}   "
                         f"{'yes' if r.fits else 'NO'}" + (f"   ({r.note})" if r.note else ""))
        if self.recommended is None:
            lines.append("no policy fits: add chips (FSDP shards the static part), lower the per-chip batch or "
                         "the sequence length, or offload activations to the host")
        else:
            best = next(r for r in self.rows if r.policy == self.recommended_policy)
            lines.append(f"recommended: {best.policy} (least recompute that fits: {best.recompute_share:.1%} of the "
                         f"step's FLOPs), headroom {best.headroom_bytes / GIB:.2f} GiB per chip")
        return "\n".join(lines)


def arch_config(arch: str, hidden: int, layers: int, heads: int, kv_heads: Optional[int], mlp: Optional[int],
                vocab: int, seq: int, head_dim: Optional[int] = None) -> dict[str, Any]:
    """A Hugging Face config dict for a built-in decoder architecture with these sizes."""
    if arch not in DECODERS:
        raise ValueError(f"fit: unknown architecture {arch!r}; built in: {', '.join(DECODERS)} "
                         "(any other: --hf-config config.json)")
    out = dict(model_type=arch, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv_heads or heads, intermediate_size=mlp or 4 * hidden, vocab_size=vocab,
               max_position_embeddings=seq)
    if head_dim or arch in ("gemma", "gemma2", "gemma3", "qwen3"):
        out["head_dim"] = head_dim or hidden // heads  # these default to a fixed head_dim otherwise
    return out


def _policies(budgets: Sequence[float]) -> list[tuple[str, Config]]:
    out = [(p, load_config(p)) for p in preset_names()]
    for f in budgets:
        label = f"memory_budget({f:g})"
        out.append((label, load_config({"checkpoint": [{"blocks": True, "budget": f}],
                                        "description": f"Keep at most {f:g} of each transformer block's bytes"})))
    return out


def _recommendation(report: FitReport, row: FitRow) -> Config:
    """The row's config, described as the recommendation it is (so that a written file says why)."""
    why = (f"xla_ckpt fit: {row.policy} for {report.model}, seq {report.seq}, batch {report.batch} per chip, "
           f"{report.chips} x {report.chip}: the least recompute that fits ({row.recompute_share:.1%} of the step's "
           f"FLOPs, headroom {row.headroom_bytes / GIB:.2f} GiB per chip).")
    desc = f"{why} {row.config.description}".strip()
    return dataclasses.replace(row.config, description=desc, source=f"fit ({row.policy})")


def _default_device(chip: Optional[str]) -> str:
    """``cuda`` on a GPU chip; ``cpu`` otherwise (XLA chips: the forms ``XLA_BAND`` was measured against)."""
    return "cuda" if chip in CHIPS and not CHIPS[chip].xla else "cpu"


def fit(config: Any, *, seq: int, batch: int = 1, chips: int = 1,
        chip: Optional[str] = None, hbm_gib: Optional[float] = None, param_dtype: str = "bf16",
        optim_dtype: str = "fp32", fsdp: Optional[int] = None, budgets: Sequence[float] = DEFAULT_BUDGETS,
        reserve: float = 0.05, xla: Optional[bool] = None, attention: Optional[str] = None,
        device: Optional[str] = None) -> FitReport:
    """Per-chip memory of training ``config`` under every preset and budget; the least-recompute fit.

    Args:
        config: a Hugging Face config: a transformers config object (``LlamaConfig(...)``), a
            ``config.json`` path or its folder, a Hub id, or the dict a ``config.json`` holds
            (``arch_config`` makes one from sizes).
        seq, batch: sequence length and per-chip batch. chips: how many; fsdp: the FSDP sharding
            degree (default: all chips; 1 = replicated).
        chip: a name in ``xla_ckpt._estimate.chips.CHIPS`` (v4, v5e, v5p, v6e, h100, h200), or hbm_gib.
        param_dtype: parameters, gradients and activations; optim_dtype: Adam's two moments, plus a
            master copy of the weights when wider than param_dtype.
        reserve: fraction of HBM kept free for the runtime. xla: apply the XLA band (default: the chip's kind).
        attention: ``"math"`` (SDPA as XLA lowers it, the probabilities kept) or ``"flash"`` (a fused kernel:
            Q, K, V, output and log-sum-exp kept); see ``xla_ckpt.estimate``. Default: what the chip runs
            (``default_attention``: flash on a GPU, math on a TPU), stated on the report's ``attention:`` line.
        device: the dropout / LayerNorm forms estimated (``xla_ckpt.estimate``'s ``device=``); default
            ``"cuda"`` on a GPU chip, else ``"cpu"`` (on XLA chips the band was measured against those forms).

    Example:
        >>> report = fit("llama3_70b.json", seq=8192, batch=1, chips=64, chip="v5p")
        >>> print(report)
        >>> xla_ckpt.apply(model, report.recommended)   # a Config (None when nothing fits)
    """
    if (chip is None) == (hbm_gib is None):
        raise ValueError(f"fit: give chip= (one of {', '.join(CHIPS)}) or hbm_gib=, exactly one")
    if chip is not None and chip not in CHIPS:
        raise ValueError(f"fit: unknown chip {chip!r}; known: {', '.join(CHIPS)} (or give hbm_gib=)")
    for name, d in (("param_dtype", param_dtype), ("optim_dtype", optim_dtype)):
        if d not in DTYPES:
            raise ValueError(f"fit: {name}={d!r}; allowed: {', '.join(DTYPES)}")
    if attention is None:
        attention, attention_note = default_attention(chip, on_xla=bool(xla))
    else:
        attention_note = "as given"
    check_attention(attention, "fit")
    device = check_device(_default_device(chip) if device is None else device, "fit")
    fsdp = chips if fsdp is None else fsdp
    if min(seq, batch, chips, fsdp) < 1 or chips % fsdp:
        raise ValueError(f"fit: seq, batch, chips, fsdp must be >= 1 and fsdp must divide chips; got "
                         f"seq={seq} batch={batch} chips={chips} fsdp={fsdp}")
    bad = [f for f in budgets if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1]
    if bad:
        raise ValueError(f"fit: budgets are memory_budget fractions in (0, 1] (0.25 keeps at most a quarter of "
                         f"each block's bytes), got {', '.join(repr(f) for f in bad)}")
    if not 0 <= reserve < 1:
        raise ValueError(f"fit: reserve is a fraction of HBM in [0, 1), got {reserve!r}")
    hbm = CHIPS[chip].hbm_bytes if chip is not None else int(hbm_gib * GIB)  # type: ignore[operator]
    on_xla = CHIPS[chip].xla if xla is None and chip is not None else bool(xla)
    dtype = DTYPES[param_dtype]
    build, n_layers, period, name = hf_builder(config, batch, seq, dtype)
    full, _, _ = build(n_layers)
    n_params = sum(p.numel() for p in full.parameters())
    blocks = find_blocks(full)
    block = max((sum(p.numel() for p in full.get_submodule(b).parameters()) for b in blocks), default=0)
    del full
    psize, osize = dtype.itemsize, DTYPES[optim_dtype].itemsize
    master = 4 if osize > psize else 0
    band = XLA_BAND if on_xla else None
    report = FitReport(
        model=name, chip=chip or f"{hbm_gib:g} GiB", hbm_bytes=hbm, chips=chips, fsdp=fsdp, batch=batch, seq=seq,
        n_params=n_params, param_bytes=n_params * psize // fsdp, grad_bytes=n_params * psize // fsdp,
        optimizer_bytes=n_params * (2 * osize + master) // fsdp, gather_bytes=2 * block * psize if fsdp > 1 else 0,
        band=band, reserve=reserve, attention=attention, attention_note=attention_note, device=device)
    usable = int(hbm * (1 - reserve))
    how = dict(attention=attention, device=device)
    unchecked, _ = estimate_layers(build, n_layers, period, config="none", **how)
    for label, cfg in _policies(budgets):
        by_tag = _selects_by_tag(cfg)
        with _quiet_untagged() if by_tag else contextlib.nullcontext():
            est, scaled = ((unchecked, True) if label == "none"
                           else estimate_layers(build, n_layers, period, config=cfg, **how))
        working = recompute_working_bytes(est, unchecked, blocks)
        charged = int((est.activation_bytes + working) * (band[1] if band else 1.0))
        total = report.static_bytes + charged
        note = ("no value of this model is tagged (xla_ckpt.tag): keeps what full keeps; not recommended"
                if by_tag and not est.by_tag else "")
        report.rows.append(FitRow(label, est.activation_bytes, working, charged, total, usable - total,
                                  total <= usable, est.recompute_flops, est.recompute_share, scaled, cfg, note))
    # Least recompute first: FLOPs, then (at equal FLOPs, e.g. only elementwise ops recomputed) the row that
    # keeps the most, since what it does not keep it recomputes; `none` leads whenever it fits.
    report.rows.sort(key=lambda r: (r.recompute_flops, -r.activation_bytes, r.total_bytes))
    fitting = [r for r in report.rows if r.fits and not r.note]
    if not fitting:
        return report
    return dataclasses.replace(report, recommended=_recommendation(report, fitting[0]),
                               recommended_policy=fitting[0].policy)


def _selects_by_tag(cfg: Config) -> bool:
    return any(selects_by_tag(rule.policy.build()) for rule in cfg.checkpoint if rule.enabled)


@contextlib.contextmanager
def _quiet_untagged() -> Iterator[None]:
    """The engine's notice that a name policy met no tag, left out of fit's own estimates (the row says it
    instead); ``forgetting`` keeps it due for the user's own model later in the process."""
    with forgetting(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"xla_ckpt: the policy .* selects values by tag name")
        yield
