"""Capacity over time: the scenario's schedule served by its autoscaling policy, priced step by step.

    SLO rate per replica  the steady pipeline at the schedule's peak gives n replicas meeting the SLO; the
                          highest rate per replica known to meet it is bisected between peak / n (meets) and
                          peak / (n - 1) (misses) with two more operating-point simulations, so a constant
                          schedule gets exactly the steady plan's n
    curve                 one replica simulated once at a few rates up to that: SLO share, busy share and
                          compute-bound share, read between points by straight lines
    steps                 a minute each; a step whose replicas serving carry more than the SLO rate each
                          (a scale-up the policy did not start in time) is short: runs of short steps, with a
                          lead-in and a drain, are simulated (one replica fed the per-replica rate as it moves,
                          Poisson split at random stays Poisson); every other step is read off the curve
    policies              static peak (the peak's replicas all period, on demand), autoscaled (what the policy
                          pays, on demand), reserved base + burst (a base paid at the reserved price all
                          period, the rest on demand; base the cheapest unless stated); per month = per day x
                          730 / 24 (8,760 hours a year / 12)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from simulator import Workload, slo_attainment
from sizer.analytic.energy import kwh, mean_power_w, no_power_reason, per_million, power_by_state
from sizer.inputs.scenario import MAX_REQUESTS
from sizer.inputs.schedule import DEFAULT_TARGET_UTILISATION, AutoscalingSection, Profile, grown, points_profile
from sizer.sizing.autoscale import Policy, ReplicaTimeline, ScaleUpDelay, needed_replicas, replica_timeline
from sizer.sizing.cost import HOURS_PER_MONTH, gpus_per_replica
from sizer.sizing.day_result import (
    CurvePoint,
    DayEnergy,
    DayPlan,
    GrowthMonth,
    Interval,
    PolicyCost,
    SteadyEnergy,
    Window,
)
from sizer.sizing.goodput import probe_slo, slo_of
from sizer.sizing.pipeline import size_deployment
from sizer.sizing.plan import Plan, make_plan
from sizer.sizing.resolve import Resolved
from sizer.sizing.result import GoodputSettings, SizingStatus
from sizer.sizing.schedule_trace import trace_profile
from sizer.sizing.simulate import simulate_scenario
from sizer.sizing.workload import workload_of
from sizer.words import count

STEP_S = 60.0                        # the policy's and the pricing's step: HPA's sync period is 15 s, KEDA's 30 s
CURVE_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)   # rates of the curve, as shares of the SLO rate per replica
REFINE_STEPS = 2                     # bisections of the SLO rate per replica between peak / n and peak / (n - 1)
LEAD_STEPS, DRAIN_STEPS = 2, 5       # a short run is simulated from 2 steps before it to 5 after (scored: those 5)
MAX_WINDOW_STEPS = 120               # at most 2 hours simulated per run of short steps; longer runs: share 0 (named)


def _clock(t_s: float, period: str) -> str:
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    d, rest = divmod(int(round(t_s)), 86_400)
    hm = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}"
    return f"{days[d % 7]} {hm}" if period == "week" else hm


def _at_rate(r: Resolved, rate_per_s: float) -> Resolved:
    """`r` at another arrival rate: the rate sets no setting (`resolve` reads none of it), so only the workload
    changes."""
    w = dataclasses.replace(r.workload, arrival=dataclasses.replace(r.workload.arrival, rate_per_s=rate_per_s))
    return dataclasses.replace(r, workload=w)


def _profile(r: Resolved) -> Profile:
    sch = r.workload.schedule
    if sch.points is not None:
        return points_profile(sch, r.file)
    return trace_profile(r)


def _curve_point(r: Resolved, rate_per_s: float, n: int) -> CurvePoint:
    probe = probe_slo(r, rate_per_s, n)
    (load,) = probe.load                 # one pool: a schedule is refused with deployment.disaggregated
    return CurvePoint(rate_per_s, probe.share_met, load.busy_share, load.compute_bound_share)


def _read(curve: tuple[CurvePoint, ...], x: float) -> tuple[float, float, float]:
    """SLO share, busy share and compute-bound share at `x` per replica, straight lines between points; below
    the first, its shares with busy time in proportion to the rate."""
    first = curve[0]
    if x <= first.rate_per_s:
        return first.slo_share, first.busy_share * x / first.rate_per_s, first.compute_bound_share
    xs = [p.rate_per_s for p in curve]
    return tuple(float(np.interp(x, xs, [getattr(p, f) for p in curve]))
                 for f in ("slo_share", "busy_share", "compute_bound_share"))


def _slo_rate(r: Resolved, peak: float, n: int, goodput_per_replica_per_s: float | None) -> float:
    """Highest rate per replica known to meet the SLO at the operating point (the scenario's request count): from
    peak / n, which meets, towards peak / (n - 1), which misses. One replica has no such bound: towards the sizing's
    goodput per replica (the highest rate its search found meeting the SLO), else twice the peak."""
    lo = peak / n
    hi = peak / (n - 1) if n > 1 else max(2 * lo, goodput_per_replica_per_s or 0.0)
    for _ in range(REFINE_STEPS if hi > lo * 1.01 else 0):
        mid = math.sqrt(lo * hi)
        if probe_slo(r, mid, r.workload.num_requests).met:
            lo = mid
        else:
            hi = mid
    return lo


def _delay(plan: Plan, a: AutoscalingSection) -> ScaleUpDelay:
    return ScaleUpDelay(a.node_provisioning_s, a.image_pull_s, plan.weights.total_bytes / a.storage_bytes_per_s,
                        a.engine_start_s, a.cuda_graph_capture_s)


def _short_runs(short: list[bool]) -> list[tuple[int, int]]:
    runs, i, k = [], 0, len(short)
    while i < k:
        if short[i]:
            j = i
            while j < k and short[j]:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    merged: list[tuple[int, int]] = []
    for a, b in runs:                          # runs closer than a drain apart are one window
        if merged and a - merged[-1][1] <= DRAIN_STEPS:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _simulate_window(r: Resolved, per_replica: list[float], a: int, b: int, k: int, step_s: float):
    """One replica fed per_replica[t] from step a - LEAD to b + DRAIN (wrapping): each scored step's SLO share,
    busy and compute-bound shares, and the requests scored."""
    idx = [(i % k) for i in range(a - LEAD_STEPS, b + DRAIN_STEPS)]
    rates = np.array([per_replica[i] for i in idx])
    cum = np.concatenate([[0.0], np.cumsum(rates * step_s)])       # expected arrivals by each step boundary
    n = max(1, int(math.ceil(cum[-1] * 1.1 + 10)))
    base = workload_of(r, n, rate_per_s=1.0)           # unit-rate Poisson: arrival i at cum-intensity
    units = base.arrival_s
    keep = units < cum[-1]
    t_s = np.interp(units[keep], cum, np.arange(len(rates) + 1) * step_s)
    w = Workload(t_s, base.prompt_tokens[keep], base.output_tokens[keep], base.tenant[keep],
                 [s for s, kk in zip(base.segments, keep.tolist(), strict=True) if kk], base.segment_tokens,
                 None if base.adapter is None else base.adapter[keep],
                 None if base.schema is None else base.schema[keep])
    result = simulate_scenario(r, replicas=1, workload=w)
    met = slo_attainment(result, slo_of(r))
    arrival = result.columns["arrival_s"]
    step_of = np.minimum((arrival // step_s).astype(int), len(rates) - 1)
    shares = {}
    for j in range(LEAD_STEPS, len(rates)):
        sel = step_of == j
        shares[idx[j]] = float(met[sel].mean()) if sel.any() else 1.0
    scored = step_of >= LEAD_STEPS
    return shares, int(scored.sum()), float(met[scored].mean()) if scored.any() else 1.0


def plan_day(r: Resolved, plan: Plan, settings: GoodputSettings = GoodputSettings(),
             progress: Callable[..., None] | None = None) -> tuple[DayPlan | None, str]:
    """The scenario's schedule served by its autoscaling policy (sizer.sizing.autoscale), priced per step, and a
    verdict; no day when no replica count meets the SLO at the schedule's peak (the verdict says why).
    `progress(done, total)` counts its simulations: the peak's sizing, the curve's points, the windows."""
    tick = _ticker(progress)
    sch, a = r.workload.schedule, r.autoscaling or AutoscalingSection()
    profile = _profile(r)
    k = int(round(profile.period_s / STEP_S))
    rates = [profile.rate_at((i + 0.5) * STEP_S) for i in range(k)]
    peak = max(rates)
    peak_r = _at_rate(r, peak)
    # a steady rate stated at the peak (diurnal-chat-h100's) was sized already: `plan.simulation` is
    # add_simulation's size_deployment(r, plan, settings), the very inputs asked for here, so its answer is reused
    same = plan.simulation is not None and plan.simulation.settings == settings and peak_r == r
    sizing = plan.simulation if same else size_deployment(peak_r, make_plan(peak_r), settings)
    tick()
    if sizing.status is not SizingStatus.MET:
        return None, f"the {sch.period} not sized: at its peak of {peak:g} req/s, {sizing.verdict}"
    n_peak = sizing.replicas
    mu = _slo_rate(r, peak, n_peak, sizing.goodput_per_replica_per_s)
    curve = tuple(tick(_curve_point(r, mu * f, settings.num_requests)) for f in CURVE_FRACTIONS)
    delay = _delay(plan, a)
    target = mu * ((a.target_utilisation or DEFAULT_TARGET_UTILISATION) if a.target == "utilisation" else 1.0)
    policy = Policy(target, a.min_replicas, a.max_replicas, a.scale_ahead, delay.total_s, a.scale_down_cooldown_s)
    tl = replica_timeline(rates, STEP_S, policy)
    slo_policy = dataclasses.replace(policy, target_per_replica_per_s=mu)
    per_replica = [x / max(1, n) for x, n in zip(rates, tl.serving, strict=True)]
    short = [x > mu * (1 + 1e-9) for x in per_replica]
    # each step's shares read once, for its SLO share and its power: the curve ends at mu, so a step not short
    # (x <= mu, within rounding) reads at min(x, mu) what it reads at x
    reads = [_read(curve, min(x, mu)) for x in per_replica]
    step_share = {i: reads[i][0] for i in range(k) if not short[i]}
    windows, simulated, notes = _windows(r, per_replica, short, tl, sch.period, step_share, tick)
    g = gpus_per_replica(r)
    power = power_by_state(r.hardware)
    pue = r.energy.pue
    requests = [x * STEP_S for x in rates]
    total_requests = sum(requests)

    def share_of(shares: list[float]) -> float:
        return sum(q * x for q, x in zip(requests, shares, strict=True)) / total_requests

    def watts(serving: int, paid: int, read: tuple[float, float, float]) -> float:
        if power is None:
            return 0.0
        _, busy, bound = read
        return g * (serving * mean_power_w(power, busy, bound) + (paid - serving) * power.idle_w)

    auto_shares = [step_share.get(i, 1.0) for i in range(k)]
    step_kwh = [kwh(watts(tl.serving[i], tl.paid[i], reads[i]), STEP_S, pue) for i in range(k)]
    static_reads = [_read(curve, x / n_peak) for x in rates]       # x / n_peak <= peak / n_peak <= mu (_slo_rate)
    static_kwh = sum(kwh(watts(n_peak, n_peak, read), STEP_S, pue) for read in static_reads)
    per_interval = int(round(sch.interval_s / STEP_S))
    intervals = []
    for start in range(0, k, per_interval):
        sl = range(start, min(k, start + per_interval))
        q = sum(requests[i] for i in sl)
        intervals.append(Interval(
            _clock(start * STEP_S, sch.period), q / (len(sl) * STEP_S),
            max(needed_replicas(rates[i], slo_policy) for i in sl), min(tl.serving[i] for i in sl),
            max(tl.serving[i] for i in sl), sum(tl.paid[i] for i in sl) * g * STEP_S / 3600,
            sum(requests[i] * auto_shares[i] for i in sl) / q if q else 1.0, any(i in simulated for i in sl),
            sum(step_kwh[i] for i in sl)))
    static_shares = [read[0] for read in static_reads]
    policies = _policies(r, tl, n_peak, g, share_of(static_shares), share_of(auto_shares), a)
    meeting = [p for p in policies if p.meets_slo and p.usd_per_month is not None]
    cheapest = min(meeting, key=lambda p: p.usd_per_month).name if meeting else None
    tokens = total_requests * plan.step_times.output_tokens_mean
    energy = None
    if power is not None:
        day_kwh = sum(step_kwh)
        energy = DayEnergy(power, pue, day_kwh, per_million(day_kwh, tokens),
                           per_million(day_kwh * r.energy.grid_g_co2e_per_kwh, tokens)
                           if r.energy.grid_g_co2e_per_kwh is not None else None, static_kwh)
    growth = _growth(r, profile, sch, policy, g) if sch.growth_per_month else ()
    capped = [m.month for m in growth if math.ceil(m.peak_rate_per_s / policy.target_per_replica_per_s - 1e-9)
              > policy.max_replicas]
    if capped:
        notes.append(f"months {', '.join(map(str, capped))} ahead: the peak needs more than max_replicas "
                     f"({policy.max_replicas}); their replicas and cost are at that cap, and the SLO is missed")
    if r.slo.itl_ms is not None:
        # the SLO rate per replica (mu) comes from the sizing pipeline, which scores the pooled token gaps; the
        # windows' per-interval shares are per request, and a request keeps no gaps of its own (simulator.metrics)
        notes.append(f"ITL target {r.slo.itl_ms:g} ms: met at the SLO rate per replica ({mu:.3g} req/s, the pooled "
                     "token gaps of the sizing); the per-interval SLO shares count TTFT, TPOT and E2E per request, "
                     "not the ITL")
    n = r.workload.num_requests
    if n < settings.num_requests:       # a run shorter than the goodput search's ends before queues build
        notes.append(f"the SLO rate per replica ({mu:.3g} req/s) is simulated over the scenario's {n:,} requests "
                     f"(workload.num_requests), a run of {n / mu:.3g} s, fewer than the goodput search's "
                     f"{settings.num_requests:,}: queues may not build in so short a run; raise workload.num_requests")
    if r.hardware.reserved_usd_per_gpu_hour is not None:
        notes.append(f"reserved price ${r.hardware.reserved_usd_per_gpu_hour:g}/GPU-hour: "
                     f"{r.hardware.reserved_price_rule}")
    day = DayPlan(sch.period, sch.time_zone, STEP_S, sch.interval_s, peak, n_peak, mu, target, delay, a.scale_ahead,
                  curve, tuple(intervals), tuple(windows), policies, cheapest, total_requests, tokens, energy,
                  growth, tuple(notes))
    auto = policies[1]
    held = "holds" if auto.meets_slo else "is missed"
    return day, (f"over the {sch.period} the SLO {held} autoscaled ({auto.slo_share:.1%} of requests"
                 + (f"; {count(len(windows), 'scale-up window')} simulated" if windows else "")
                 + "); cheapest meeting it: " + (cheapest or "none"))


def _ticker(progress: Callable[..., None] | None) -> Callable[..., object]:
    """`tick(value)`: one simulation done (returns `value`); `tick(total_more=n)`: n more to come. Calls
    `progress(done, total)`; the total grows as the day learns how many windows it simulates."""
    done, total = 0, 1 + len(CURVE_FRACTIONS)

    def tick(value: object = None, total_more: int | None = None) -> object:
        nonlocal done, total
        if total_more is None:
            done += 1
        else:
            total += total_more
        if progress is not None:
            progress(done, total)
        return value

    return tick


def _windows(r: Resolved, per_replica: list[float], short: list[bool], tl: ReplicaTimeline, period: str,
             step_share: dict[int, float], tick: Callable[..., object]) -> tuple[list[Window], set[int], list[str]]:
    """Each run of short steps simulated (its steps' SLO shares into `step_share`): the windows, the steps they
    scored, and notes on runs too long to simulate (MAX_WINDOW_STEPS, or more than MAX_REQUESTS arrivals), which
    are counted as missing the SLO."""
    k = len(per_replica)
    windows, simulated, notes = [], set(), []
    runs = _short_runs(short)
    tick(total_more=len(runs))
    for wa, wb in runs:
        arrivals = sum(per_replica[i % k] for i in range(wa - LEAD_STEPS, wb + DRAIN_STEPS)) * STEP_S
        if wb - wa > MAX_WINDOW_STEPS or arrivals > MAX_REQUESTS:
            step_share.update(dict.fromkeys(range(wa, wb), 0.0))
            notes.append(f"{_clock(wa * STEP_S, period)}-{_clock(wb * STEP_S, period)}: replicas short of the SLO "
                         f"rate for {wb - wa} minutes ({arrivals:,.0f} arrivals a replica), beyond what one "
                         f"simulation takes ({MAX_WINDOW_STEPS} minutes, {MAX_REQUESTS:,} requests): counted as "
                         f"missing the SLO")
            continue
        shares, count, share = tick(_simulate_window(r, per_replica, wa, wb, k, STEP_S))
        step_share.update(shares)
        simulated.update(shares)
        windows.append(Window(_clock(wa * STEP_S, period), _clock(wb * STEP_S, period),
                              tl.serving[wa - 1 if wa else k - 1], tl.serving[wb % k], count, share))
    return windows, simulated, notes


def _policies(r: Resolved, tl: ReplicaTimeline, n_peak: int, g: int, static_share: float, auto_share: float,
              a: AutoscalingSection) -> tuple[PolicyCost, ...]:
    on_demand, reserved = r.price_usd_per_gpu_hour, r.hardware.reserved_usd_per_gpu_hour
    k, step_h = len(tl.paid), tl.step_s / 3600
    per_month = HOURS_PER_MONTH / (k * step_h)           # periods a month
    required = slo_of(r).required_share
    static_h = n_peak * g * k * step_h
    auto_h = sum(tl.paid) * g * step_h

    def usd(hours: float, price: float | None) -> float | None:
        return None if price is None else hours * price * per_month

    out = [PolicyCost("static peak", static_h, usd(static_h, on_demand), static_share, static_share >= required,
                      f"{n_peak} replicas all period, on demand"),
           PolicyCost("autoscaled", auto_h, usd(auto_h, on_demand), auto_share, auto_share >= required,
                      f"{min(tl.paid)} to {max(tl.paid)} replicas paid, on demand")]
    if reserved is None or on_demand is None:
        out.append(PolicyCost("reserved base + burst", auto_h, None, auto_share, auto_share >= required,
                              f"not priced: {r.hardware.id} has no reserved price"))
        return tuple(out)

    def cost(base: int) -> float:
        burst = sum(max(0, p - base) for p in tl.paid) * g * step_h
        return base * g * k * step_h * reserved + burst * on_demand

    bases = [a.reserved_replicas] if a.reserved_replicas is not None else range(max(tl.paid) + 1)
    base = min(bases, key=cost)
    # the base is paid every step, serving or not; what the policy pays above it, on demand
    paid_h = sum(max(p, base) for p in tl.paid) * g * step_h
    out.append(PolicyCost("reserved base + burst", paid_h, cost(base) * per_month, auto_share, auto_share >= required,
                          f"{base} reserved at ${reserved:g}/GPU-h, the rest on demand"))
    return tuple(out)


def _growth(r: Resolved, profile: Profile, sch, policy: Policy, g: int) -> tuple[GrowthMonth, ...]:
    """Months ahead at the growth rate, from the policy alone (the curve's SLO rate per replica; no simulation)."""
    out = []
    price = r.price_usd_per_gpu_hour
    for m in range(1, sch.months + 1):
        p = grown(profile, sch.growth_per_month, m)
        k = int(round(p.period_s / STEP_S))
        rates = [p.rate_at((i + 0.5) * STEP_S) for i in range(k)]
        tl = replica_timeline(rates, STEP_S, policy)
        hours = sum(tl.paid) * g * STEP_S / 3600
        out.append(GrowthMonth(m, max(rates), max(tl.paid),
            None if price is None else hours * price * HOURS_PER_MONTH / (k * STEP_S / 3600)))
    return tuple(out)


def add_day(plan: Plan, r: Resolved, settings: GoodputSettings = GoodputSettings(),
            progress: Callable[..., None] | None = None) -> Plan:
    """`plan` (simulated) with its day over the schedule (`Plan.day`) and the day's verdict."""
    day, verdict = plan_day(r, plan, settings, progress)
    return dataclasses.replace(plan, day=day, verdict=f"{plan.verdict}; {verdict}")


def steady_energy(r: Resolved, plan: Plan) -> SteadyEnergy | None:
    """Energy of a simulated steady plan at its operating point (the sizing's own simulation of one replica at
    target rate / replicas, `Sizing.operating_point`): each pool's GPUs at the mean power of its own busy and
    compute-bound shares (a disaggregated replica's prefill and decode pools apart), every replica alike; None
    without replicas, an operating point or a power figure."""
    sizing, power = plan.simulation, power_by_state(r.hardware)
    point = sizing.operating_point if sizing is not None and sizing.replicas else None
    if point is None or point.load is None or power is None:
        return None
    rate = sizing.target_rate_per_s
    replica_w = sum(mean_power_w(power, p.busy_share, p.compute_bound_share) * p.engine_replicas
                    for p in point.load) * r.parallel.gpus_per_replica
    hour = kwh(replica_w * sizing.replicas, 3600, r.energy.pue)
    tokens = rate * plan.step_times.output_tokens_mean * 3600
    grid = r.energy.grid_g_co2e_per_kwh
    return SteadyEnergy(power, r.energy.pue, point.load, replica_w / gpus_per_replica(r), hour,
                        per_million(hour, tokens), per_million(hour * grid, tokens) if grid is not None else None)


def add_energy(plan: Plan, r: Resolved) -> Plan:
    """`plan` (simulated) with its steady energy (`Plan.energy`), or why the GPU's power is unknown
    (`Plan.energy_unknown`, where replicas were sized)."""
    sized = plan.simulation is not None and plan.simulation.replicas
    unknown = no_power_reason(r.hardware) if sized and power_by_state(r.hardware) is None else None
    return dataclasses.replace(plan, energy=steady_energy(r, plan), energy_unknown=unknown)
