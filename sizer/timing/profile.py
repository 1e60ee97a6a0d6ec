"""The calibrated step-time model: a step's time as the sum of kernel times measured on the device.

`sizer calibrate` (sizer/sizing/calibrate.py, from what engine/calibrate.py measured) writes a profile folder,
`<device>-<model>-tp<N>/`: `profile.yaml` (`ProfileHeader`: device, versions, date, dtype,
model shapes, calls per step, fitted overhead, achieved fractions of peak) and CSV tables
beside it. `step_time(batch)` sums, for the engine step that `batch` describes:

  token ops      per-layer GEMMs, norms, RoPE + KV write, activation: tables by new tokens,
                 times the calls per step (layers x calls per layer)
  seq ops        lm_head by logits rows (one a sequence, one a draft token verified: StepBatch.logits_rows) and
                 sampling by sequences
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
import io
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simulator.step_batch import StepBatch, StepTimeModel, split_attention
from sizer.timing.profile_parts import Limits, Overhead
from validation import schema
from validation.errors import FieldError, excerpt, printable
from validation.input_files import read_text
from validation.safe_yaml import load_yaml

PROFILE_FILE = "profile.yaml"
TOKEN_OPS_FILE = "token_ops.csv"           # tokens, <op>_s ...
SEQ_OPS_FILE = "seq_ops.csv"               # seqs, lm_head_s, sampling_s
DECODE_FILE = "decode_attention.csv"       # seqs, context_tokens, time_s
PREFILL_FILE = "prefill_attention.csv"     # chunk_tokens, context_tokens, time_s
ALLREDUCE_FILE = "allreduce.csv"           # bytes, time_s
STEPS_FILE = "steps.csv"                   # whole steps the overhead was fitted to
SCHEMA_VERSION = 1
NAME_BYTES = 255                           # the longest file or folder name (ext4, XFS, APFS: profile_dir_name)


@dataclass(frozen=True)
class DeviceInfo:
    kind: str                       # 'cpu' or 'cuda'
    id: str                         # 'cpu' or the hardware profile id ('h200')
    name: str                       # as the system reports it
    threads: int | None             # torch threads on a CPU; None on a GPU


@dataclass(frozen=True)
class Versions:
    torch: str
    triton: str
    cuda: str | None
    driver: str | None
    python: str


# The bounds (`schema.field`) are on what the step-time model divides by or multiplies with;
# fields without them (versions, fit statistics, achieved rates) are only reported, never
# computed with.


# A bound above any real model's, so that what is multiplied with a float stays a float (a 400-digit layer count
# was an OverflowError, not a refusal: tests/sizer/timing/test_fuzz_profile.py).
MAX_MODEL_DIMENSION = 10**9
# The same for a calibration table's cells: a count (tokens, sequences, context) or seconds, each far below it (a
# latency of 2e305 s passed as finite and overflowed to infinity in the step model: test_fuzz_profile.py)
MAX_TABLE_VALUE = 1e9


@dataclass(frozen=True)
class ModelInfo:
    name: str
    tp: int = schema.field(ge=1, le=MAX_MODEL_DIMENSION)
    hidden_size: int = schema.field(ge=1, le=MAX_MODEL_DIMENSION)
    engine_num_layers: int = schema.field(ge=1, le=MAX_MODEL_DIMENSION)     # layers the engine ran
    model_num_layers: int = schema.field(ge=1, le=MAX_MODEL_DIMENSION)      # layers of the model (more with --scale)
    scale: float = schema.field(gt=0)
    note: str | None


TABLES_ONLY = Overhead(fixed_s=0.0, per_seq_s=0.0, kernel_factor=1.0)   # before the fit: the tables alone


@dataclass(frozen=True)
class DecodePoint:
    seqs: int
    context_tokens: int


@dataclass(frozen=True)
class Achieved:
    """Rates the engine's own ops reached, against the measured ceilings and, when a
    datasheet profile names the device, its peaks (None otherwise)."""

    gemm_flops_per_s: float
    gemm_at_tokens: int
    weight_stream_bytes_per_s: float
    decode_attention_bytes_per_s: float
    decode_attention_at: DecodePoint
    copy_bytes_per_s: float
    matmul_flops_per_s: float
    decode_attention_fraction_of_copy: float
    gemm_fraction_of_measured_matmul: float
    peak_source: str | None = None
    peak_flops_per_s: float | None = None
    peak_bandwidth_bytes_per_s: float | None = None
    compute_fraction_of_peak: float | None = None
    bandwidth_fraction_of_peak: float | None = None
    decode_attention_fraction_of_peak: float | None = None
    copy_fraction_of_peak: float | None = None


# The most calls of one token op in one step a profile may state.
MAX_CALLS_PER_STEP = 1 << 20


@dataclass(frozen=True)
class ProfileHeader:
    """`profile.yaml`: what was measured where, and the fitted overhead (field order is the file's)."""

    schema_version: int
    device: DeviceInfo
    versions: Versions
    date: str                       # ISO date of the calibration
    dtype: str                      # torch dtype name: 'bfloat16', 'float32'
    dtype_bytes: int = schema.field(ge=1)
    kernels: str                    # 'triton' or 'torch'
    model: ModelInfo
    limits: Limits
    # token op -> calls in one step of the layers the engine ran (a step of 4,096 layers calls an op a few
    # times each: MAX_CALLS_PER_STEP bounds it far above that, so a float of it is exact)
    calls_per_step: dict[str, int] = schema.field(ge=0, le=MAX_CALLS_PER_STEP)
    per_layer_ops: tuple[str, ...]  # the token ops that scale with the layer count
    allreduce_calls_per_layer: int = schema.field(ge=0, le=MAX_CALLS_PER_STEP)
    overhead: Overhead
    achieved: Achieved

    def to_dict(self) -> dict:
        """Plain YAML-safe data, keys in field order; an optional field (default None) is
        written only when set."""
        return plain(self)

    @classmethod
    def from_dict(cls, data: Any, file: str) -> ProfileHeader:
        """Read and check a header; a missing key or a value of the wrong type is a
        FieldError naming `file` and the dotted key."""
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise FieldError(file, "schema_version", f"expected {SCHEMA_VERSION}")
        header = schema.build(cls, data, "", file)
        o = header.overhead
        if (o.decode_fixed_s is None) != (o.decode_kernel_factor is None):     # the decode-only line is one fit
            missing = "decode_fixed_s" if o.decode_fixed_s is None else "decode_kernel_factor"
            raise FieldError(file, f"overhead.{missing}", "missing; the decode-only fit needs both decode_fixed_s "
                                                          "and decode_kernel_factor (or neither)")
        return header


def plain(value: Any) -> Any:
    """A dataclass (nested ones, lists, dicts) as YAML-safe data; an optional field (default None) left unset
    is left out."""
    if is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)
                if not (f.default is None and getattr(value, f.name) is None)}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


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


