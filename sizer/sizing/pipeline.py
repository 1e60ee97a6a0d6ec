"""The sizing pipeline: one function sizes a resolved deployment for every command.

    goodput per replica  highest rate at which `slo.required_share` of requests meet every target
                         (`sizer.sizing.goodput`: bisection over short simulations)
    operating point      one replica at target rate / replicas with the scenario's own
                         `workload.num_requests` (Poisson traffic split at random stays Poisson)
    replicas             the scenario's; else the fewest whose operating point meets the SLO,
                         searched from ceil(target rate / goodput): fewer while they still meet it,
                         more while they miss
    cost                 `sizer.sizing.cost` (cost per token at target rate x mean output tokens)
    status and verdict   met, missed, no rate meets the SLO, too many replicas, no SLO, does not fit

`plan --simulate`, `search`, `check` and `report` call `size_deployment` with the same
`GoodputSettings`, so the same scenario gets the same replicas and dollars from each.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager

from sizer.sizing.cost import cost_summary, gpus_per_replica, usd_per_hour
from sizer.sizing.goodput import Goodput, goodput_rate, probe_slo, rate_bound_per_s, replicas_for, slo_of
from sizer.sizing.plan import Plan, closed_loop_clients, slo_targets
from sizer.sizing.resolve import Resolved
from sizer.sizing.result import GoodputSettings, Sizing, SizingStatus, SLOProbe
from sizer.sizing.workload import requests_of
from sizer.words import count


def method_notes(settings: GoodputSettings, num_requests: int) -> tuple[str, ...]:
    """How every command sizes, in the words each prints."""
    return (f"goodput: bisection over simulations of {settings.num_requests} requests per rate, to "
            f"{settings.rate_tolerance:.0%}",
            f"replicas: the fewest whose operating point meets the SLO (one replica at target rate / replicas, the "
            f"scenario's {num_requests:,} requests; Poisson traffic split at random stays Poisson), from "
            f"ceil(target rate / goodput); {settings.max_extra_replicas} more one by one, then doubled to "
            f"{settings.max_replica_growth}x that, while the SLO is missed",
            "cost per million output tokens at the target rate x mean output tokens")


# An operating point of at least this many requests (the scenario's workload.num_requests) shows its own progress,
# request by request, as a part of the sizing's display (sizer.cli.progress.Display.part): a million requests take
# a minute or more; fewer than this take a second or so, counted as one simulation like a goodput probe
LONG_SIMULATION_REQUESTS = 10_000


class _OperatingPoints:
    """One replica at target rate / replicas with the scenario's request count, each count simulated once
    (`simulated`, a progress display's, called after each). `part` (the display's `Display.part`, if it has one):
    each long one's requests shown as they finish, named "operating point K (N replicas)"."""

    def __init__(self, r: Resolved, rate_per_s: float, simulated: Callable[[], None] | None = None,
                 part: Callable[[str, str, int], AbstractContextManager[Callable[[int], None]]] | None = None):
        self.r, self.rate_per_s, self.seen, self.simulated = r, rate_per_s, {}, simulated
        self.requests = requests_of(r)          # workload.num_requests, or the requests a trace replays
        # a trace's run: the requests it replays (None), read as the plan read them (a sweep worker's shipped trace)
        self.n = None if r.workload.trace is not None else self.requests
        self.part = part if self.requests >= LONG_SIMULATION_REQUESTS else None

    def __call__(self, replicas: int) -> SLOProbe:
        if replicas not in self.seen:
            rate = self.rate_per_s / replicas
            if self.part is None:
                self.seen[replicas] = probe_slo(self.r, rate, self.n)
            else:
                with self.part(f"operating point {len(self.seen) + 1} ({count(replicas, 'replica')})", "requests",
                               self.requests) as requests_done:
                    self.seen[replicas] = probe_slo(self.r, rate, self.n, requests_done)
            if self.simulated:
                self.simulated()
        return self.seen[replicas]


