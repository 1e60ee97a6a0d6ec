"""The calibrated step-time model: a step's time as the sum of kernel times measured on the device.

`sizer calibrate` (engine/calibrate.py) writes a profile folder,
`hardware_profiles/calibrated/<device>-<model>-tp<N>/`: `profile.yaml` (device, versions,
date, dtype, model shapes, calls per step, fixed overhead, achieved fractions of peak) and
CSV tables beside it. `step_time(batch)` sums, for the engine step that `batch` describes:

  token ops      per-layer GEMMs, norms, RoPE + KV write, activation: tables by new tokens,
                 times the calls per step (layers x calls per layer)
  seq ops        lm_head and sampling, by sequences (logits are taken for every sequence)
  attention      decode: a table by (decode sequences, context per sequence); prefill: a
                 table by (chunk tokens, context) for one sequence, times the prefill
                 sequences; both times the layer count
  all-reduce     by message bytes, when TP > 1
  overhead       fixed + per-sequence, fitted to whole engine steps the runner timed,
                 together with `kernel_factor`: how much slower the kernels run inside a
                 whole step than alone (caches, launches between them); the sum of the
                 rows above is multiplied by it

Tables are interpolated linearly between measured points. Outside the measured range a step
is priced by the `fallback` model when one is given (the roofline), else by extending the
nearest table segment; either way `out_of_range_steps` counts it, so callers can say so.
The split of a batch's totals into decode and prefill sequences assumes equal prefill chunks
(exact for one prefill sequence per step, the common case under chunked prefill).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from simulator.errors import FieldError
from simulator.step_batch import StepBatch, StepTimeModel

PROFILE_FILE = "profile.yaml"
TOKEN_OPS_FILE = "token_ops.csv"           # tokens, <op>_s ...
SEQ_OPS_FILE = "seq_ops.csv"               # seqs, lm_head_s, sampling_s
DECODE_FILE = "decode_attention.csv"       # seqs, context_tokens, time_s
PREFILL_FILE = "prefill_attention.csv"     # chunk_tokens, context_tokens, time_s
ALLREDUCE_FILE = "allreduce.csv"           # bytes, time_s
STEPS_FILE = "steps.csv"                   # whole steps the overhead was fitted to
SCHEMA_VERSION = 1


def _segment(xs: np.ndarray, ys: np.ndarray, x: float) -> tuple[float, bool]:
    """Linear interpolation; beyond the ends, the end segment extended (never below zero)."""
    if len(xs) == 1:
        return float(ys[0]) * (x / xs[0] if xs[0] else 1.0), x == xs[0]
    if xs[0] <= x <= xs[-1]:
        return float(np.interp(x, xs, ys)), True
    i = 0 if x < xs[0] else len(xs) - 2
    slope = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
    return max(0.0, float(ys[i] + slope * (x - xs[i]))), False


@dataclass(frozen=True)
class Table1D:
    x: np.ndarray
    columns: dict[str, np.ndarray]

    def at(self, column: str, x: float) -> tuple[float, bool]:
        return _segment(self.x, self.columns[column], x)


@dataclass(frozen=True)
class Table2D:
    x: np.ndarray
    y: np.ndarray
    values: np.ndarray              # [len(x), len(y)]

    def at(self, x: float, y: float) -> tuple[float, bool]:
        """Bilinear: along y on every x row, then along x."""
        rows = [_segment(self.y, self.values[i], y) for i in range(len(self.x))]
        value, in_x = _segment(self.x, np.array([r[0] for r in rows]), x)
        return value, in_x and rows[0][1]


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise FieldError(str(path), None, f"calibration table missing or unreadable: {exc.strerror}") from None
    if not rows:
        raise FieldError(str(path), None, "calibration table is empty")
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def _table_1d(path: Path, key: str) -> Table1D:
    cols = _read_csv(path)
    order = np.argsort(cols[key])
    return Table1D(cols[key][order], {k: v[order] for k, v in cols.items() if k != key})


def _table_2d(path: Path, xkey: str, ykey: str) -> Table2D:
    cols = _read_csv(path)
    xs, ys = np.unique(cols[xkey]), np.unique(cols[ykey])
    values = np.full((len(xs), len(ys)), np.nan)
    values[np.searchsorted(xs, cols[xkey]), np.searchsorted(ys, cols[ykey])] = cols["time_s"]
    if np.isnan(values).any():
        raise FieldError(str(path), None, f"expected a full grid over {xkey} x {ykey}")
    return Table2D(xs, ys, values)


@dataclass(frozen=True)
class CalibrationProfile:
    path: Path
    header: dict
    token_ops: Table1D
    seq_ops: Table1D
    decode_attention: Table2D
    prefill_attention: Table2D
    allreduce: Table1D | None

    @property
    def engine_num_layers(self) -> int:
        return int(self.header["model"]["engine_num_layers"])


def load_profile(path: str | Path) -> CalibrationProfile:
    """Read a calibrated profile folder (or its profile.yaml)."""
    folder = Path(path)
    if folder.name == PROFILE_FILE:
        folder = folder.parent
    header_path = folder / PROFILE_FILE
    if not header_path.exists():
        raise FieldError(str(folder), None, f"not a calibrated profile: no {PROFILE_FILE} (run `sizer calibrate` first)")
    header = yaml.safe_load(header_path.read_text())
    if not isinstance(header, dict) or header.get("schema_version") != SCHEMA_VERSION:
        raise FieldError(str(header_path), "schema_version", f"expected {SCHEMA_VERSION}")
    tp = int(header["model"]["tp"])
    return CalibrationProfile(
        path=folder,
        header=header,
        token_ops=_table_1d(folder / TOKEN_OPS_FILE, "tokens"),
        seq_ops=_table_1d(folder / SEQ_OPS_FILE, "seqs"),
        decode_attention=_table_2d(folder / DECODE_FILE, "seqs", "context_tokens"),
        prefill_attention=_table_2d(folder / PREFILL_FILE, "chunk_tokens", "context_tokens"),
        allreduce=_table_1d(folder / ALLREDUCE_FILE, "bytes") if tp > 1 else None,
    )


def split_attention(batch: StepBatch) -> tuple[int, float, int, float, float]:
    """(decode seqs, context per decode seq, prefill seqs, tokens per prefill seq, context
    per prefill seq) from a batch's totals, assuming equal prefill chunks.

    Decodes contribute c + 1 pairs each, a prefill chunk of n tokens on c cached ones
    n c + n (n + 1) / 2, so pairs - context - decodes = P c (n - 1) + P n (n + 1) / 2.
    """
    prefill, decode = batch.prefill_seqs, batch.num_seqs - batch.prefill_seqs
    n = batch.prefill_tokens / prefill if prefill else 0.0
    if prefill and n <= 1:                       # one-token chunks run as decodes
        decode, prefill, n = decode + prefill, 0, 0.0
    c = 0.0
    if prefill:
        excess = batch.attention_pairs - batch.context_tokens - decode - prefill * n * (n + 1) / 2
        c = min(max(0.0, excess / (prefill * (n - 1))), batch.context_tokens / prefill)
    decode_ctx = (batch.context_tokens - prefill * c) / decode if decode else 0.0
    return decode, decode_ctx, prefill, n, c


@dataclass
class CalibratedStepTimeModel:
    """`step_time(batch)` from a calibrated profile; see the module docstring.

    `num_layers` prices a model of that many layers from per-layer measurements (a profile
    taken with `--scale` on fewer layers); by default the layers the engine ran.
    """

    profile: CalibrationProfile
    num_layers: int | None = None
    fallback: StepTimeModel | None = None
    out_of_range_steps: int = 0
    steps: int = 0
    name: str = field(init=False)

    def __post_init__(self):
        h = self.profile.header
        self.name = f"calibrated on {h['device']['name']} ({h['model']['name']}, TP{h['model']['tp']}, {h['dtype']})"
        self._layer_factor = (self.num_layers or self.profile.engine_num_layers) / self.profile.engine_num_layers
        self._layers = self.profile.engine_num_layers * self._layer_factor

    def breakdown(self, batch: StepBatch) -> tuple[dict[str, float], bool]:
        """Seconds per component (kernel factor applied), and whether every lookup was
        inside the measured range."""
        p, h = self.profile, self.profile.header
        parts: dict[str, float] = {}
        ok = True
        for op, calls in h["calls_per_step"].items():
            t, inside = p.token_ops.at(f"{op}_s", batch.new_tokens)
            factor = self._layer_factor if op in h["per_layer_ops"] else 1.0
            parts[op] = calls * factor * t
            ok &= inside
        for op in ("lm_head", "sampling"):
            t, inside = p.seq_ops.at(f"{op}_s", batch.num_seqs)
            parts[op] = t
            ok &= inside
        decode, decode_ctx, prefill, n, c = split_attention(batch)
        parts["decode_attention"] = parts["prefill_attention"] = 0.0
        if decode:
            t, inside = p.decode_attention.at(decode, decode_ctx)
            parts["decode_attention"] = self._layers * t
            ok &= inside
        if prefill:
            t, inside = p.prefill_attention.at(n, c)
            parts["prefill_attention"] = self._layers * prefill * t
            ok &= inside
        if p.allreduce is not None:
            nbytes = batch.new_tokens * h["model"]["hidden_size"] * h["dtype_bytes"]
            t, inside = p.allreduce.at("time_s", nbytes)
            parts["allreduce"] = h["allreduce_calls_per_layer"] * self._layers * t
            ok &= inside
        o = h["overhead"]
        decode_only = batch.prefill_seqs == 0 and "decode_kernel_factor" in o   # fitted apart when measured
        factor = float(o["decode_kernel_factor"] if decode_only else o.get("kernel_factor", 1.0))
        parts = {name: factor * t for name, t in parts.items()}
        parts["overhead"] = (o["decode_fixed_s"] if decode_only else o["fixed_s"]) + o["per_seq_s"] * batch.num_seqs
        return parts, ok

    def step_time(self, batch: StepBatch) -> float:
        if batch.num_seqs == 0:
            return 0.0
        self.steps += 1
        parts, ok = self.breakdown(batch)
        if not ok:
            self.out_of_range_steps += 1
            if self.fallback is not None:
                return self.fallback.step_time(batch)
        return sum(parts.values())
