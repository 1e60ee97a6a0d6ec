"""What the sizing pipeline (`sizer.sizing.pipeline.size_deployment`) answers, as typed values.

`plan --simulate` (as `Plan.simulation`), `search` (one per configuration), `check` (the slo and
cost rules) and `report` (the answer) all show a `Sizing`, so a scenario gets the same replicas
and dollars from every command. Field names carry their units.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizer.sizing.cost import CostSummary

if TYPE_CHECKING:      # for the annotation only: a plan without --simulate need not import the simulator
    from simulator.metrics import MetricsSummary


@dataclass(frozen=True)
class GoodputSettings:
    """How goodput is found and replicas searched: one object, the same defaults for every command.

    The replica count is decided by simulations of the scenario's own request count at the
    operating point; these settings give the goodput shown and the count the search starts from.
    600 requests and a 5% bracket: 300-request probes put deepseek-v3-h200-tp8's goodput 9%
    above 600-request ones (1.72 vs 1.58 req/s, docs/reports.md), and a 96-configuration search still runs in under
    a minute on 2 cores (benchmarks/search_speed.py).
    """
    num_requests: int = 600            # simulated requests per probed rate
    rate_tolerance: float = 0.05       # bisection stops when the bracket's ratio is within 1 + this
    low_rate_fraction: float = 1 / 64  # the lowest rate tried, as a share of the analytic bound
    max_extra_replicas: int = 5        # most replicas added one by one above ceil(target / goodput) while missed
    max_replica_growth: int = 4        # then doubled, to this many times ceil(target / goodput), while still missed


@dataclass(frozen=True)
class PoolLoad:
    """How busy one pool of a simulated replica was, per engine replica of it (what its GPUs' power is priced by,
    sizer.analytic.energy): the replica's one pool, or a disaggregated replica's prefill or decode pool."""
    pool: str                          # "replica" (one pool), "prefill" or "decode"
    engine_replicas: int               # of the pool, each on the deployment's GPUs per engine (TP x PP x DP)
    busy_share: float                  # the pool's step time / (engine_replicas x the run's span: first send to
                                       # last finished token), at most 1
    compute_bound_share: float         # of the pool's step time, in steps of more new tokens than the ridge


@dataclass(frozen=True)
class SLOProbe:
    """One replica simulated at one rate, scored against the SLO (each target on its own metric)."""
    rate_per_s: float
    metrics: MetricsSummary            # percentiles, throughput, slo_share (a rejected request meets no target)
    share_by_target: dict[str, float]  # "TTFT"/"TPOT"/"E2E" -> share of requests meeting it alone; "ITL": of gaps
    load: tuple[PoolLoad, ...] | None = None   # per pool of the replica (probe_slo: the sizing's operating points)

    @property
    def share_met(self) -> float | None:
        """Share of requests meeting every target; None without targets."""
        return self.metrics.slo_share

    @property
    def met(self) -> bool | None:
        return self.metrics.slo_met

    @property
    def binding(self) -> str:
        """The stated target the fewest requests meet."""
        return min(self.share_by_target, key=self.share_by_target.get) if self.share_by_target else "none"

    def p95_ms(self, metric: str) -> float:
        """p95 of "ttft", "tpot", "e2e", "itl" or "queue"."""
        return getattr(self.metrics, metric).p95_ms


class SizingStatus(str, enum.Enum):
    MET = "met"                                # the deployment meets the SLO at the target rate
    MISSED = "missed"                          # its replicas (stated, or the most tried) miss the SLO
    NO_RATE = "no_rate"                        # no rate meets the SLO on one replica: more replicas do not help
    TOO_MANY_REPLICAS = "too_many_replicas"    # only more replicas than allowed (search --max-replicas) would
    NO_SLO = "no_slo"                          # no targets: the stated or memory-sized replicas, simulated
    DOES_NOT_FIT = "does_not_fit"              # not simulated: the model does not fit in memory


@dataclass(frozen=True)
class Sizing:
    status: SizingStatus
    verdict: str                               # one line; every command prints these words
    slo_met: bool | None                       # None without targets or when not simulated
    settings: GoodputSettings
    target_rate_per_s: float                   # the whole deployment's arrival rate
    required_share: float
    goodput_per_replica_per_s: float | None    # None: no targets or not simulated; 0: no rate meets the SLO
    binding_target: str | None                 # what binds above goodput: TTFT, TPOT, E2E; "none": met at the bound
    replicas: int | None                       # as deployed: the stated count, else the fewest that meet the SLO
    cost: CostSummary | None                   # of `replicas`
    replicas_for_slo: int | None               # the fewest replicas whose operating point meets the SLO
    usd_per_hour_for_slo: float | None         # their cost per hour
    operating_point: SLOProbe | None           # one replica at target rate / replicas, the scenario's request count
    notes: tuple[str, ...]
    share_met_for_slo: float | None = None     # share meeting every target at replicas_for_slo's operating point

    @property
    def goodput_words(self) -> str:
        """What the goodput probes found, and where the operating point (the scenario's own request count, a longer
        run) meets the SLO at a higher rate per replica, that too: never a goodput the answer's replicas run above
        without saying so."""
        probes = f"the goodput probes ({self.settings.num_requests:,} requests a rate) found "
        text = probes + (f"one replica meets the SLO up to {self.goodput_per_replica_per_s:,.2f} requests/s"
                         if self.goodput_per_replica_per_s else "no rate one replica serves within the SLO")
        p = self.operating_point
        if p is not None and p.met and p.rate_per_s > self.goodput_per_replica_per_s:
            text += (f"; the operating point ({p.metrics.num_requests:,} requests) meets it at {p.rate_per_s:,.2f} "
                     "requests/s per replica")
        return text

    @property
    def suggestion(self) -> str | None:
        """What would meet the SLO when it is missed, in the words every command prints; None otherwise."""
        if self.status is SizingStatus.NO_RATE:
            return (f"more replicas do not help: the {self.binding_target} target is missed even at low load; "
                    f"use faster GPUs or more tensor parallelism (`sizer search`), or relax the "
                    f"{self.binding_target} target")
        if self.status is SizingStatus.MISSED and self.replicas_for_slo:
            return f"{self.replicas_for_slo} replicas meet it"
        if self.status in (SizingStatus.MISSED, SizingStatus.TOO_MANY_REPLICAS):
            return "`sizer search` finds faster configurations"
        return None