# Replicas removed one at a time before the search bisects instead: the walk's length would
# otherwise grow with the target rate (a million requests a second is thousands of replicas).
LINEAR_STEPS = 16


def _fewest_meeting(at: _OperatingPoints, meeting: int, missing: int = 0) -> int:
    """The fewest replicas in (missing, meeting] that meet, bisected (meeting meets, missing misses or is 0; fewer
    replicas each see a higher rate, so meeting is taken as monotone): log2(meeting - missing) probes."""
    lo, hi = missing, meeting
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).met:
            hi = mid
        else:
            lo = mid
    return hi


def _fewest_replicas(at: _OperatingPoints, goodput: Goodput, settings: GoodputSettings,
                     max_replicas: int | None = None) -> int:
    """The fewest replicas whose operating point meets the SLO, searched from ceil(target / goodput): one fewer
    while that still meets (bisected after LINEAR_STEPS), one more while it misses (`settings.max_extra_replicas`
    more), then doubled while it still misses, to `settings.max_replica_growth` x the start, and bisected back
    (the last tried when none meets; no further than `max_replicas`). The short probes only choose where to start,
    so the count does not depend on their settings; where they are optimistic (a goodput probe shorter than the
    operating point), the doubling still finds the count."""
    start = replicas = replicas_for(at.rate_per_s, goodput.rate_per_s)
    if at(replicas).met:
        steps = 0
        while replicas > 1 and at(replicas - 1).met:
            replicas -= 1
            steps += 1
            if steps == LINEAR_STEPS:             # far above the fewest: bisect the rest
                return _fewest_meeting(at, replicas)
        return replicas
    cap = max(start + settings.max_extra_replicas, settings.max_replica_growth * start)
    if max_replicas:                              # search: a count above its cap is refused anyway
        cap = min(cap, max_replicas)
    for _ in range(settings.max_extra_replicas):
        if replicas >= cap:
            return replicas
        replicas += 1
        if at(replicas).met:
            return replicas
    while replicas < cap:
        missed, replicas = replicas, min(cap, 2 * replicas)
        if at(replicas).met:                      # between the last that missed and this one
            return _fewest_meeting(at, replicas, missed)
    return replicas


def _verdict(status: SizingStatus, replicas: int | None, point: SLOProbe | None, needed: int | None,
             goodput: Goodput | None, max_replicas: int | None, server: bool = False, targets: str = "") -> str:
    """One line, printed by every command, with the targets it was judged against. `server`: one llama.cpp or
    Ollama server, not replicas to size."""
    if status is SizingStatus.DOES_NOT_FIT:
        return "not simulated: the model does not fit in memory"
    if status is SizingStatus.NO_RATE:
        return (f"no request rate meets the SLO ({targets}) on one replica: {goodput.binding} is missed even at "
                f"{goodput.ceiling_per_s:.3g} req/s")
    if status is SizingStatus.TOO_MANY_REPLICAS and goodput.rate_per_s > 0:
        return (f"the SLO needs more than {max_replicas} replicas: one replica meets it up to "
                f"{goodput.rate_per_s:.3g} req/s")
    if status is SizingStatus.TOO_MANY_REPLICAS:       # lower rates were not tried: whether more replicas help is open
        return (f"the SLO is not met on {max_replicas} replicas or fewer: {goodput.binding} is missed at "
                f"{goodput.ceiling_per_s:.3g} req/s per replica (lower rates not tried)")
    where = f"at {point.rate_per_s:.3g} req/s per replica on {count(replicas, 'replica')}"
    if status is SizingStatus.NO_SLO:
        return f"no SLO targets; simulated {where}"
    share = f"{point.share_met:.1%} of requests meet every target ({targets} required) {where}"
    if point.metrics.itl_share is not None:
        share += f", {point.metrics.itl_share:.1%} of token gaps within the ITL target"
    if status is SizingStatus.MET:
        return f"SLO met: {share}"
    if server:
        return f"SLO missed: {share}; one server meets it up to {goodput.rate_per_s:.3g} req/s"
    return f"SLO missed: {share}; " + (f"{needed} replicas meet it" if needed else "more replicas than tried needed")


