"""The sweep file: a base scenario, the axes to sweep it along, constraints and settings.

Declared with the schema layer as the scenario is (`validation/schema.py`): an unknown key, a value
of the wrong type, an empty list, a bad range or a constraint that does not parse is one line
naming the sweep file and the field. Each axis is a list of values or a range:

    tensor_parallel_size: [1, 2, 4]
    rate_per_s: {start: 2, stop: 16, factor: 2}       # 2, 4, 8, 16 (geometric)
    max_num_seqs: {start: 64, stop: 256, step: 64}    # 64, 128, 192, 256 (arithmetic)

A range includes `stop` when a step lands on it. Whether each value suits the base scenario
(a GPU id, a model name, a bound such as max_num_seqs >= 1) is checked when the sweep is
expanded (`sizer.sizing.sweep.check_axes`), against the scenario field it sets.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from sizer.errors import InputError
from sizer.inputs.scenario import MAX_REPLICAS, Engine, KVCacheDtype, WeightFormat
from validation.errors import excerpt
from validation.safe_yaml import load_yaml
from validation.schema import build, field

# Points one sweep expands to at most: 1,000,000 (the Parquet file then holds ~1 GB of rows; a
# cluster of a thousand cores works through it in about an hour at docs/scale.md's rate).
MAX_POINTS = 1_000_000


@dataclass(frozen=True)
class Range:
    start: float = field(gt=0, doc="first value")
    stop: float = field(gt=0, doc="last value at most (included when a step lands on it)")
    step: float | None = field(None, gt=0, doc="arithmetic: start, start + step, ...")
    factor: float | None = field(None, gt=1, doc="geometric: start, start x factor, ...")


@dataclass(frozen=True)
class Axes:
    """Each axis: a list of values or a Range; left out, the base scenario's value is kept."""
    model: list[str] | None = field(None, doc="models (catalog names, config.json paths)")
    gpu: list[str] | None = field(None, doc="accelerator profiles (`sizer gpus`)")
    quantization: list[WeightFormat] | None = field(None, doc="weight formats")
    kv_cache_dtype: list[KVCacheDtype] | None = field(None, doc="KV cache formats")
    tensor_parallel_size: list[int] | Range | None = field(None, ge=1, le=MAX_REPLICAS, doc="TP degrees")
    pipeline_parallel_size: list[int] | Range | None = field(None, ge=1, le=MAX_REPLICAS, doc="PP degrees")
    data_parallel_size: list[int] | Range | None = field(None, ge=1, le=MAX_REPLICAS, doc="DP ranks per replica")
    enable_expert_parallel: list[bool] | None = field(None, doc="EP off/on")
    enable_attention_dp: list[bool] | None = field(None, doc="MoE: attention DP + EP over the TP GPUs (DEP) off/on")
    engine: list[Engine] | None = field(None, doc="serving engines")
    max_num_seqs: list[int] | Range | None = field(None, ge=1, doc="sequences per step")
    max_num_batched_tokens: list[int] | Range | None = field(None, ge=1, doc="token budget per step")
    speculative: list[bool] | None = field(None, doc="the base scenario's speculative_config on/off")
    num_speculative_tokens: list[int] | Range | None = field(None, ge=1, doc="gamma, with speculative on")
    rate_per_s: list[float] | Range | None = field(None, gt=0, doc="arrival rates")
    ttft_ms: list[float] | Range | None = field(None, gt=0, doc="TTFT targets")
    itl_ms: list[float] | Range | None = field(None, gt=0, doc="slo.itl_ms targets (the gaps between tokens)")
    tpot_ms: list[float] | Range | None = field(None, gt=0, doc="slo.tpot_ms targets (each request's TPOT)")
    e2e_ms: list[float] | Range | None = field(None, gt=0, doc="E2E targets")


INTEGER_AXES = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_num_seqs",
                "max_num_batched_tokens", "num_speculative_tokens")


@dataclass(frozen=True)
class SweepSettings:
    num_requests: int = field(200, ge=50, le=100_000,
                              doc="simulated requests per probed rate in each goodput search (search: 600; "
                                  "fewer make a sweep faster and its goodputs coarser)")
    max_replicas: int = field(32, ge=1, le=MAX_REPLICAS, doc="points needing more replicas are rejected")
    max_retries: int = field(3, ge=0, le=100, doc="times a point is rerun after its worker dies")


@dataclass(frozen=True)
class SweepFile:
    scenario: str = field(doc="base scenario YAML, relative to the sweep file")
    axes: Axes = field(doc="what to sweep")
    name: str | None = field(None, doc="default: the file's name")
    constraints: list[str] = field(default_factory=list,
                                   doc="'QUANTITY OP NUMBER': gpus_per_replica, replicas, gpus, usd_per_hour, "
                                       "usd_per_million_output_tokens with <=, <, >=, >")
    settings: SweepSettings = field(default_factory=SweepSettings, doc="how each point is sized")
    file: str | None = dataclasses.field(default=None, metadata={"internal": True})

    def scenario_path(self) -> Path:
        return Path(self.file).parent / self.scenario if self.file else Path(self.scenario)


