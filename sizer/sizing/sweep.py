"""`sizer sweep`: a design-space search over many axes, one row of results per point.

    expand     the sweep file's axes (sizer/inputs/sweep_file.py) -> points, their product
    hash       each point's key: SHA-256 of the base scenario with the point's changes made
               (sizer/inputs/variant.py) and the settings that change its numbers; every point simulates
               with the base scenario's seed, as `plan --simulate` would the same configuration (the same
               draws for every point: rows differ by their configuration alone, not by their luck), so a
               point's result does not depend on order, worker, backend or the constraints beside it
    prune      before any simulation: points that do not fit in memory, whose SLO targets lie below the
               per-token floor (weights streamed once per step), that break a constraint at their
               analytic bound, or that need more than max_replicas by it
    evaluate   the sizing pipeline (`size_deployment`, as `search` and `plan --simulate`) per point

Every file the points read (models, hardware profiles, kernel tables, the trace) is read once here, in the
driver (`shared_inputs`), and travels with the sweep to each worker once (sizer/inputs/preloaded.py).

Backends (local process pool, Ray) are in sizer/sizing/sweep_backends.py; the Parquet file that makes
a sweep resumable in sizer/outputs/sweep_store.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sizer.analytic.memory import GiB
from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.hardware import all_profiles, load_hardware, other_device
from sizer.inputs.preloaded import Preloaded
from sizer.inputs.scenario import ArrivalSection, Scenario, scenario_dir, scenario_from_dict
from sizer.inputs.sweep_file import Constraint, SweepFile, SweepSettings, axis_values, parse_constraint
from sizer.inputs.variant import Variant
from sizer.sizing.goodput import cached_prefill_share, rate_bound_per_s, replicas_for, slo_of
from sizer.sizing.pipeline import size_deployment
from sizer.sizing.plan import Plan, make_plan
from sizer.sizing.resolve import (
    Resolved,
    checked_kernel_tables,
    checkpoint_of,
    draft_checkpoint,
    hardware_of,
    head_checkpoint,
    kernel_tables_folder,
    resolve,
)
from sizer.sizing.result import GoodputSettings, SizingStatus
from sizer.sizing.sweep_backends import run_local, run_ray
from sizer.sizing.workload import read_limit, read_trace, trace_summary
from sizer.timing.kernel_tables import HEADER_FILE, TABLES
from sizer.timing.step_model import SHARED_MOE_KERNELS, bundled_header, bundled_tables
from sizer.words import count
from validation.errors import FieldError, excerpt
from validation.schema import field_value

# Bumped when a row's meaning changes: points hashed under another version are simulated again (2: each point's
# seed is the base scenario's, not one derived from its hash).
ROW_VERSION = 2


@dataclass(frozen=True)
class Point:
    """One configuration: a value per swept axis, None where the base scenario's value is kept."""
    model: str | None = None
    gpu: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    enable_expert_parallel: bool | None = None
    enable_attention_dp: bool | None = None
    engine: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    speculative: bool | None = None
    num_speculative_tokens: int | None = None
    rate_per_s: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def variant(self, base_gpu: str, seed: int | None = None) -> Variant:
        """The changes this point makes; a price (Variant clears it), calibrated profile, kernel-tables folder or
        hardware override stays with its own GPU only."""
        other_gpu = other_device(self.gpu, base_gpu)
        changes = {k: v for k, v in dataclasses.asdict(self).items() if k != "speculative"}
        if self.speculative is False:
            changes["num_speculative_tokens"] = None
        return Variant(**changes, seed=seed, clear_replicas=True, clear_speculative=self.speculative is False,
                       clear_calibrated_profile=other_gpu, clear_kernel_tables=other_gpu,
                       clear_hardware_overrides=other_gpu)


@dataclass(frozen=True)
class SweepTrace:
    """The base scenario's trace: its content's hash (part of every point's key) and the rate it plays at."""
    sha256: str
    time_scale: float                  # the base scenario's workload.trace.time_scale
    rate_per_s: float                  # (requests - 1) / span of the requests it replays, time_scale applied


