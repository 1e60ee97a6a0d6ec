"""What the day over a schedule answers (sizer.sizing.day.plan_day), as typed values with units in field names:
`Plan.day`, shown by `plan --simulate` (terminal, --json) and the report."""

from __future__ import annotations

from dataclasses import dataclass

from sizer.analytic.energy import PowerByState
from sizer.sizing.autoscale import ScaleUpDelay
from sizer.sizing.result import PoolLoad


@dataclass(frozen=True)
class CurvePoint:
    rate_per_s: float                # per replica
    slo_share: float
    busy_share: float                # share of time the replica runs steps
    compute_bound_share: float       # share of that time in steps of more tokens than the ridge


@dataclass(frozen=True)
class Interval:
    start: str                       # local time, 'HH:MM' (week: 'Mon HH:MM')
    rate_per_s: float                # mean over the interval
    replicas_needed: int             # most the rate needs at the SLO rate per replica
    replicas_serving_min: int
    replicas_serving_max: int
    gpu_hours: float                 # paid, autoscaled
    slo_share: float                 # requests meeting every target, autoscaled
    simulated: bool                  # part of the interval was a short run, simulated
    energy_kwh: float


@dataclass(frozen=True)
class Window:
    start: str
    end: str
    replicas_before: int
    replicas_after: int
    requests: int
    slo_share: float


@dataclass(frozen=True)
class PolicyCost:
    name: str                        # static peak | autoscaled | reserved base + burst
    gpu_hours_per_period: float
    usd_per_month: float | None
    slo_share: float                 # over the period, request-weighted
    meets_slo: bool
    note: str


@dataclass(frozen=True)
class DayEnergy:
    power: PowerByState
    pue: float
    kwh_per_period: float
    kwh_per_million_output_tokens: float | None
    g_co2e_per_million_output_tokens: float | None
    static_peak_kwh_per_period: float


@dataclass(frozen=True)
class GrowthMonth:
    month: int
    peak_rate_per_s: float
    peak_replicas: int
    autoscaled_usd_per_month: float | None


@dataclass(frozen=True)
class DayPlan:
    period: str
    time_zone: str
    step_s: float
    interval_s: float
    peak_rate_per_s: float
    peak_replicas: int                          # the steady pipeline's at the peak: static provisioning
    slo_rate_per_replica_per_s: float
    target_per_replica_per_s: float
    scale_up_delay: ScaleUpDelay
    scale_ahead: bool
    curve: tuple[CurvePoint, ...]
    intervals: tuple[Interval, ...]
    windows: tuple[Window, ...]
    policies: tuple[PolicyCost, ...]
    cheapest_meeting_slo: str | None
    requests_per_period: float
    output_tokens_per_period: float
    energy: DayEnergy | None
    growth: tuple[GrowthMonth, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class SteadyEnergy:
    """A steady plan's energy at its operating point (`plan --simulate`): one replica simulated at target rate /
    replicas, each pool's busy and compute-bound shares priced by sizer.analytic.energy."""
    power: PowerByState
    pue: float
    pools: tuple[PoolLoad, ...]                 # the replica's one pool, or its prefill and decode pools
    watts_per_gpu: float                        # the mean over the replica's GPUs
    kwh_per_hour: float                         # every GPU of every replica, PUE included
    kwh_per_million_output_tokens: float | None
    g_co2e_per_million_output_tokens: float | None
