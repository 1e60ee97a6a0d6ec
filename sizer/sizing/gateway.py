"""A gateway scenario sized: each pool resolved as a scenario, the gateway simulated, the answers
per pool, per class, per route and for the whole gateway, and the cheapest sizing that meets
every class's SLO.

    pool cost per hour       replicas x GPUs per replica x price per GPU-hour (`sizer.sizing.cost`)
    external cost per hour   its price per million input and output tokens x the tokens sent to it,
                             per request of the run x the gateway's rate x 3,600
    cost per million tokens  (pools + externals per hour) / (served output tokens per hour) x 1e6
    class SLO attainment     share of the class's requests served within every target of its SLO
                             (`simulator.metrics.slo_attainment`; a rejected request misses)
    cheapest sizing          every combination of `search.replicas` per pool and `search.strong_shares`,
                             each simulated; the cheapest per hour whose classes all meet their SLO
                             (and whose served quality reaches `search.min_quality`)
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from simulator import (
    FALLBACK,
    OUTCOMES,
    REJECTED,
    SLO,
    Arrivals,
    ExternalSpec,
    GatewayConfig,
    GatewayRecords,
    GatewayResult,
    Latency,
    PoolSpec,
    RequestClass,
    Route,
    SharedPrefix,
    coded,
    reason_kind,
    simulate_gateway,
    slo_attainment,
    summarise,
    weighted_percentiles,
)
from sizer.analytic.lengths import share_longer_than
from sizer.errors import InputError
from sizer.inputs.gateway import ClassSection, GatewayScenario, GatewaySection, pool_scenario
from sizer.sizing.cost import gpus_per_replica, usd_per_hour
from sizer.sizing.goodput import SLO_PERCENTILE
from sizer.sizing.plan import SCHEMA_VERSION
from sizer.sizing.resolve import STATED_SHARE, Resolved, resolve
from sizer.sizing.simulate import PREFIX_BALANCE_SLACK, check_simulated_blocks, simulation_config
from sizer.sizing.workload import _lengths
from sizer.timing.step_model import step_model_for
from validation.errors import FieldError

# Trailing window over which an external endpoint's spend is compared with its cap per hour (assumption:
# a gateway's rate limiter looks at about the last minute).
BUDGET_WINDOW_S = 60.0

ASSUMPTIONS = (
    "difficulty routing is calibrated on the run's own traffic: exactly round(strong share x requests) of a route's "
    "hardest requests go strong (RouteLLM calibrates its threshold on a sample of traffic the same way)",
    "an external endpoint never queues: TTFT lognormal around its median, then a fixed time per output token",
    f"budget caps (each external endpoint's, and the gateway's on all of them together) apply to the variable, "
    f"per-token spend on the trailing {BUDGET_WINDOW_S:g} s scaled to an hour; a pool has none: its cost per hour "
    f"is fixed by its replicas, whatever it serves",
    "an outage window or a failed replica takes no new requests; the requests it holds finish",
    "a class's shared prefixes are its own: no two classes share a system prompt",
    "multi-LoRA adapters are not modelled behind the gateway",
)


@dataclass(frozen=True)
class PoolAnswer:
    name: str
    model: str
    gpu: str
    replicas: int
    gpus_per_replica: int
    usd_per_hour: float | None
    requests: int                      # sent to it (served or rejected by its scheduler)
    busy_share: float                  # step time / (replicas x the run's span): share of time a step runs
    mean_batch_size: float             # sequences per step, averaged over time
    prefix_cache_hit_rate: float       # prompt tokens served from the prefix cache / prompt tokens
    ttft: Latency
    tpot: Latency
    e2e: Latency
    quality: float | None


@dataclass(frozen=True)
class ExternalAnswer:
    name: str
    quality: float | None
    requests: int
    usd_per_hour: float
    ttft: Latency
    e2e: Latency


@dataclass(frozen=True)
class ClassAnswer:
    name: str
    data_class: str
    requests: int
    served: int                        # on the first choice or after falling back
    fell_back: int
    rejected: int
    fallback_rate: float               # fell back / requests
    share_routed: dict[str, float]     # target -> share of the class's requests it served
    slo_share: float | None            # share meeting every target; None without targets
    required_share: float
    slo_met: bool                      # slo_share >= required_share; without targets, the share served does;
                                       # False for a class of no requests in the run (not judged)
    e2e: Latency


@dataclass(frozen=True)
class RouteAnswer:
    name: str
    requests: int
    strong_share: float | None
    threshold: float | None            # the difficulty from which requests go strong
    fallbacks: dict[str, int]          # "target: reason" -> requests that skipped it so
    rejected: dict[str, int]           # reason -> requests


@dataclass(frozen=True)
class Candidate:
    replicas: dict[str, int]
    strong_share: float | None
    usd_per_hour: float | None
    accepted: bool                     # every class meets its SLO, and the quality floor is reached
    why_not: str                       # what an unaccepted one misses ("" when accepted)
    quality: float | None
    usd_per_million_output_tokens: float | None


@dataclass(frozen=True)
class GatewaySearch:
    best: Candidate | None             # the cheapest meeting every class's SLO (None: none does)
    tried: tuple[Candidate, ...]
    num_requests: int


@dataclass(frozen=True)
class GatewayAnswer:
    schema_version: int                # of the JSON, as a plan's (sizer.sizing.plan.SCHEMA_VERSION)
    kind: str                          # "gateway": tells this answer from a single-model plan
    scenario: str
    rate_per_s: float
    num_requests: int
    outcomes: dict[str, int]           # served | fallback | rejected -> requests
    pools: tuple[PoolAnswer, ...]
    externals: tuple[ExternalAnswer, ...]
    classes: tuple[ClassAnswer, ...]
    routes: tuple[RouteAnswer, ...]
    usd_per_hour: float | None
    output_tokens_per_s: float
    usd_per_million_output_tokens: float | None
    quality: float | None              # mean quality score over served requests whose target has one
    all_met: bool                      # every class meets its SLO
    assumptions: tuple[str, ...]
    search: GatewaySearch | None = None


@dataclass(frozen=True)
class ResolvedGateway:
    doc: GatewayScenario
    name: str
    file: str | None
    pools: dict[str, Resolved]
    config: GatewayConfig
    notes: tuple[str, ...] = ()     # what the run's figures depend on beyond ASSUMPTIONS (requests a pool refuses)


def resolve_gateway(doc: GatewayScenario, name: str, file: str | None) -> ResolvedGateway:
    """Resolve every pool as a scenario (errors name the pool's field path) and build the simulator's config."""
    g = doc.gateway
    pools, specs = {}, []
    for i, p in enumerate(g.pools):
        try:
            r = resolve(pool_scenario(p, file))
            simulation_config(r, p.deployment.replicas or 1, p.router)       # refuses a pool with no KV room
        except FieldError as e:
            if e.file != file or not e.field:
                raise
            raise InputError(file, f"gateway.pools[{i}].{e.field}", e.message) from None
        pools[p.name] = r
        f = p.failures
        specs.append(PoolSpec(p.name, r.replica, p.deployment.replicas or 1, step_model_for(r), p.router,
                              PREFIX_BALANCE_SLACK, p.limits.max_outstanding_per_replica, p.limits.max_queue_wait_s,
                              tuple((o.start_s, o.end_s) for o in p.outages),
                              f.per_replica_per_hour if f else 0.0, f.repair_s if f else 0.0))
    most = {p.name: max([*g.search.replicas.get(p.name, []), p.deployment.replicas or 1]) for p in g.pools}
    check_simulated_blocks(sum(n * pools[name].replica.num_blocks for name, n in most.items()), file, "gateway.pools")
    externals = tuple(ExternalSpec(e.name, e.ttft_p50_ms, e.ttft_sigma, e.tpot_ms, e.usd_per_million_input_tokens,
                                   e.usd_per_million_output_tokens, e.budget_usd_per_hour) for e in g.external)
    classes = tuple(RequestClass(c.name, c.share, _lengths(c.prompt_tokens), _lengths(c.output_tokens), c.data_class,
                                 c.difficulty.alpha, c.difficulty.beta, _shared_prefix(c.shared_prefix))
                    for c in g.classes)
    routes = tuple(Route(r.name, tuple(r.classes or ()), r.target,
                         r.by_difficulty.weak if r.by_difficulty else None,
                         r.by_difficulty.strong if r.by_difficulty else None,
                         r.by_difficulty.strong_share if r.by_difficulty else 0.0, tuple(r.fallback))
                   for r in g.routes)
    residency = {rule.data_class: tuple(rule.allowed) for rule in g.residency}
    arrivals = Arrivals(g.arrival.process, g.arrival.rate_per_s, g.arrival.cv)
    config = GatewayConfig(tuple(specs), externals, classes, routes, residency, arrivals, g.num_requests,
                           BUDGET_WINDOW_S, budget_usd_per_hour=g.budget_usd_per_hour)
    return ResolvedGateway(doc, name, file, pools, config, _too_long_notes(g, pools))


def _too_long_notes(g: GatewaySection, pools: dict[str, Resolved]) -> tuple[str, ...]:
    """For each class and each pool its route may send it to (target, weak, strong, fallbacks), the share of the
    class's requests whose prompt + output exceed the pool's max_model_len (closed form): the pool refuses them, as
    vLLM answers HTTP 400, and the run counts them rejected there."""
    notes = []
    for c in g.classes:
        r = next(r for r in g.routes if r.classes is None or c.name in r.classes)   # the first that takes it
        reach = (r.target, *((r.by_difficulty.weak, r.by_difficulty.strong) if r.by_difficulty else ()), *r.fallback)
        for name in dict.fromkeys(n for n in reach if n in pools):
            limit = pools[name].engine.max_model_len
            share = share_longer_than(c.prompt_tokens, c.output_tokens, limit)
            if share >= STATED_SHARE:
                notes.append(f"class {c.name}: {share:.2%} of its requests have prompt + output above pool {name}'s "
                             f"max_model_len {limit:,}: the pool refuses them (vLLM answers HTTP 400), and the run "
                             "counts them rejected there")
    return tuple(notes)


def _shared_prefix(sp) -> SharedPrefix | None:
    return SharedPrefix(sp.share, sp.tokens, sp.num_prefixes) if sp else None


def _latency(values_ms: np.ndarray) -> Latency:
    v = values_ms[~np.isnan(values_ms)]
    p50, p95, p99 = weighted_percentiles(v, np.ones(len(v)), (50.0, 95.0, 99.0))
    return Latency(p50, p95, p99, float(v.mean()) if len(v) else math.nan)


def _slo(section) -> SLO:
    """A class's targets, scored per request. A gateway keeps no token gaps per class, so a class's itl_ms is
    checked against its requests' TPOT, as tpot_ms is (the tighter of the two when both are stated;
    docs/gateway.md)."""
    per_token = [t for t in (section.tpot_ms, section.itl_ms) if t is not None]
    return SLO(ttft_ms=section.ttft_ms, tpot_ms=min(per_token) if per_token else None, e2e_ms=section.e2e_ms,
               percentile=SLO_PERCENTILE, required_share=section.required_share)


def answer(rg: ResolvedGateway, result: GatewayResult, config: GatewayConfig | None = None) -> GatewayAnswer:
    """Per pool, per class, per route and gateway-wide figures of one run (from the records' columns)."""
    cfg, g = config or rg.config, rg.doc.gateway
    recs = result.records
    n, rate = len(recs), cfg.arrivals.rate_per_s
    arrival, e2e = recs.arrival_s, recs.e2e_ms
    ends = arrival + np.nan_to_num(e2e, nan=0.0) / 1e3
    span_s = float(ends.max() - arrival.min()) if n else 0.0
    quality = {p.name: p.quality for p in g.pools} | {e.name: e.quality for e in g.external}
    per_request_hour = rate * 3600.0 / n                # a run's total, per request, at the gateway's rate, per hour
    pools = []
    for spec in cfg.pools:
        r, res = rg.pools[spec.name], result.pools[spec.name]
        m = summarise(res, itl=False)             # a pool's ITL is not among its figures
        busy = float(res.timeline.step_s.sum())
        pools.append(PoolAnswer(spec.name, r.model.name, r.hardware.id, spec.num_replicas, gpus_per_replica(r),
                                usd_per_hour(spec.num_replicas, gpus_per_replica(r), r.price_usd_per_gpu_hour),
                                m.num_requests, busy / (spec.num_replicas * span_s) if span_s > 0 else 0.0,
                                m.mean_batch_size, m.prefix_cache_hit_rate, m.ttft, m.tpot, m.e2e, quality[spec.name]))
    externals = []
    for e in cfg.externals:
        mine = recs.is_target(e.name)
        externals.append(ExternalAnswer(e.name, quality[e.name], int(mine.sum()),
                                        sum(recs.cost_usd[mine].tolist()) * per_request_hour,
                                        _latency(recs.ttft_ms[mine]), _latency(recs.e2e_ms[mine])))
    classes = [_class_answer(c, recs, coded(recs.cls, recs.class_names, c.name)) for c in g.classes]
    routes = []
    for route in cfg.routes:
        mine = coded(recs.route, recs.route_names, route.name)
        routes.append(RouteAnswer(route.name, int(mine.sum()), route.strong_share if route.strong else None,
                                  _finite(result.thresholds.get(route.name)),
                                  dict(Counter(f"{t}: {why}" for i, skipped in recs.fallbacks.items() if mine[i]
                                               for t, why in skipped)),
                                  dict(Counter(reason_kind(why) for i, why in recs.reject_reasons.items()
                                               if mine[i]))))
    costs = [p.usd_per_hour for p in pools]
    total = None if None in costs else sum(costs) + sum(e.usd_per_hour for e in externals)
    served = recs.outcome != OUTCOMES.index(REJECTED)
    out_per_s = int(recs.output_tokens[served].sum()) / n * rate
    by_target = np.array([math.nan if quality.get(t) is None else quality[t] for t in recs.target_names])
    scored = by_target[recs.target[served]]
    scored = scored[~np.isnan(scored)]
    return GatewayAnswer(
        SCHEMA_VERSION, "gateway", rg.name, rate, n, _outcomes(recs.outcome), tuple(pools),
        tuple(externals), tuple(classes), tuple(routes), total, out_per_s,
        total / (out_per_s * 3600) * 1e6 if total is not None and out_per_s > 0 else None,
        float(np.mean(scored)) if len(scored) else None, all(c.slo_met for c in classes),
        ASSUMPTIONS + rg.notes + _undrawn_notes(g, classes, n))


def _undrawn_notes(g: GatewaySection, classes: list[ClassAnswer], n: int) -> tuple[str, ...]:
    """A note for each class the run drew no request of (too few requests for its share): its SLO not judged."""
    return tuple(f"class {c.name}: none of the run's {n:,} requests drew it (share {s.share:g}); its SLO is not "
                 "judged and counts as not met: simulate more requests (gateway.num_requests, --num-requests, "
                 "gateway.search.num_requests)"
                 for c, s in zip(classes, g.classes, strict=True) if c.requests == 0)


def _outcomes(outcome: np.ndarray) -> dict[str, int]:
    """Requests per outcome, in the order each outcome first occurs."""
    codes, first, counts = np.unique(outcome, return_index=True, return_counts=True)
    return {OUTCOMES[int(codes[k])]: int(counts[k]) for k in np.argsort(first)}


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _class_answer(c: ClassSection, recs: GatewayRecords, mine: np.ndarray) -> ClassAnswer:
    n = int(mine.sum())
    slo = _slo(c.slo)
    outcome = recs.outcome[mine]
    columns = {"rejected": outcome == OUTCOMES.index(REJECTED), "ttft_ms": recs.ttft_ms[mine],
               "tpot_ms": recs.tpot_ms[mine], "e2e_ms": recs.e2e_ms[mine]}
    share = float(slo_attainment(SimpleNamespace(columns=columns), slo).mean()) if slo.has_targets and n else None
    served = int((~columns["rejected"]).sum())
    fell = int((outcome == OUTCOMES.index(FALLBACK)).sum())
    # without targets, the class is met when its required share is served at all (not rejected); a class the run
    # drew no request of is not judged, so not met (its SLO was never tried: `answer` says so)
    met = n > 0 and (share if share is not None else served / n) >= slo.required_share
    codes, counts = np.unique(recs.target[mine][~columns["rejected"]], return_counts=True)
    routed = sorted((recs.target_names[int(t)], int(k)) for t, k in zip(codes, counts, strict=True))
    return ClassAnswer(c.name, c.data_class, n, served, fell, n - served, fell / n if n else 0.0,
                       {t: k / n for t, k in routed}, share, slo.required_share, met, _latency(columns["e2e_ms"]))


def run_gateway(rg: ResolvedGateway, num_requests: int | None = None, config: GatewayConfig | None = None,
                progress: Callable[[int], None] | None = None,
                rows: Callable[[GatewayRecords, int, int], None] | None = None) -> tuple[GatewayResult, GatewayAnswer]:
    """The gateway simulated (`rows`: `simulate_gateway`'s, the records as they are final) and its answer."""
    cfg = config or rg.config
    if num_requests is not None:
        cfg = replace(cfg, num_requests=num_requests)
    result = simulate_gateway(cfg, rg.doc.gateway.seed, progress, rows)
    return result, answer(rg, result, cfg)


def with_choices(cfg: GatewayConfig, replicas: dict[str, int], strong_share: float | None) -> GatewayConfig:
    """The config with these replica counts and (on every difficulty route) this strong share."""
    pools = tuple(replace(p, num_replicas=replicas.get(p.name, p.num_replicas)) for p in cfg.pools)
    routes = tuple(replace(r, strong_share=strong_share) if r.strong and strong_share is not None else r
                   for r in cfg.routes)
    return replace(cfg, pools=pools, routes=routes)


def cheapest(rg: ResolvedGateway, progress: Callable[[int, int], None] | None = None) -> GatewaySearch:
    """Every combination of the search's replica counts and strong shares, simulated; the cheapest per hour
    meeting every class's SLO (and the quality floor); of equal cost, the lower strong share. `progress` (a
    progress display's) is told (done, total) after each configuration."""
    s, cfg = rg.doc.gateway.search, rg.config
    names = [p.name for p in cfg.pools]
    options = [s.replicas.get(p.name) or [p.num_replicas] for p in cfg.pools]
    shares = s.strong_shares or [None]
    n = s.num_requests or cfg.num_requests
    total = math.prod(len(o) for o in options) * len(shares)
    tried = []
    for counts in itertools.product(*options):
        replicas = dict(zip(names, counts, strict=True))
        for share in shares:
            _, a = run_gateway(rg, n, with_choices(cfg, replicas, share))
            misses = [f"{c.name} SLO" if c.requests else f"{c.name}: no requests" for c in a.classes
                      if not c.slo_met]
            if s.min_quality is not None and (a.quality is None or a.quality < s.min_quality):
                misses.append(f"quality below {s.min_quality:g}")
            tried.append(Candidate(replicas, share, a.usd_per_hour, not misses, ", ".join(misses), a.quality,
                                   a.usd_per_million_output_tokens))
            if progress:
                progress(len(tried), total)
    feasible = [c for c in tried if c.accepted and c.usd_per_hour is not None]
    best = min(feasible, key=lambda c: (c.usd_per_hour, c.strong_share or 0.0), default=None)
    return GatewaySearch(best, tuple(tried), n)


def plan_gateway(rg: ResolvedGateway, search: bool,
                 progress: Callable[[int, int], None] | None = None) -> GatewayAnswer:
    """The stated configuration simulated, and (with `search`) the cheapest sizing (`progress`: `cheapest`'s)."""
    _, a = run_gateway(rg)
    return replace(a, search=cheapest(rg, progress)) if search else a