CONSTRAINT_QUANTITIES = ("gpus_per_replica", "replicas", "gpus", "usd_per_hour", "usd_per_million_output_tokens")
_CONSTRAINT = re.compile(r"^\s*([a-z_]+)\s*(<=|<|>=|>)\s*([-+]?[0-9.eE+-]+)\s*$")


@dataclass(frozen=True)
class Constraint:
    quantity: str
    op: str
    bound: float

    def holds(self, value: float) -> bool:
        return {"<=": value <= self.bound, "<": value < self.bound, ">=": value >= self.bound,
                ">": value > self.bound}[self.op]

    @property
    def text(self) -> str:
        return f"{self.quantity} {self.op} {self.bound:g}"


def parse_constraint(text: str, file: str | None, path: str) -> Constraint:
    m = _CONSTRAINT.match(text)
    expected = f"expected 'QUANTITY OP NUMBER' with QUANTITY one of {', '.join(CONSTRAINT_QUANTITIES)}"
    if not m or m.group(1) not in CONSTRAINT_QUANTITIES:
        raise InputError(file, path, f"{expected} and OP one of <=, <, >=, >, got {excerpt(text)}")
    try:
        bound = float(m.group(3))
    except ValueError:
        raise InputError(file, path, f"{expected}, got {excerpt(text)}") from None
    if not math.isfinite(bound):
        raise InputError(file, path, f"expected a finite bound, got {excerpt(text)}")
    if bound < 0:                   # GPUs, replicas and prices: a negative bound holds always or never
        raise InputError(file, path, f"expected a bound >= 0 ({m.group(1)} is never negative), got {excerpt(text)}")
    return Constraint(m.group(1), m.group(2), bound)


# Constraint quantities that count things (whole numbers, at least one: a replica has a GPU, a sweep point a replica);
# the others are prices (any number >= 0)
COUNTED_QUANTITIES = frozenset({"gpus_per_replica", "replicas", "gpus"})


@dataclass
class _Bounds:
    """What a quantity's constraints so far allow: (low, high), each strict or not, and the constraint that set it."""
    counted: bool
    low: float
    high: float = math.inf
    low_strict: bool = False
    high_strict: bool = False
    low_by: Constraint | None = None
    high_by: Constraint | None = None

    def add(self, c: Constraint) -> Constraint | None:
        """Tighten by `c`; the constraint holding the other side (when `least` is then None, the one `c` crosses)."""
        if c.op in (">", ">=") and (c.bound > self.low or (c.bound == self.low and c.op == ">")):
            self.low, self.low_strict, self.low_by = c.bound, c.op == ">", c
        elif c.op in ("<", "<=") and (c.bound < self.high or (c.bound == self.high and c.op == "<")):
            self.high, self.high_strict, self.high_by = c.bound, c.op == "<", c
        return self.high_by if c is self.low_by else self.low_by

    def least(self) -> float | None:
        """The least value allowed (a whole number for a count), None when none is."""
        if self.counted:
            first = math.floor(self.low) + 1 if self.low_strict else math.ceil(self.low)
            return None if self.high < first or (self.high == first and self.high_strict) else first
        return None if self.low > self.high or (self.low == self.high and (self.low_strict or self.high_strict)) \
            else self.low

    def most(self) -> float:
        """The most a count may be (`least` is not None): infinity when nothing bounds it above."""
        if math.isinf(self.high):
            return math.inf
        return math.ceil(self.high) - 1 if self.high_strict else math.floor(self.high)


def check_satisfiable(constraints: list[Constraint], file: str | None) -> None:
    """Refuse constraints that no point can meet, naming the one that leaves nothing: alone (`gpus < 1`: every
    replica has a GPU), beside another of the same quantity (`gpus <= 4` with `gpus >= 8`), or through gpus =
    gpus_per_replica x replicas (`gpus >= 8` with `gpus_per_replica <= 4` and `replicas <= 1`): a sweep that would
    prune every point before it runs."""
    bounds: dict[str, _Bounds] = {}
    for i, c in enumerate(constraints):
        b = bounds.setdefault(c.quantity, _Bounds(c.quantity in COUNTED_QUANTITIES,
                                                  1.0 if c.quantity in COUNTED_QUANTITIES else 0.0))
        other = b.add(c)
        if b.least() is None:
            kind = "a whole number >= 1" if b.counted else "a number >= 0"
            beside = f" beside {other.text!r}" if other is not None else ""
            raise InputError(file, f"constraints[{i}]", f"expected a bound some point can meet ({c.quantity} is "
                                                        f"{kind}), got {c.text!r}{beside}: no {c.quantity} meets it")
        if not b.counted:
            continue
        gpus, per_replica, replicas = (bounds.get(q) or _Bounds(True, 1.0) for q in ("gpus", "gpus_per_replica",
                                                                                     "replicas"))
        fewest, most = per_replica.least() * replicas.least(), per_replica.most() * replicas.most()
        if gpus.most() < fewest or gpus.least() > most:
            stated = ", ".join(repr(by.text) for q in (gpus, per_replica, replicas) for by in (q.low_by, q.high_by)
                               if by is not None and by is not c)
            raise InputError(file, f"constraints[{i}]", f"expected bounds some point can meet, got {c.text!r} beside "
                                                        f"{stated}: gpus = gpus_per_replica x replicas is "
                                                        f"{fewest:g} to {most:g} under them")