@dataclass(frozen=True)
class Sweep:
    """A sweep file made ready to run: the base mapping, the points and how each is sized."""
    name: str
    scenario_file: str
    data: dict                         # the base scenario mapping (what goes to the object store)
    points: tuple[Point, ...]
    constraints: tuple[Constraint, ...]
    settings: SweepSettings
    inputs: Preloaded = Preloaded()    # every file the points read, read once here (to the object store with data)
    trace: SweepTrace | None = None
    model_sha256: dict[str, str] = dataclasses.field(default_factory=dict)   # model.name -> its config's hash
    kernel_tables_sha256: str | None = None   # the content of the base's hardware.kernel_tables folder
    file: str | None = None            # the sweep file (named by a refusal of its axes)

    @property
    def goodput(self) -> GoodputSettings:
        return GoodputSettings(num_requests=self.settings.num_requests)


# A row's status: met (ok), sized but refused (rejected: SLO, constraint, replicas), settled before simulation
# (pruned), or not a configuration the engine runs (invalid)
STATUSES = ("ok", "rejected", "pruned", "invalid")


@dataclass(frozen=True)
class SweepRow:
    """One point's full configuration and every metric: one Parquet row (units in the names)."""
    point_hash: str
    seed: int
    status: str                        # ok, rejected (SLO, constraint, replicas), pruned (before simulation), invalid
    binding: str | None                # memory, TTFT, TPOT, E2E, constraint, replicas, split, input; ok: what binds
    reason: str
    scenario: str
    model: str | None
    gpu: str | None
    engine: str | None
    quantization: str | None
    kv_cache_dtype: str | None
    tensor_parallel_size: int | None
    pipeline_parallel_size: int | None
    data_parallel_size: int | None
    enable_expert_parallel: bool | None
    enable_attention_dp: bool | None
    max_num_seqs: int | None           # as resolved (the engine's default where the scenario states none)
    max_num_batched_tokens: int | None
    speculative: bool | None
    num_speculative_tokens: int | None
    rate_per_s: float | None
    ttft_target_ms: float | None
    itl_target_ms: float | None
    tpot_target_ms: float | None
    e2e_target_ms: float | None
    required_share: float | None
    gpus_per_replica: int | None = None
    kv_cache_gib_per_gpu: float | None = None
    rate_bound_per_replica_per_s: float | None = None
    goodput_per_replica_per_s: float | None = None
    sizing_status: str | None = None
    replicas: int | None = None
    gpus: int | None = None
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None
    operating_rate_per_replica_per_s: float | None = None
    share_met: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_p99_ms: float | None = None
    queue_p95_ms: float | None = None
    request_throughput_per_s: float | None = None
    output_tokens_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None
    num_preemptions: int | None = None
    mean_batch_size: float | None = None
    peak_kv_usage: float | None = None


@contextmanager
def _part(progress: object, name: str, unit: str, total: int) -> Iterator[Callable[[int], None] | None]:
    """One long piece of the sweep shown in `progress`'s display (sizer.cli.progress.Display.part: 'sweeping,
    pruning: 12,000/1,000,000 points, ... ETA'), its count told to the callable yielded; None where `progress` has
    no parts (a plain callable, or none)."""
    part = getattr(progress, "part", None)
    if part is None:
        yield None
        return
    with part(name, unit, total) as tick:
        yield tick