def _source(rate_per_s: float, goodput: Goodput, replicas: int, met: bool) -> str:
    """Where an automatic replica count came from."""
    first = replicas_for(rate_per_s, goodput.rate_per_s)
    text = (f"goodput {goodput.rate_per_s:.2f} req/s per replica: ceil({rate_per_s:g} / {goodput.rate_per_s:.2f}) = "
            f"{first}")
    if replicas == first:
        return text + (", confirmed at the operating point" if met else ", missing the SLO at the operating point")
    if not met:
        return text + f"; {replicas} still miss the SLO at the operating point"
    why = "fewer also meet the SLO" if replicas < first else "fewer miss the SLO"
    return text + f"; {replicas} at the operating point ({why})"


def closed_loop_note(r: Resolved, rate_per_s: float) -> str | None:
    """How a closed loop is sized (the goodput probes and replica counts are rates), None for open arrivals."""
    a = r.workload.arrival
    if r.workload.trace is not None or a.process != "closed":
        return None
    return (f"closed loop of {closed_loop_clients(r.workload):,} clients sized as Poisson arrivals at the rate they "
            f"would send, {rate_per_s:.3g} req/s (concurrency / (time in system + think time), the plan's Little's-law "
            "estimate): goodput, replicas and the SLO's verdict are for that open-loop rate; `sizer simulate` runs the "
            "loop itself")


def _notes(goodput: Goodput | None, source: str | None, point: SLOProbe | None, settings: GoodputSettings,
           plan: Plan, r: Resolved) -> tuple[str, ...]:
    notes = [note] if (note := closed_loop_note(r, plan.capacity.arrival_rate_per_s)) and goodput else []
    if goodput and goodput.rate_per_s:
        above = ("the analytic bound itself meets it" if goodput.binding == "none"
                 else f"at {goodput.ceiling_per_s:.2f} req/s {goodput.binding} binds")
        notes.append(f"goodput: {goodput.rate_per_s:.2f} req/s per replica, the highest rate one replica serves within "
                     f"the SLO (simulations of {settings.num_requests} requests, to {settings.rate_tolerance:.0%}); "
                     f"{above}")
    if source:
        notes.append(f"replicas: {source}")
    if point is not None:
        m = point.metrics
        notes.append(f"operating point: {m.num_requests:,} requests; prefix-cache hit rate "
                     f"{m.prefix_cache_hit_rate:.1%}, preemptions {m.num_preemptions}, mean batch "
                     f"{m.mean_batch_size:.1f}, mean KV use {m.mean_kv_usage:.1%} (peak {m.peak_kv_usage:.1%})")
    notes.append(f"step times: {plan.step_times.model}")
    return tuple(notes)