def range_count(r: Range, file: str | None, path: str) -> int:
    """How many values a range has, refused when it is empty, ambiguous or longer than MAX_POINTS."""
    if (r.step is None) == (r.factor is None):
        raise InputError(file, path, "expected exactly one of step (arithmetic) or factor (geometric)")
    if r.stop < r.start:
        raise InputError(file, f"{path}.stop", f"expected stop >= start ({r.start:g}), got {r.stop:g}")
    steps = ((r.stop - r.start) / r.step if r.step else math.log(r.stop / r.start) / math.log(r.factor)) * (1 + 1e-12)
    if not steps < MAX_POINTS:          # also an overflow to infinity (a tiny step over a huge span)
        raise InputError(file, path, f"expected at most {MAX_POINTS:,} values, got "
                                     f"{f'{math.floor(steps) + 1:,}' if math.isfinite(steps) else 'too many to count'}")
    return math.floor(steps) + 1


def range_values(r: Range, integer: bool, file: str | None, path: str) -> list:
    """The values of a range (`range_count` of them)."""
    count = range_count(r, file, path)
    try:
        values = [r.start + i * r.step if r.step else r.start * r.factor ** i for i in range(count)]
    except OverflowError:
        raise InputError(file, path, "expected values within floating point range; factor ** count overflows") from None
    if integer:
        if any(abs(v - round(v)) > 1e-9 for v in values):
            raise InputError(file, path, "expected whole numbers: an integer start with an integer step or factor")
        return list(dict.fromkeys(int(round(v)) for v in values))
    # 0.1 x 3 is 0.30000000000000004: values as written, to 12 significant digits (1e-300 stays 1e-300, not 0)
    return [float(f"{v:.12g}") for v in values]


def axis_values(sweep: SweepFile) -> dict[str, list]:
    """Axis name -> its values (ranges expanded), for every axis the file states; refused, before any range is
    expanded, when the axes' product is more than MAX_POINTS."""
    stated = {f.name: getattr(sweep.axes, f.name) for f in dataclasses.fields(Axes)
              if getattr(sweep.axes, f.name) is not None}
    if not stated:
        raise InputError(sweep.file, "axes", "expected at least one axis to sweep (a single point is `sizer plan`)")
    sizes = {name: range_count(v, sweep.file, f"axes.{name}") if isinstance(v, Range) else len(v)
             for name, v in stated.items()}
    if math.prod(sizes.values()) > MAX_POINTS:
        product = " x ".join(f"{name} {n:,}" for name, n in sizes.items())
        raise InputError(sweep.file, "axes", f"expected at most {MAX_POINTS:,} points, got "
                                             f"{math.prod(sizes.values()):,} ({product})")
    out = {}
    for f in dataclasses.fields(Axes):
        value = getattr(sweep.axes, f.name)
        path = f"axes.{f.name}"
        if value is None:
            continue
        if isinstance(value, Range):
            value = range_values(value, f.name in INTEGER_AXES, sweep.file, path)
        if not value:
            raise InputError(sweep.file, path, "expected at least one value")
        out[f.name] = list(dict.fromkeys(value))
    return out


def load_sweep(path: str | Path) -> SweepFile:
    """Read and type-check a sweep file; its constraints parsed, its ranges checked, its base scenario found."""
    path = Path(path)
    sweep = dataclasses.replace(build(SweepFile, load_yaml(path), "", str(path)), file=str(path))
    sweep = dataclasses.replace(sweep, name=sweep.name or path.stem)
    base = sweep.scenario_path()
    if not os.path.lexists(base):
        raise InputError(sweep.file, "scenario", "expected a scenario YAML file (a path from the sweep file's folder), "
                                                 f"got {excerpt(sweep.scenario)}: {excerpt(str(base), quote=False)} "
                                                 "not found")
    check_satisfiable([parse_constraint(text, sweep.file, f"constraints[{i}]")
                       for i, text in enumerate(sweep.constraints)], sweep.file)
    axis_values(sweep)
    return sweep