def build_sweep(sweep: SweepFile, data: dict, progress: object = None) -> Sweep:
    """Expand a checked sweep file over the base scenario mapping `data`; each axis value is checked against
    the scenario field it sets, and refused naming the sweep file and the axis. `progress`: a display
    (sizer.cli.progress) the checking of many values is shown in (a scenario each: a range of a million rates takes
    half an hour)."""
    values = axis_values(sweep)
    base = scenario_from_dict(data, str(sweep.scenario_path()))
    with _part(progress, "checking axis values", "values", sum(map(len, values.values()))) as tick:
        check_axes(sweep, values, data, base, tick)
    if "gpu" in values:          # one profile named twice (an alias and its id) is one GPU, simulated once
        values["gpu"] = list(dict.fromkeys(load_hardware(g).id for g in values["gpu"]))
    names = list(values)
    # speculative off leaves no num_speculative_tokens to vary: those points are one (each simulated once)
    points = tuple(dict.fromkeys(_normal(Point(**dict(zip(names, combo, strict=True))))
                                 for combo in itertools.product(*values.values())))
    constraints = tuple(parse_constraint(t, sweep.file, f"constraints[{i}]") for i, t in enumerate(sweep.constraints))
    inputs = shared_inputs(base, values, sweep.settings)
    # a model given as a path (or a cached Hugging Face snapshot) may change under the same name: its config's
    # content is part of the key; a catalog name's is the installed sizer's
    models = {name: hashlib.sha256(json.dumps(c.config, sort_keys=True, default=str).encode()).hexdigest()
              for (_, name), c in inputs.checkpoints.items() if c.found_as != "catalog"}
    tables = _tables_sha256(kernel_tables_folder(base)) if base.hardware.kernel_tables is not None else None
    return Sweep(sweep.name, str(sweep.scenario_path()), data, points, constraints, sweep.settings, inputs,
                 _trace_of(base, inputs), models, tables, sweep.file)


def _normal(point: Point) -> Point:
    """The point as it sizes: speculative decoding off has no speculative tokens."""
    if point.speculative is False and point.num_speculative_tokens is not None:
        return dataclasses.replace(point, num_speculative_tokens=None)
    return point


def _tables_sha256(folder: Path) -> str:
    """SHA-256 of a kernel-tables folder's header and tables (a folder measured again changes its points)."""
    digest = hashlib.sha256()
    for name in (HEADER_FILE, *(f"{table}.csv.gz" for table in TABLES)):
        if (folder / name).is_file():
            digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()


def shared_inputs(base: Scenario, values: dict[str, list], settings: SweepSettings) -> Preloaded:
    """Every file the sweep's points read, read once here: each model (and draft model or head) as a checkpoint, every
    hardware profile, the kernel tables of each GPU and engine (their headers always; the tables where the
    base prices steps by them), the base's own kernel-tables folder (checked against its GPU here, once), and
    the trace's requests as read for the goodput probes and the operating point."""
    folder = str(scenario_dir(base))
    spec = base.deployment.speculative_config
    checkpoints = {(folder, m): checkpoint_of(dataclasses.replace(base, model=dataclasses.replace(base.model, name=m)))
                   for m in values.get("model", [base.model.name])}
    if spec and spec.model:
        # a head's config found nowhere here is none: the points estimate the head, or say it is not counted
        draft = draft_checkpoint(base) if spec.method == "draft_model" else head_checkpoint(base)
        if draft is not None:
            checkpoints[folder, spec.model] = draft
    tables, headers = {}, {}
    for gpu, engine in itertools.product(values.get("gpu", [base.hardware.gpu]),
                                         values.get("engine", [base.deployment.engine])):
        gpu_id = load_hardware(gpu).id
        headers[gpu_id, engine] = bundled_header(gpu_id, engine)          # the plan's note on kernel tables
        if base.hardware.step_model != "roofline":
            # and the engines whose tables price a kernel this one shares with them (SHARED_MOE_KERNELS)
            for name in (engine, *{e for (own, _), e in SHARED_MOE_KERNELS.items() if own == engine}):
                tables[gpu_id, name] = bundled_tables(gpu_id, name)
    traces = {}
    if base.workload.trace is not None:
        path = str(scenario_dir(base) / base.workload.trace.path)
        for n in (settings.num_requests, None):         # a goodput probe's requests, and the replay's own
            traces[path, read_limit(base, n)] = read_trace(base, n)
    folders = {}
    if base.hardware.kernel_tables is not None:
        hardware = hardware_of(base)
        folders[str(kernel_tables_folder(base))] = checked_kernel_tables(base, hardware)
    return Preloaded(checkpoints, dict(all_profiles()), tables, traces, headers, folders)