def size_deployment(r: Resolved, plan: Plan, settings: GoodputSettings = GoodputSettings(),
                    max_replicas: int | None = None, progress: Callable[[int], None] | None = None) -> Sizing:
    """Goodput, replicas, cost and verdict of `plan`'s deployment at the scenario's rate.

    `max_replicas` (search): rates below target / max_replicas are not tried, and a deployment
    that would need more replicas is TOO_MANY_REPLICAS. It never changes a goodput that is found.
    `progress` (a progress display's) is told the count of simulations run after each; a display with parts
    (sizer.cli.progress.Display) also shows each long operating point's requests as they finish.
    """
    rate = plan.capacity.arrival_rate_per_s
    slo, stated = slo_of(r), r.deployment.replicas
    # llama.cpp and Ollama serve on the machine they run on: one server unless the scenario states more
    server = r.slots is not None and not stated
    if server:
        stated = 1
    common = dict(settings=settings, target_rate_per_s=rate, required_share=slo.required_share)
    if not plan.fits:
        return Sizing(SizingStatus.DOES_NOT_FIT, _verdict(SizingStatus.DOES_NOT_FIT, None, None, None, None, None),
                      None, **common, goodput_per_replica_per_s=None, binding_target=None, replicas=None, cost=None,
                      replicas_for_slo=None, usd_per_hour_for_slo=None, operating_point=None, notes=())
    runs = itertools.count(1)
    simulated = (lambda: progress(next(runs))) if progress else None
    at = _OperatingPoints(r, rate, simulated, getattr(progress, "part", None))
    goodput = needed = None
    if not slo.has_targets:                  # the stated replicas, else enough KV for Little's law (the plan's)
        replicas, source, status = plan.cost.replicas, plan.cost.replicas_source, SizingStatus.NO_SLO
    else:
        replicas, source = (stated, plan.cost.replicas_source if server else "scenario") if stated else (None, None)
        upper = rate_bound_per_s(plan)
        floor = rate / max_replicas if max_replicas else 0.0
        goodput = goodput_rate(r, upper, settings, floor, simulated)
        if goodput.rate_per_s > 0:
            tried = _fewest_replicas(at, goodput, settings, max_replicas)
            needed = tried if at(tried).met else None
            if not stated:
                replicas, source = tried, _source(rate, goodput, tried, needed is not None)
        if (max_replicas and not stated and goodput.rate_per_s == 0
                and floor > upper * settings.low_rate_fraction and at(max_replicas).met):
            # the short probes missed at target / max_replicas, the lowest rate search tries, yet the operating point
            # of max_replicas meets: the count is the operating point's, as without the cap (whose goodput search
            # would have gone lower); one replica meets the SLO at least at that point's rate
            needed = replicas = _fewest_meeting(at, max_replicas)
            goodput = dataclasses.replace(goodput, rate_per_s=rate / replicas)
            source = (f"{replicas} at the operating point, the fewest of at most max_replicas {max_replicas} (the "
                      "goodput probes missed at target / max_replicas)")
        if max_replicas and not stated and (replicas or 0) > max_replicas:
            status, replicas, source = SizingStatus.TOO_MANY_REPLICAS, None, None
        elif replicas and at(replicas).met:
            status = SizingStatus.MET
        elif goodput.rate_per_s > 0:
            status = SizingStatus.MISSED
        elif floor > upper * settings.low_rate_fraction:
            status = SizingStatus.TOO_MANY_REPLICAS
        else:
            status = SizingStatus.NO_RATE
    point = at(replicas) if replicas else None
    price, per_replica = r.price_usd_per_gpu_hour, gpus_per_replica(r)
    return Sizing(
        status, _verdict(status, replicas, point, needed, goodput, max_replicas, server, slo_targets(r)),
        None if status is SizingStatus.NO_SLO else status is SizingStatus.MET, **common,
        goodput_per_replica_per_s=goodput.rate_per_s if goodput else None,
        binding_target=goodput.binding if goodput else None, replicas=replicas,
        cost=cost_summary(r, replicas, source, rate, plan.step_times.output_tokens_mean) if replicas else None,
        # one server: no replica count to suggest (the verdict gives the rate it meets the SLO up to)
        replicas_for_slo=None if server else needed,
        usd_per_hour_for_slo=usd_per_hour(needed, per_replica, price) if needed and not server else None,
        operating_point=point, notes=_notes(goodput, source, point, settings, plan, r),
        share_met_for_slo=at(needed).share_met if needed and not server else None)


def add_simulation(plan: Plan, r: Resolved, settings: GoodputSettings = GoodputSettings(),
                   progress: Callable[[int], None] | None = None) -> Plan:
    """`plan` with its simulated section (`Plan.simulation`), the sized replicas and their cost, and the verdict."""
    sizing = size_deployment(r, plan, settings, progress=progress)
    return dataclasses.replace(plan, simulation=sizing, cost=sizing.cost,
                               verdict=f"{plan.verdict}; {sizing.verdict}")
