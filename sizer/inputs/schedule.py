"""Traffic over time and how replicas follow it: `workload.schedule`, the scenario's `autoscaling:` and
`energy:` sections, their checks, and the schedule's rate at any second of its period.

    rate(t)   the points' rates, held from each point to the next (step) or joined by straight lines
              (linear), around the period (the last point runs on to the first of the next period)
    month m   rate(t) x (1 + growth_per_month)^m

The defaults of `autoscaling:` are assumptions, each with its source in docs/capacity-over-time.md.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

from sizer.errors import InputError
from validation.schema import field
from validation.trace_limits import MAX_TIMESTAMP_S, MAX_TRACE_REQUESTS

MAX_RATE_PER_S = 1e6                                   # as workload.arrival.rate_per_s (sizer/inputs/scenario.py)
PERIOD_S = {"day": 86_400, "week": 7 * 86_400}
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
TIME_DIGITS = re.compile(r"[0-9]{1,2}")                # hours or minutes: ASCII digits ('0²' is no time)
MAX_POINTS = 10_080                                   # one a minute over a week
MAX_GROWTH_PER_MONTH = 10.0                           # 11x a month: beyond any plan, and 36 months stay finite
MAX_MONTHS = 36
MAX_DELAY_S = 86_400.0                                # no part of a scale-up takes more than a day


@dataclass(frozen=True)
class SchedulePoint:
    at: str = field(doc="local time the rate starts: 'HH:MM' (period day) or 'Mon HH:MM' (period week)")
    rate_per_s: float = field(ge=0.0, le=MAX_RATE_PER_S, doc="requests per second from this time")


@dataclass(frozen=True)
class ScheduleTrace:
    path: str = field(doc="trace file (relative to the scenario file) whose arrivals per bin give the rate")
    format: Literal["mooncake", "csv"] = field(doc="as workload.trace.format")
    bin_s: float = field(3600.0, ge=60.0, le=MAX_TIMESTAMP_S, doc="seconds of trace per interval of the profile")
    max_requests: int | None = field(None, ge=1, le=MAX_TRACE_REQUESTS, doc="read only the first N requests")


@dataclass(frozen=True)
class ScheduleSection:
    period: Literal["day", "week"] = field("day", doc="what the points span; the profile repeats every period")
    time_zone: str = field("UTC", doc="IANA time zone of the points' local times (e.g. America/New_York)")
    interpolation: Literal["step", "linear"] = field("step", doc="step: each rate holds until the next point; "
                                                                  "linear: straight lines between points")
    points: list[SchedulePoint] | None = field(None, doc="rates through the period, in time order")
    trace: ScheduleTrace | None = field(None, doc="instead of points: a timestamped trace's arrivals per bin")
    growth_per_month: float = field(0.0, ge=-0.99, le=MAX_GROWTH_PER_MONTH,
                                    doc="traffic growth per month (0.05 = 5%), for the months ahead")
    months: int = field(12, ge=1, le=MAX_MONTHS, doc="months ahead the growth projection covers")
    interval_s: float = field(3600.0, ge=60.0, le=86_400.0, doc="length of each row of the output (default an hour)")


# target: utilisation's share of the SLO rate per replica when none is stated (an assumption: 20% headroom)
DEFAULT_TARGET_UTILISATION = 0.8


@dataclass(frozen=True)
class AutoscalingSection:
    target: Literal["slo_goodput", "utilisation"] = field(
        "slo_goodput", doc="per-replica target: slo_goodput, the highest rate per replica meeting the SLO "
                           "(sizer's goodput at the operating point); utilisation, that rate x target_utilisation "
                           "(an HPA/KEDA target value with headroom)")
    target_utilisation: float | None = field(None, gt=0.0, le=1.0, doc="utilisation: share of the SLO rate per "
                                             f"replica (default {DEFAULT_TARGET_UTILISATION}); only with that target")
    scale_ahead: bool = field(True, doc="scale from the schedule one scale-up delay ahead (a forecast, as a "
                                        "scheduled KEDA cron scaler does); false: react to the rate now (HPA)")
    min_replicas: int = field(1, ge=1, le=10_000, doc="fewest replicas kept")
    max_replicas: int = field(10_000, ge=1, le=10_000, doc="most replicas allowed")
    node_provisioning_s: float = field(300.0, ge=0.0, le=MAX_DELAY_S,
                                       doc="a new GPU node joining the cluster (docs/capacity-over-time.md)")
    image_pull_s: float = field(120.0, ge=0.0, le=MAX_DELAY_S, doc="pulling the serving image onto the new node")
    storage_bytes_per_s: float = field(1e9, ge=1e6, le=1e15,
                                       doc="read speed of the weights' storage: weights load = stored bytes / this")
    engine_start_s: float = field(30.0, ge=0.0, le=MAX_DELAY_S, doc="engine start-up besides loading weights")
    cuda_graph_capture_s: float = field(30.0, ge=0.0, le=MAX_DELAY_S, doc="CUDA-graph capture and warm-up")
    scale_down_cooldown_s: float = field(300.0, ge=0.0, le=MAX_DELAY_S,
                                         doc="a replica is removed only after this long below the target "
                                             "(Kubernetes HPA's default scale-down stabilisation window)")
    reserved_replicas: int | None = field(None, ge=0, le=10_000,
                                          doc="reserved base of the reserved + burst policy, at most max_replicas; "
                                              "default the cheapest")


@dataclass(frozen=True)
class EnergySection:
    pue: float = field(1.0, ge=1.0, le=3.0, doc="data-centre power usage effectiveness (facility / IT power)")
    grid_g_co2e_per_kwh: float | None = field(None, ge=0.0, le=2000.0,
                                              doc="grid carbon intensity; gives gCO2e per million tokens")


def point_s(at: str, period: str, file: str | None, path: str) -> float:
    """Seconds into the period of 'HH:MM' (day) or 'Mon HH:MM' (week; the day as its three letters or its name)."""
    parts = at.strip().lower().split()
    day = 0
    if period == "week":
        if len(parts) != 2 or parts[0] not in DAYS + DAY_NAMES:
            raise InputError(file, path, f"expected 'Mon HH:MM' (a day of the week, then the time), got {at!r}")
        day, parts = DAYS.index(parts[0][:3]), parts[1:]
    hm = parts[0].split(":") if len(parts) == 1 else []
    if len(hm) != 2 or not all(TIME_DIGITS.fullmatch(x) for x in hm) or int(hm[0]) > 23 or int(hm[1]) > 59:
        raise InputError(file, path, f"expected a time 'HH:MM' from 00:00 to 23:59, got {at!r}")
    return day * 86_400 + int(hm[0]) * 3600 + int(hm[1]) * 60


def check_schedule(sch: ScheduleSection, file: str | None) -> None:
    """Cross-field rules of workload.schedule: one of points or trace, times in order, a known time zone."""
    where = "workload.schedule"
    if (sch.points is None) == (sch.trace is None):
        raise InputError(file, f"{where}.points", "expected either points (a rate through the period) or trace")
    try:
        zoneinfo.ZoneInfo(sch.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InputError(file, f"{where}.time_zone", f"expected an IANA time zone such as Europe/Paris, "
                                                     f"got {sch.time_zone!r}") from None
    if sch.points is not None:
        if not 1 <= len(sch.points) <= MAX_POINTS:
            raise InputError(file, f"{where}.points", f"expected 1 to {MAX_POINTS:,} points, got {len(sch.points)}")
        times = [point_s(p.at, sch.period, file, f"{where}.points[{i}].at") for i, p in enumerate(sch.points)]
        for i in range(1, len(times)):
            if times[i] <= times[i - 1]:
                got = f"{sch.points[i].at!r} after {sch.points[i - 1].at!r}"
                raise InputError(file, f"{where}.points[{i}].at", f"expected times in increasing order, got {got}")
        if max(p.rate_per_s for p in sch.points) <= 0:
            raise InputError(file, f"{where}.points", "expected at least one rate_per_s > 0")
    if PERIOD_S[sch.period] % sch.interval_s:
        raise InputError(file, f"{where}.interval_s", f"expected a divisor of the {sch.period}'s "
                                                      f"{PERIOD_S[sch.period]:,} s, got {sch.interval_s:g}")
    # the day is priced minute by minute (sizer.sizing.day.STEP_S): rows and trace bins are whole minutes
    if sch.interval_s % 60:
        raise InputError(file, f"{where}.interval_s", f"expected whole minutes (a multiple of 60 s), "
                                                      f"got {sch.interval_s:g}")
    if sch.trace is not None and sch.trace.bin_s % 60:
        raise InputError(file, f"{where}.trace.bin_s", f"expected whole minutes (a multiple of 60 s), "
                                                       f"got {sch.trace.bin_s:g}")


@dataclass(frozen=True)
class Profile:
    """A rate through one period: knots (seconds, rate) and how they join."""
    period_s: float
    times_s: tuple[float, ...]
    rates_per_s: tuple[float, ...]
    linear: bool

    def rate_at(self, t_s: float) -> float:
        """Requests per second at `t_s` seconds into the period (wrapping around it)."""
        t = t_s % self.period_s
        ts, rs = self.times_s, self.rates_per_s
        i = _last_at_or_before(ts, t)
        if not self.linear:
            return rs[i]
        j = (i + 1) % len(ts)
        if t >= ts[i]:                          # between knot i and the next (the first of the next period)
            t0, t1 = ts[i], (ts[j] if j > i else ts[j] + self.period_s)
        else:                                   # before the first knot: from the last one of the period before
            t0, t1 = ts[i] - self.period_s, ts[j]
        if t1 - t0 <= 0:
            return rs[i]
        return rs[i] + (rs[j] - rs[i]) * (t - t0) / (t1 - t0)


def _last_at_or_before(times: tuple[float, ...], t: float) -> int:
    """Index of the last knot at or before t; before the first knot, the last one (it runs on from the last period)."""
    return (bisect_right(times, t) - 1) % len(times)


def points_profile(sch: ScheduleSection, file: str | None) -> Profile:
    times = tuple(float(point_s(p.at, sch.period, file, "workload.schedule.points")) for p in sch.points)
    return Profile(float(PERIOD_S[sch.period]), times, tuple(p.rate_per_s for p in sch.points),
                   sch.interpolation == "linear")


def grown(profile: Profile, growth_per_month: float, month: int) -> Profile:
    """The profile `month` months on: every rate x (1 + growth)^month."""
    f = (1.0 + growth_per_month) ** month
    if not math.isfinite(f):
        raise ValueError("growth overflows")
    return Profile(profile.period_s, profile.times_s, tuple(r * f for r in profile.rates_per_s), profile.linear)