MAX_PROFILE_YAML_BYTES = 1 << 20      # a calibrated profile.yaml is ~3 KB
MAX_TABLE_BYTES = 16 << 20            # the tables are a few KB; steps.csv of a long sweep under 1 MB


def _read_csv(path: Path, required: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Columns of a calibration table: every `required` column there, every cell a finite number >= 0."""
    text = read_text(path, MAX_TABLE_BYTES, "calibration table")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        rows = list(reader)
    except csv.Error as exc:
        raise FieldError(str(path), None, f"not a CSV table ({exc})") from None
    if not rows:
        raise FieldError(str(path), None, "calibration table is empty")
    missing = [c for c in required if c not in header]
    if missing:
        raise FieldError(str(path), f"column {printable(missing[0])}",    # a name from calls_per_step: any text
                         f"missing; the table has {excerpt(header)} and needs {printable(', '.join(required))}")
    columns = {}
    for line, row in enumerate(rows, 2):
        if None in row:
            raise FieldError(str(path), f"line {line}", f"more cells than the header's {len(header)}")
    for k in header:
        try:
            values = np.array([float(r[k]) for r in rows])
        except (TypeError, ValueError):
            bad = next(i for i, r in enumerate(rows, 2) if not _is_number(r[k]))
            raise FieldError(str(path), f"line {bad}, column {k}", "expected a number") from None
        bad_rows = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > MAX_TABLE_VALUE))
        if len(bad_rows):
            i = int(bad_rows[0])
            raise FieldError(str(path), f"line {i + 2}, column {k}",
                             f"expected a number in [0, {MAX_TABLE_VALUE:g}], got {excerpt(rows[i][k])}")
        columns[k] = values
    return columns


def _is_number(text: str | None) -> bool:
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


def _table_1d(path: Path, key: str, value_columns: tuple[str, ...]) -> Table1D:
    cols = _read_csv(path, (key, *value_columns))
    order = np.argsort(cols[key])
    repeated = np.flatnonzero(np.diff(cols[key][order]) == 0)
    if len(repeated):
        raise FieldError(str(path), f"column {key}", f"{cols[key][order][repeated[0]]:g} measured twice")
    return Table1D(cols[key][order], {k: v[order] for k, v in cols.items() if k != key})


def _table_2d(path: Path, xkey: str, ykey: str) -> Table2D:
    cols = _read_csv(path, (xkey, ykey, "time_s"))
    xs, ys = np.unique(cols[xkey]), np.unique(cols[ykey])
    values = np.full((len(xs), len(ys)), np.nan)
    values[np.searchsorted(xs, cols[xkey]), np.searchsorted(ys, cols[ykey])] = cols["time_s"]
    if np.isnan(values).any():
        raise FieldError(str(path), None, f"expected a full grid over {xkey} x {ykey}")
    return Table2D(xs, ys, values)


@dataclass(frozen=True)
class CalibrationProfile:
    path: Path
    header: ProfileHeader
    token_ops: Table1D
    seq_ops: Table1D
    decode_attention: Table2D
    prefill_attention: Table2D
    allreduce: Table1D | None


def read_header(folder: Path) -> ProfileHeader:
    """The `profile.yaml` of a calibrated profile folder."""
    path = folder / PROFILE_FILE
    if not path.exists():
        raise FieldError(str(folder), None,
                         f"not a calibrated profile: no {PROFILE_FILE} (run `sizer calibrate` first)")
    return ProfileHeader.from_dict(load_yaml(path, MAX_PROFILE_YAML_BYTES, PROFILE_FILE), str(path))


def load_profile(path: str | Path) -> CalibrationProfile:
    """Read a calibrated profile folder (or its profile.yaml)."""
    folder = Path(path)
    if folder.name == PROFILE_FILE:
        folder = folder.parent
    header = read_header(folder)
    return CalibrationProfile(
        path=folder,
        header=header,
        token_ops=_table_1d(folder / TOKEN_OPS_FILE, "tokens", tuple(f"{op}_s" for op in header.calls_per_step)),
        seq_ops=_table_1d(folder / SEQ_OPS_FILE, "seqs", ("lm_head_s", "sampling_s")),
        decode_attention=_table_2d(folder / DECODE_FILE, "seqs", "context_tokens"),
        prefill_attention=_table_2d(folder / PREFILL_FILE, "chunk_tokens", "context_tokens"),
        allreduce=_table_1d(folder / ALLREDUCE_FILE, "bytes", ("time_s",)) if header.model.tp > 1 else None,
    )


def profile_dir_name(device_id: str, model: str, tp: int) -> str:
    """`<device>-<model>-tp<N>`: a calibrated profile's folder, one folder inside --out whatever the model's name
    holds: a Hugging Face id's '/' as '--', as the Hub's cache spells it (a config's `_sizer.id` of `../../x` put
    the profile outside --out), a '\\' or a control character as '-', and the name cut to keep the folder's name
    within the file system's 255 bytes (a longer one was a traceback after the measurements)."""
    tail = f"-tp{tp}"
    room = NAME_BYTES - len(f"{device_id}-".encode()) - len(tail.encode())
    name = "".join(c if c.isprintable() and c != "\\" else "-" for c in model.replace("/", "--"))
    return f"{device_id}-{name.encode()[:room].decode(errors='ignore')}{tail}"


def write_table(path: Path, rows: list[dict]) -> None:
    """One CSV table of a profile: a header of the rows' keys, floats to 9 significant digits."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: (f"{v:.9g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)


def write_header(folder: Path, header: ProfileHeader) -> None:
    (folder / PROFILE_FILE).write_text(yaml.safe_dump(header.to_dict(), sort_keys=False))


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
        self.name = f"calibrated on {h.device.name} ({h.model.name}, TP{h.model.tp}, {h.dtype})"
        measured = h.model.engine_num_layers
        self._layer_factor = (self.num_layers or measured) / measured
        self._layers = measured * self._layer_factor

    def breakdown(self, batch: StepBatch) -> tuple[dict[str, float], bool]:
        """Seconds per component (kernel factor applied), and whether every lookup was
        inside the measured range."""
        p, h = self.profile, self.profile.header
        parts: dict[str, float] = {}
        ok = True
        for op, calls in h.calls_per_step.items():
            t, inside = p.token_ops.at(f"{op}_s", batch.new_tokens)
            factor = self._layer_factor if op in h.per_layer_ops else 1.0
            parts[op] = calls * factor * t
            ok &= inside
        for op, rows in (("lm_head", batch.logits_rows), ("sampling", batch.num_seqs)):
            t, inside = p.seq_ops.at(f"{op}_s", rows)
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
            nbytes = batch.new_tokens * h.model.hidden_size * h.dtype_bytes
            t, inside = p.allreduce.at("time_s", nbytes)
            parts["allreduce"] = h.allreduce_calls_per_layer * self._layers * t
            ok &= inside
        factor, beyond_s = h.overhead.line(batch)
        parts = {name: factor * t for name, t in parts.items()}
        parts["overhead"] = beyond_s
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