def _trace_of(base: Scenario, inputs: Preloaded) -> SweepTrace | None:
    if base.workload.trace is None:
        return None
    with open(scenario_dir(base) / base.workload.trace.path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    with preloaded.installed(inputs):
        rate = trace_summary(base).rate_per_s
    return SweepTrace(digest, base.workload.trace.time_scale, rate)


def variant_of(sweep: Sweep, point: Point, seed: int | None = None) -> Variant:
    """The point's changes to the base scenario. A rate on a trace plays the trace time-scaled to that rate
    (as `check --share` does): time_scale = the base's time_scale x the base's trace rate / the rate."""
    v = point.variant(scenario_gpu(sweep), seed)
    if sweep.trace is None or point.rate_per_s is None:
        return v
    return dataclasses.replace(v, rate_per_s=None,
                               trace_time_scale=sweep.trace.time_scale * sweep.trace.rate_per_s / point.rate_per_s)


def check_axes(sweep: SweepFile, values: dict[str, list], data: dict, base: Scenario,
               tick: Callable[[int], None] | None = None) -> None:
    if base.workload.trace is None and base.workload.arrival.process == "closed":
        # each point is sized for an arrival rate (its row's rate_per_s, the report's question); a closed loop's
        # rate follows from the configuration, as `search` refuses it too
        raise InputError(sweep.file, "scenario", f"{excerpt(sweep.scenario)} has workload.arrival.process: closed, "
                                                 "whose rate depends on each configuration; expected a base scenario "
                                                 "with workload.arrival.rate_per_s (points are sized for a rate)")
    if base.workload.schedule is not None:     # each point is sized at the steady rate: the day would go unsized
        raise InputError(sweep.file, "scenario", f"{excerpt(sweep.scenario)} has workload.schedule, which a sweep "
                                                 "does not size (each point at workload.arrival.rate_per_s alone); "
                                                 "expected a scenario without it (`plan --simulate` sizes the day; "
                                                 "an axis rate_per_s sizes the rates it names)")
    if base.deployment.speculative_config is None:
        axis = next((k for k in ("num_speculative_tokens", "speculative")
                     if values.get(k) and (k == "num_speculative_tokens" or True in values[k])), None)
        if axis is not None:
            raise InputError(sweep.file, f"axes.{axis}", f"the base scenario {sweep.scenario} has no "
                                                         "deployment.speculative_config to turn on")
    checked = 0
    for name, items in values.items():
        for i, value in enumerate(items):
            if tick is not None:
                tick(checked)
            checked += 1
            try:
                if name == "gpu":
                    load_hardware(value)
                if name == "rate_per_s" and base.workload.trace is not None:   # variant_of: a time scale
                    field_value(ArrivalSection, "rate_per_s", value, "workload.arrival.rate_per_s", base.file)
                    continue
                point = Point(**{name: value})
                s = scenario_from_dict(data, str(sweep.scenario_path()), point.variant(base.hardware.gpu))
                if name == "model":
                    resolve(s)
            except FieldError as error:     # with the file and field it names (a model's config.json, its key)
                raise InputError(sweep.file, f"axes.{name}[{i}]", error.one_line()) from None
    if tick is not None:
        tick(checked)
    if not slo_of(base).has_targets and not any(values.get(k) for k in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")):
        raise InputError(sweep.file, "scenario", "a sweep needs at least one SLO target (slo.ttft_ms, itl_ms, "
                                                 "tpot_ms or e2e_ms in the scenario, or an axis)")


def point_hash(sweep: Sweep, point: Point) -> str:
    """SHA-256 of the point's scenario mapping (before its seed is set), the settings that change its numbers
    (not max_retries), the constraints, and the content of a trace, of a model not from the catalog and of the
    scenario's own kernel tables."""
    mapping = variant_of(sweep, point).stated_in(_shorthands(sweep.data), scenario_gpu(sweep))
    settings = {"num_requests": sweep.settings.num_requests, "max_replicas": sweep.settings.max_replicas}
    key = {"version": ROW_VERSION, "scenario": mapping, "settings": settings,
           "constraints": [c.text for c in sweep.constraints]}
    if sweep.trace is not None:        # a changed trace file changes every point
        key["trace_sha256"] = sweep.trace.sha256
    model = sweep.model_sha256.get(mapping["model"]["name"])
    if model is not None:              # a changed config.json at the same path changes its points
        key["model_sha256"] = model
    if sweep.kernel_tables_sha256 is not None and mapping["hardware"].get("kernel_tables") is not None:
        # so does the scenario's own kernel-tables folder measured again (a point on another GPU drops it)
        key["kernel_tables_sha256"] = sweep.kernel_tables_sha256
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def scenario_gpu(sweep: Sweep) -> str:
    gpu = sweep.data.get("hardware")
    return gpu if isinstance(gpu, str) else gpu.get("gpu", gpu.get("base"))    # `base:` is `gpu:` by another name


def _shorthands(data: dict) -> dict:
    """`model: name` and `hardware: gpu` as the mappings they stand for (so both spellings hash alike)."""
    return {**data, **{k: {inner: data[k]} for k, inner in (("model", "name"), ("hardware", "gpu"))
                       if isinstance(data.get(k), str)}}


@dataclass(frozen=True)
class Task:
    """What a worker needs besides the shared sweep: the point, its hash and its seed (the base scenario's)."""
    point: Point
    point_hash: str
    seed: int


def tasks(sweep: Sweep, progress: object = None) -> list[Task]:
    """Each point with its hash and seed; `progress` a display the hashing is shown in (a million points: a minute)."""
    # the base scenario's seed (validated as it was read; 0 by default, as a scenario's), the same for every point
    seed = (sweep.data.get("workload") or {}).get("seed") or 0
    with _part(progress, "hashing points", "points", len(sweep.points)) as tick:
        if tick is None:
            return [Task(p, point_hash(sweep, p), seed) for p in sweep.points]
        out = []
        for i, p in enumerate(sweep.points):
            tick(i)
            out.append(Task(p, point_hash(sweep, p), seed))
        tick(len(out))
        return out


def _prepare(sweep: Sweep, task: Task) -> tuple[SweepRow, Resolved | None, Plan | None]:
    """The point's row with its configuration, resolved and planned; an invalid row when it cannot be."""
    try:
        s = scenario_from_dict(sweep.data, sweep.scenario_file, variant_of(sweep, task.point, task.seed))
    except FieldError as error:
        return _row(sweep, task, None, None, "invalid", "input", error.message), None, None
    try:
        r = resolve(s)
    except FieldError as error:
        binding = "split" if "parallel" in (error.field or "") else "input"
        return _row(sweep, task, s, None, "invalid", binding, error.message), None, None
    plan = make_plan(r)
    return _row(sweep, task, s, r, "ok", None, "", gpus_per_replica=plan.parallel.gpus_per_replica), r, plan


def prune(sweep: Sweep, task: Task) -> SweepRow | None:
    """The point's row when it is settled without simulation (pruned or invalid); None when it must be simulated."""
    row, r, plan = _prepare(sweep, task)
    if r is None:
        return row
    why = _pruned_by(sweep, r, plan)
    return dataclasses.replace(row, status="pruned", binding=why[0], reason=why[1]) if why else None


def _pruned_by(sweep: Sweep, r: Resolved, plan: Plan) -> tuple[str, str] | None:
    if not plan.fits:
        return "memory", "; ".join(plan.memory.reasons)
    for c in sweep.constraints:
        if c.quantity == "gpus_per_replica" and not c.holds(plan.parallel.gpus_per_replica):
            return "constraint", f"{c.text} broken: {plan.parallel.gpus_per_replica} GPUs per replica"
    # Every step streams the weights once: no token comes sooner than this floor (gamma + 1 tokens at best
    # from one speculative step).
    floor_ms = plan.step_times.decode_bandwidth_bound_ms
    spec = r.deployment.speculative_config
    per_token_floor_ms = floor_ms / (spec.num_speculative_tokens + 1) if spec else floor_ms
    slo = r.slo
    for name, target, bound in (("TTFT", slo.ttft_ms, floor_ms), ("ITL", slo.itl_ms, per_token_floor_ms),
                                ("TPOT", slo.tpot_ms, per_token_floor_ms), ("E2E", slo.e2e_ms, floor_ms)):
        if target is not None and target < bound:
            return name, f"{name} target {target:g} ms below the {bound:.3g} ms a step takes to stream the weights"
    fewest = replicas_for(plan.capacity.arrival_rate_per_s, rate_bound_per_s(plan, cached_prefill_share(r, plan)))
    if fewest > sweep.settings.max_replicas:
        return "replicas", (f"needs at least {fewest} replicas at the analytic rate bound, more than "
                            f"max_replicas {sweep.settings.max_replicas}")
    lower = _bounds(r, plan, fewest)
    for c in sweep.constraints:
        value = lower.get(c.quantity)
        if value is not None and c.op in ("<", "<=") and not c.holds(value):
            return "constraint", f"{c.text} broken at the analytic rate bound: at least {value:.4g}"
    return None


def _bounds(r: Resolved, plan: Plan, replicas: int) -> dict[str, float | None]:
    """Constraint quantities at `replicas` replicas (lower bounds when `replicas` is the analytic fewest)."""
    per_replica = plan.parallel.gpus_per_replica
    per_hour = None if r.price_usd_per_gpu_hour is None else replicas * per_replica * r.price_usd_per_gpu_hour
    tokens_per_s = plan.capacity.arrival_rate_per_s * plan.step_times.output_tokens_mean
    return {"gpus_per_replica": per_replica, "replicas": replicas, "gpus": replicas * per_replica,
            "usd_per_hour": per_hour,
            "usd_per_million_output_tokens": per_hour / (tokens_per_s * 3600) * 1e6 if per_hour else None}


def evaluate_point(sweep: Sweep, task: Task) -> SweepRow:
    """One point: pruned without simulation where the bounds allow, else sized by the pipeline. The sweep's
    shared inputs stand in for their files meanwhile: a worker reads no model, profile, table or trace file."""
    with preloaded.installed(sweep.inputs):
        return _evaluate(sweep, task)


def _evaluate(sweep: Sweep, task: Task) -> SweepRow:
    row, r, plan = _prepare(sweep, task)
    if r is None:
        return row
    why = _pruned_by(sweep, r, plan)
    if why:
        return dataclasses.replace(row, status="pruned", binding=why[0], reason=why[1])
    try:
        sizing = size_deployment(r, plan, sweep.goodput, sweep.settings.max_replicas)
    except FieldError as error:     # refused as simulated (KV blocks beyond the simulator's bound): the same each try
        return dataclasses.replace(row, status="invalid", binding="input", reason=error.message)
    point = sizing.operating_point
    metrics = {}
    if point is not None:
        m = point.metrics
        metrics = {f"{name}_p{q}_ms": getattr(getattr(m, name), f"p{q}_ms")
                   for name in ("ttft", "itl", "tpot", "e2e") for q in (50, 95, 99)}
        metrics |= {"queue_p95_ms": m.queue.p95_ms, "request_throughput_per_s": m.request_throughput_per_s,
                    "output_tokens_per_s": m.output_tokens_per_s, "prefix_cache_hit_rate": m.prefix_cache_hit_rate,
                    "num_preemptions": m.num_preemptions, "mean_batch_size": m.mean_batch_size,
                    "peak_kv_usage": m.peak_kv_usage, "share_met": point.share_met,
                    "operating_rate_per_replica_per_s": point.rate_per_s}
    cost = sizing.cost
    row = dataclasses.replace(
        row, kv_cache_gib_per_gpu=plan.memory.kv_cache_bytes / GiB,
        rate_bound_per_replica_per_s=rate_bound_per_s(plan, cached_prefill_share(r, plan)),
        goodput_per_replica_per_s=sizing.goodput_per_replica_per_s, sizing_status=sizing.status.value,
        replicas=sizing.replicas, gpus=cost.gpus if cost else None, usd_per_hour=cost.usd_per_hour if cost else None,
        usd_per_million_output_tokens=cost.usd_per_million_output_tokens if cost else None, **metrics)
    if sizing.status is not SizingStatus.MET:
        binding = point.binding if sizing.status is SizingStatus.MISSED else sizing.binding_target
        return dataclasses.replace(row, status="rejected", binding=binding, reason=sizing.verdict)
    at = _bounds(r, plan, sizing.replicas)
    for c in sweep.constraints:
        value = at.get(c.quantity)
        if value is not None and not c.holds(value):
            return dataclasses.replace(row, status="rejected", binding="constraint",
                                       reason=f"{c.text} broken: {value:.4g}")
    return dataclasses.replace(row, binding=sizing.binding_target, reason=sizing.verdict)


def _row(sweep: Sweep, task: Task, s: Scenario | None, r: Resolved | None, status: str, binding: str | None,
         reason: str, **numbers) -> SweepRow:
    """The configuration columns: from the resolved deployment, else the scenario, else the point."""
    p = task.point
    if s is None:
        config = {"model": p.model, "gpu": p.gpu, "engine": p.engine, "quantization": p.quantization,
                  "kv_cache_dtype": p.kv_cache_dtype, "tensor_parallel_size": p.tensor_parallel_size,
                  "pipeline_parallel_size": p.pipeline_parallel_size, "data_parallel_size": p.data_parallel_size,
                  "enable_expert_parallel": p.enable_expert_parallel,
                  "enable_attention_dp": p.enable_attention_dp, "max_num_seqs": p.max_num_seqs,
                  "max_num_batched_tokens": p.max_num_batched_tokens, "speculative": p.speculative,
                  "num_speculative_tokens": p.num_speculative_tokens,
                  "rate_per_s": p.rate_per_s or (sweep.trace.rate_per_s if sweep.trace else None),
                  "ttft_target_ms": p.ttft_ms, "itl_target_ms": p.itl_ms, "tpot_target_ms": p.tpot_ms,
                  "e2e_target_ms": p.e2e_ms,
                  "required_share": None}
    else:
        d, spec = s.deployment, s.deployment.speculative_config
        config = {"model": s.model.name, "gpu": r.hardware.id if r else s.hardware.gpu, "engine": d.engine,
                  "quantization": d.quantization, "kv_cache_dtype": r.kv_cache_dtype if r else d.kv_cache_dtype,
                  "tensor_parallel_size": d.tensor_parallel_size, "pipeline_parallel_size": d.pipeline_parallel_size,
                  "data_parallel_size": d.data_parallel_size, "enable_expert_parallel": d.enable_expert_parallel,
                  "enable_attention_dp": d.enable_attention_dp,
                  "max_num_seqs": r.engine.max_num_seqs if r else d.max_num_seqs,
                  "max_num_batched_tokens": r.engine.max_num_batched_tokens if r else d.max_num_batched_tokens,
                  "speculative": spec is not None,
                  "num_speculative_tokens": spec.num_speculative_tokens if spec else None,
                  "rate_per_s": s.workload.arrival.rate_per_s if sweep.trace is None else
                  p.rate_per_s or sweep.trace.rate_per_s, "ttft_target_ms": s.slo.ttft_ms,
                  "itl_target_ms": s.slo.itl_ms, "tpot_target_ms": s.slo.tpot_ms, "e2e_target_ms": s.slo.e2e_ms,
                  "required_share": s.slo.required_share}
    return SweepRow(task.point_hash, task.seed, status, binding, reason, sweep.name, **config, **numbers)



@dataclass(frozen=True)
class SweepSummary:
    points: int
    already_done: int                  # in the results file before this run: skipped
    pruned: dict[str, int]             # binding -> points settled without simulation (invalid ones under "invalid")
    simulated: int
    failed: tuple[tuple[str, str], ...]   # (point hash, why) for points that failed every try: not written
    elapsed_s: float

    @property
    def points_per_s(self) -> float:
        return (self.points - self.already_done) / self.elapsed_s if self.elapsed_s > 0 else 0.0


def run_sweep(sweep: Sweep, done: set[str], sink: Callable[[SweepRow], None], backend: str, workers: int = 1,
              address: str | None = None, progress: Callable[[int, int], None] | None = None,
              evaluate: Callable[[Sweep, Task], SweepRow] | None = None,
              every: list[Task] | None = None) -> SweepSummary:
    """Every point of `sweep` not in `done`: pruned here (no simulation), the rest evaluated on `backend`
    ("local": `workers` processes; "ray": the cluster at `address`, else a local one of `workers` CPUs);
    each row handed to `sink` as it arrives. `evaluate` is evaluate_point (tests pass a failing one); `every`: the
    sweep's `tasks`, where the caller has them; `progress`: told the simulations done, and where it is a display
    (sizer.cli.progress) with parts, the pruning shown in it too."""
    with preloaded.installed(sweep.inputs):      # the driver prunes with the inputs its workers get
        return _run(sweep, done, sink, backend, workers, address, progress, evaluate, every)


def check_resumable(sweep: Sweep, done: set[str], every: list[Task] | None = None) -> None:
    """Refused when `done` (the point hashes of a results file and its parts) holds a point not in `sweep`: resuming
    into another sweep's file (or one of this sweep before its inputs changed). `sizer sweep` asks before it
    writes anything (a refusal leaves the file and its parts as they were); `run_sweep` asks again."""
    stray = done - {t.point_hash for t in (tasks(sweep) if every is None else every)}
    if stray:
        raise InputError(None, "--results", f"expected this sweep's results file; it holds rows of "
                                            f"{count(len(stray), 'point')} not in sweep {sweep.name} (another "
                                            "sweep's, or written before its scenario, axes, settings or inputs "
                                            "changed)")


def _run(sweep: Sweep, done: set[str], sink: Callable[[SweepRow], None], backend: str, workers: int,
         address: str | None, progress: Callable[[int, int], None] | None,
         evaluate: Callable[[Sweep, Task], SweepRow] | None, every: list[Task] | None = None) -> SweepSummary:
    start = time.monotonic()
    every = tasks(sweep, progress) if every is None else every
    check_resumable(sweep, done, every)
    todo = [t for t in every if t.point_hash not in done]
    pruned: dict[str, int] = {}
    simulate, settled = [], []
    with _part(progress, "pruning", "points", len(todo)) as tick:    # a resolved plan a point: ~5-10 ms each
        for i, task in enumerate(todo):
            if tick is not None:
                tick(i)
            row = prune(sweep, task)
            if row is None:
                simulate.append(task)
                continue
            key = "invalid" if row.status == "invalid" else row.binding
            pruned[key] = pruned.get(key, 0) + 1
            settled.append(row)
        if tick is not None:
            tick(len(todo))
    if settled and not done and len(settled) == len(every) == pruned.get("invalid"):
        # axis values each valid alone, never together (or never with the base scenario): nothing to size
        raise InputError(sweep.file, "axes", f"every one of the sweep's {count(len(every), 'point')} is invalid "
                                             f"(point {settled[0].point_hash[:12]}: {settled[0].reason}); expected "
                                             "axes some configuration of which the engine runs")
    for row in settled:
        sink(row)
    failed: list[tuple[str, str]] = []
    finished = 0

    def on_result(task: Task, row: SweepRow) -> None:
        nonlocal finished
        finished += 1
        sink(row)
        if progress:
            progress(finished, len(simulate))

    def on_failure(task: Task, why: str) -> None:
        failed.append((task.point_hash, why))

    if progress:
        progress(0, len(simulate))
    fn = evaluate or evaluate_point
    shared = dataclasses.replace(sweep, points=())     # each task carries its own point: the rest goes once
    if backend == "ray":
        run_ray(fn, shared, simulate, address, sweep.settings.max_retries, on_result, on_failure, num_cpus=workers)
    else:
        run_local(fn, shared, simulate, workers, sweep.settings.max_retries, on_result, on_failure)
    return SweepSummary(len(sweep.points), len(sweep.points) - len(todo), pruned, finished, tuple(failed),
                        time.monotonic() - start)
