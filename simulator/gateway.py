"""Several model pools behind one gateway: request classes, routing, residency and fallbacks.

Each request draws a class (by share), its lengths from the class's distributions, a difficulty
score in [0, 1] (a beta distribution) and carries the class's data class. The first route that
takes its class names the first choice:

- a pool or external endpoint (`target`), or
- by difficulty (a RouteLLM-style router): the `strong_share` hardest requests of the route go to
  the strong target, the rest to the weak one; the threshold is the difficulty that splits them.

The gateway then walks the choice and the route's fallback chain. A target is skipped when the
request's data class may not reach it (residency), or the target is:

- unavailable: inside one of its outage windows, or every replica down (each replica fails as a
  Poisson process at `failures_per_replica_hour` and stays down `repair_s`; a down replica takes
  no new requests and finishes those it holds);
- at capacity: its least loaded up replica holds `max_outstanding_per_replica` requests, or the
  oldest request waiting on every up replica has waited `max_queue_wait_s`;
- over budget (external endpoints): the spend of the trailing `budget_window_s`, this request
  included, scaled to an hour, is above the endpoint's `budget_usd_per_hour`, or the spend of every
  endpoint together is above the gateway's `budget_usd_per_hour` (a pool's cost is fixed by its replicas).

A pool request goes to the pool's replicas through the pool's router (one simpy event per engine
step, as in `simulator.cluster`); an external endpoint answers after a sampled latency, at its
price per million tokens. Every request ends exactly once: served by its first choice, served
after falling back, or rejected (no target left, or the pool's scheduler refused it), and its
`GatewayRecord` says which, where, and every target skipped and why.
"""

from __future__ import annotations

import bisect
import gc
import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import simpy

from simulator.cluster import Cluster, Router
from simulator.live_rows import LiveRecorder, Rows, every_chunk
from simulator.records import Recorder, SimulationResult
from simulator.replica import ReplicaConfig
from simulator.request import Request
from simulator.run import COLLECT_AFTER_REQUESTS
from simulator.step_batch import StepTimeModel
from simulator.workload import Arrivals, Lengths, SharedPrefix

# Outcomes of a request at the gateway.
SERVED, FALLBACK, REJECTED = "served", "fallback", "rejected"
OUTCOMES = (SERVED, FALLBACK, REJECTED)        # GatewayRecords.outcome codes
# Why a target was skipped.
RESIDENCY, OUTAGE, FAILURES, OUTSTANDING, QUEUE_WAIT, BUDGET, GATEWAY_BUDGET = (
    "residency", "outage", "replicas down", "capacity (outstanding)", "capacity (queue wait)", "over budget",
    "over budget (gateway)")


@dataclass(frozen=True)
class PoolSpec:
    """One model deployment behind the gateway: its replicas, router and availability limits."""
    name: str
    replica: ReplicaConfig
    num_replicas: int
    step_model: StepTimeModel
    router: str                                            # simulator.cluster.ROUTERS
    balance_slack: int                                     # prefix_aware: extra requests tolerated for a hit
    max_outstanding_per_replica: int | None = None
    max_queue_wait_s: float | None = None
    outages_s: tuple[tuple[float, float], ...] = ()       # [start, end) windows
    failures_per_replica_hour: float = 0.0
    repair_s: float = 0.0


@dataclass(frozen=True)
class ExternalSpec:
    """A hosted endpoint: lognormal time to first token (median and sigma of its log), a fixed time
    per output token after it, prices per million tokens, an optional spend cap."""
    name: str
    ttft_p50_ms: float
    ttft_sigma: float
    tpot_ms: float
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    budget_usd_per_hour: float | None = None

    def cost_usd(self, prompt_tokens: int, output_tokens: int) -> float:
        return (prompt_tokens * self.usd_per_million_input_tokens
                + output_tokens * self.usd_per_million_output_tokens) / 1e6


@dataclass(frozen=True)
class RequestClass:
    name: str
    share: float
    prompt: Lengths
    output: Lengths
    data_class: str
    difficulty_alpha: float = 1.0        # beta(alpha, beta) difficulty; (1, 1) is uniform on [0, 1]
    difficulty_beta: float = 1.0
    shared_prefix: SharedPrefix | None = None    # the class's own system prompts (for prefix-aware routing)


@dataclass(frozen=True)
class Route:
    name: str
    classes: tuple[str, ...]             # the classes it takes; empty: every class
    target: str | None = None            # one first choice ...
    weak: str | None = None              # ... or by difficulty: the strong_share hardest go to `strong`
    strong: str | None = None
    strong_share: float = 0.0
    fallback: tuple[str, ...] = ()

    def takes(self, class_name: str) -> bool:
        return not self.classes or class_name in self.classes


@dataclass(frozen=True)
class GatewayConfig:
    pools: tuple[PoolSpec, ...]
    externals: tuple[ExternalSpec, ...]
    classes: tuple[RequestClass, ...]
    routes: tuple[Route, ...]
    residency: dict[str, tuple[str, ...]]     # data class -> the targets it may reach; absent: any
    arrivals: Arrivals
    num_requests: int
    budget_window_s: float                    # an external endpoint's spend is compared with its cap over this
    fast_forward: bool = True                 # as SimulationConfig: runs of identical decode steps in one event
    check_invariants: bool = False            # verify KV block conservation after every event (slow)
    budget_usd_per_hour: float | None = None  # a cap on every external endpoint's spend together (same window)

    def __post_init__(self) -> None:
        if self.num_requests < 1 or not self.classes or not math.isclose(sum(c.share for c in self.classes), 1.0):
            raise ValueError("a gateway needs num_requests >= 1 and class shares summing to 1")


@dataclass(frozen=True, slots=True)
class GatewayRecord:
    """What happened to one request, for audit."""
    request_id: int
    class_name: str
    data_class: str
    difficulty: float
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    route: str
    first_choice: str
    target: str                          # who served it (or, rejected by a pool, that pool); "" if none
    fallbacks: tuple[tuple[str, str], ...]   # (target skipped, why), in order
    outcome: str                         # served | fallback | rejected
    reject_reason: str
    ttft_ms: float                       # NaN unless served
    tpot_ms: float
    e2e_ms: float
    cost_usd: float                      # an external endpoint's price for it; 0 on a pool (priced per hour)


@dataclass(frozen=True)
class GatewayRecords:
    """Every request's `GatewayRecord`, held as columns: a million requests take about 100 MB, not the
    gigabytes a million objects would. Index or iterate it for records; read the columns for figures."""
    class_names: tuple[str, ...]         # the config's classes, routes and targets that the codes below index
    data_classes: tuple[str, ...]
    route_names: tuple[str, ...]
    target_names: tuple[str, ...]        # "" (none) first
    cls: np.ndarray                      # per request, by id: class code
    difficulty: np.ndarray
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    route: np.ndarray                    # route code; -1: none
    first_choice: np.ndarray             # target codes
    target: np.ndarray
    outcome: np.ndarray                  # code in OUTCOMES
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    e2e_ms: np.ndarray
    cost_usd: np.ndarray
    fallbacks: dict[int, tuple[tuple[str, str], ...]]    # request id -> targets skipped; absent: none
    reject_reasons: dict[int, str]                       # request id -> why it was rejected

    def __len__(self) -> int:
        return len(self.cls)

    def __getitem__(self, i: int) -> GatewayRecord:
        c, route = int(self.cls[i]), int(self.route[i])
        return GatewayRecord(i, self.class_names[c], self.data_classes[c], float(self.difficulty[i]),
                             float(self.arrival_s[i]), int(self.prompt_tokens[i]), int(self.output_tokens[i]),
                             self.route_names[route] if route >= 0 else "",
                             self.target_names[self.first_choice[i]], self.target_names[self.target[i]],
                             self.fallbacks.get(i, ()), OUTCOMES[self.outcome[i]], self.reject_reasons.get(i, ""),
                             float(self.ttft_ms[i]), float(self.tpot_ms[i]), float(self.e2e_ms[i]),
                             float(self.cost_usd[i]))

    def __iter__(self) -> Iterator[GatewayRecord]:
        return (self[i] for i in range(len(self)))

    def is_target(self, name: str) -> np.ndarray:
        """Per request: was it served by (or rejected by the pool) `name`?"""
        return coded(self.target, self.target_names, name)


def coded(codes: np.ndarray, names: tuple[str, ...], name: str) -> np.ndarray:
    """Per request: is its code (a target's, a class's, a route's) the one of `name`?"""
    return codes == names.index(name) if name in names else np.zeros(len(codes), bool)


@dataclass
class GatewayResult:
    records: GatewayRecords                      # by request id
    pools: dict[str, SimulationResult]           # each pool's own run (its requests only)
    thresholds: dict[str, float]                 # difficulty route -> the difficulty from which requests go strong


@dataclass
class _Drawn:
    arrival_s: np.ndarray
    cls: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    difficulty: np.ndarray
    prefix: np.ndarray          # which of its class's shared prefixes a request opens with; -1: none


# Content ids of class i's prefixes start at i x PREFIX_IDS_PER_CLASS, so classes never share one.
PREFIX_IDS_PER_CLASS = 1 << 32


def _draw(cfg: GatewayConfig, seed: int) -> _Drawn:
    """Arrivals, classes, lengths and difficulties, each from its own stream of one seed."""
    n, k = cfg.num_requests, len(cfg.classes)
    rngs = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence([seed, 7]).spawn(2 + 4 * k)]
    arrival_s = np.cumsum(cfg.arrivals.gaps_s(n, rngs[0]))
    cls = rngs[1].choice(k, n, p=np.array([c.share for c in cfg.classes]) / sum(c.share for c in cfg.classes))
    prompt, output, difficulty = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n)
    prefix = np.full(n, -1, np.int64)
    for i, c in enumerate(cfg.classes):
        mine = cls == i
        m = int(mine.sum())
        prompt[mine] = c.prompt.draw(m, rngs[2 + 4 * i])
        output[mine] = c.output.draw(m, rngs[3 + 4 * i])
        difficulty[mine] = rngs[4 + 4 * i].beta(c.difficulty_alpha, c.difficulty_beta, m)
        sp, rng = c.shared_prefix, rngs[5 + 4 * i]
        if sp is not None:
            has, which = rng.random(m) < sp.share, rng.integers(0, sp.num_prefixes, m)
            prefix[mine] = np.where(has, i * PREFIX_IDS_PER_CLASS + which, -1)
    return _Drawn(arrival_s, cls, prompt, output, difficulty, prefix)


def _first_choices(cfg: GatewayConfig, d: _Drawn) -> tuple[list[int], list[str], dict[str, float]]:
    """Each request's route (-1: none) and first choice; each difficulty route's threshold.
    A difficulty route sends exactly round(strong_share x its requests) of its hardest requests strong."""
    names = [c.name for c in cfg.classes]
    route_of = [next((j for j, r in enumerate(cfg.routes) if r.takes(names[c])), -1) for c in d.cls.tolist()]
    choice = [(cfg.routes[j].target or cfg.routes[j].weak or "") if j >= 0 else "" for j in route_of]
    thresholds = {}
    for j, r in enumerate(cfg.routes):
        if r.strong is None:
            continue
        mine = np.flatnonzero(np.asarray(route_of) == j)
        k = round(r.strong_share * len(mine))
        hardest = mine[np.argsort(-d.difficulty[mine], kind="stable")[:k]]
        for i in hardest.tolist():
            choice[i] = r.strong
        thresholds[r.name] = float(d.difficulty[hardest].min()) if k else math.inf
    return route_of, choice, thresholds


def _floats(values: np.ndarray, chunk: int = 1 << 14) -> Iterator[float]:
    """The array's values as Python floats, a chunk at a time (a million arrival times as one list are 32 MB)."""
    for start in range(0, len(values), chunk):
        yield from values[start:start + chunk].tolist()


def _down_windows(pool: PoolSpec, horizon_s: float, rng: np.random.Generator) -> list[list[tuple[float, float]]]:
    """Per replica, the windows it is down: failures at `failures_per_replica_hour` (Poisson), `repair_s` each."""
    out = []
    for _ in range(pool.num_replicas):
        windows, t = [], 0.0
        rate = pool.failures_per_replica_hour / 3600.0
        while rate > 0:
            t += rng.exponential(1.0 / rate)
            if t >= horizon_s:
                break
            windows.append((t, t + pool.repair_s))
            t += pool.repair_s
        out.append(windows)
    return out


class _Pool:
    def __init__(self, env: simpy.Environment, spec: PoolSpec, seed: int, down: list[list[tuple[float, float]]],
                 cfg: GatewayConfig, on_request_done: Callable[[int], None], live: bool):
        self.spec, self.down = spec, down
        self.recorder = LiveRecorder(spec.replica.engine_loop) if live else Recorder()     # live: rows as they go
        self.cluster = Cluster(env, spec.replica, spec.num_replicas, Router(spec.router, spec.balance_slack),
                               spec.step_model, self.recorder, seed, None, fast_forward=cfg.fast_forward,
                               check_invariants=cfg.check_invariants, on_request_done=on_request_done)

    def release(self) -> tuple[int, tuple[str, ...]]:
        """At the run's end: the pool's preemptions and leaks (`Cluster.leaks`); its cluster let go."""
        out = (self.cluster.num_preemptions, self.cluster.leaks())
        del self.cluster
        return out

    def refusal(self, now: float) -> tuple[str, list]:
        """Why this pool cannot take a request now ("" if it can), and its up replicas."""
        s = self.spec
        if any(a <= now < b for a, b in s.outages_s):
            return OUTAGE, []
        up = [r for r, w in zip(self.cluster.replicas, self.down, strict=True) if not _inside(w, now)]
        if not up:
            return FAILURES, []
        limit = s.max_outstanding_per_replica
        if limit is not None and min(r.outstanding for r in up) >= limit:
            return OUTSTANDING, up
        if s.max_queue_wait_s is not None and min(_oldest_wait_s(r, now) for r in up) >= s.max_queue_wait_s:
            return QUEUE_WAIT, up
        return "", up


def _inside(windows: list[tuple[float, float]], now: float) -> bool:
    """Is `now` inside one of these windows (sorted, apart)?"""
    k = bisect.bisect_right(windows, (now, math.inf)) - 1
    return k >= 0 and now < windows[k][1]


def _oldest_wait_s(replica, now: float) -> float:
    """How long the oldest request not yet started on this replica has waited (0: none waits)."""
    waiting = [q[0].arrival_s for q in (replica.inbox, replica.scheduler.waiting) if q]
    return now - min(waiting) if waiting else 0.0


class _Spend:
    """Spend within a trailing window, compared with a cap per hour: a request is over budget when the
    window's spend with it, scaled to an hour, would pass the cap."""

    def __init__(self, cap_usd_per_hour: float | None, window_s: float):
        self.cap, self.window_s = cap_usd_per_hour, window_s
        self.spent: deque[tuple[float, float]] = deque()     # (time, usd) within the trailing window
        self.spent_usd = 0.0

    def over(self, now: float, usd: float) -> bool:
        while self.spent and self.spent[0][0] <= now - self.window_s:
            self.spent_usd -= self.spent.popleft()[1]
        return self.cap is not None and (self.spent_usd + usd) * 3600.0 / self.window_s > self.cap

    def add(self, now: float, usd: float) -> None:
        self.spent.append((now, usd))
        self.spent_usd += usd


class _External:
    def __init__(self, spec: ExternalSpec, rng: np.random.Generator, window_s: float):
        self.spec, self.rng = spec, rng
        self.spend = _Spend(spec.budget_usd_per_hour, window_s)

    def serve(self, now: float, usd: float, output_tokens: int) -> tuple[float, float, float]:
        """TTFT, TPOT and E2E in ms of one request sent now."""
        self.spend.add(now, usd)
        s = self.spec
        ttft = float(self.rng.lognormal(math.log(s.ttft_p50_ms), s.ttft_sigma))
        tpot = s.tpot_ms if output_tokens > 1 else math.nan
        return ttft, tpot, ttft + (output_tokens - 1) * s.tpot_ms


def simulate_gateway(cfg: GatewayConfig, seed: int = 0, progress: Callable[[int], None] | None = None,
                     rows: Callable[[GatewayRecords, int, int], None] | None = None) -> GatewayResult:
    """Run the gateway's traffic to completion; the same config and seed give the same result.
    `progress`, if given, is called with the number of requests done so far (served or rejected). `rows`, if given,
    is called as the run goes with the records so far and a range [start, stop) of request ids whose records are
    final (in order, a chunk of finished requests at a time; the last with the run's records, at its end)."""
    d = _draw(cfg, seed)
    route_of, choice, thresholds = _first_choices(cfg, d)
    env = simpy.Environment()
    horizon_s = float(d.arrival_s[-1])
    rngs = [np.random.Generator(np.random.PCG64(s))
            for s in np.random.SeedSequence([seed, 11]).spawn(len(cfg.pools) + len(cfg.externals))]
    done = [0]
    count = progress if rows is None else every_chunk(progress, lambda: flush())    # flush: below

    def one_done(_n: int = 0) -> None:
        done[0] += 1
        if count is not None:
            count(done[0])

    pools = {p.name: _Pool(env, p, seed + i, _down_windows(p, horizon_s, rngs[i]), cfg, one_done, rows is not None)
             for i, p in enumerate(cfg.pools)}
    externals = {e.name: _External(e, rngs[len(cfg.pools) + i], cfg.budget_window_s)
                 for i, e in enumerate(cfg.externals)}
    gateway_spend = _Spend(cfg.budget_usd_per_hour, cfg.budget_window_s)
    n, nan = cfg.num_requests, math.nan
    names = ("", *pools, *externals)
    code = {name: k for k, name in enumerate(names)}
    # what the gateway decided, per request: columns, and dicts for the few that skipped a target or were refused
    target, cost_usd = np.zeros(n, np.int32), np.zeros(n)
    ttft, tpot, e2e = np.full(n, nan), np.full(n, nan), np.full(n, nan)
    fallbacks: dict[int, tuple[tuple[str, str], ...]] = {}     # filled in arrival order: by request id
    reasons: dict[int, str] = {}
    first_choice = np.array([code[c] for c in choice], np.int32)
    outcome = np.full(n, OUTCOMES.index(SERVED), np.int8)
    final = np.zeros(n, bool) if rows is not None else None    # live rows: whose record is final
    written = [0]                                              # ... and how many of them were handed out

    def records() -> GatewayRecords:
        return GatewayRecords(tuple(c.name for c in cfg.classes), tuple(c.data_class for c in cfg.classes),
                              tuple(r.name for r in cfg.routes), names, d.cls.astype(np.int32), d.difficulty,
                              d.arrival_s, d.prompt, d.output, np.asarray(route_of, np.int32),
                              first_choice, target, outcome, ttft, tpot, e2e,
                              cost_usd, fallbacks, reasons)

    def pool_rows(name: str, live: Rows | None) -> None:
        """A pool's rows: their client latencies and, rejected by the pool, why."""
        if live is None:
            return
        c, why = live
        ids = c["request_id"]
        ttft[ids], tpot[ids], e2e[ids] = c["ttft_ms"], c["tpot_ms"], c["e2e_ms"]
        for i in ids[c["rejected"]].tolist():
            reasons[i] = f"{name}: {why.get(i, '')}"
            outcome[i] = OUTCOMES.index(REJECTED)
        if final is not None:
            final[ids] = True

    def flush() -> None:
        """Hand out the records final from the first not yet handed out up to the first not final."""
        for name, p in pools.items():
            pool_rows(name, p.recorder.ready(False))
        start = written[0]
        waiting = np.flatnonzero(~final[start:])
        stop = start + int(waiting[0]) if len(waiting) else n
        if stop > start:
            rows(records(), start, stop)
            written[0] = stop
        if stop:        # every request not yet final (so every one a pool has not finished) arrived no earlier
            for p in pools.values():
                p.recorder.live.trim(float(d.arrival_s[stop - 1]))

    def place(i: int, now: float) -> None:
        c = cfg.classes[int(d.cls[i])]
        if route_of[i] < 0:
            reasons[i] = "no route"
            end(i, REJECTED)
            return
        r = cfg.routes[route_of[i]]
        allowed = cfg.residency.get(c.data_class)
        skipped = []
        for name in (choice[i], *r.fallback):
            if allowed is not None and name not in allowed:
                skipped.append((name, RESIDENCY))
                continue
            prompt, output = int(d.prompt[i]), int(d.output[i])
            if name in pools:
                why, up = pools[name].refusal(now)
                if not why:
                    p, sp = int(d.prefix[i]), c.shared_prefix
                    req = Request(i, now, prompt, output, (p,) if p >= 0 else (), sp.prefix_tokens if sp else 1)
                    pools[name].cluster.router.choose(up, req).submit(req)
                    target[i] = code[name]
                    if skipped:
                        fallbacks[i] = tuple(skipped)
                        outcome[i] = OUTCOMES.index(FALLBACK)
                    return
            else:
                ext = externals[name]
                usd = ext.spec.cost_usd(prompt, output)
                why = (BUDGET if ext.spend.over(now, usd) else
                       GATEWAY_BUDGET if gateway_spend.over(now, usd) else "")
                if not why:
                    gateway_spend.add(now, usd)
                    target[i], cost_usd[i] = code[name], usd
                    ttft[i], tpot[i], e2e[i] = ext.serve(now, usd, output)
                    if skipped:
                        fallbacks[i] = tuple(skipped)
                    end(i, FALLBACK if skipped else SERVED)
                    return
            skipped.append((name, why))
        if skipped:
            fallbacks[i] = tuple(skipped)
        reasons[i] = skipped[-1][1] if skipped else "no target"
        end(i, REJECTED)

    def end(i: int, how: str) -> None:
        """Request i ends at the gateway (an external endpoint's answer, or no target)."""
        outcome[i] = OUTCOMES.index(how)
        if final is not None:
            final[i] = True
        one_done()

    def arrivals():
        for i, t in enumerate(_floats(d.arrival_s)):
            for p in pools.values():
                p.cluster.expect_arrival(t)
            if t > env.now:
                yield env.timeout(t - env.now)
            place(i, t)
        for p in pools.values():
            p.cluster.expect_arrival(math.inf)

    env.process(arrivals())
    env.run()
    ends = {name: p.release() for name, p in pools.items()}
    if rows is not None:                        # the rows not yet written are read from the results below
        for p in pools.values():
            p.recorder.close()
    # a big run frees its clusters' cycles before reading records (as `simulate`, which counts finished requests;
    # a gateway's requests all leave a record)
    if n >= COLLECT_AFTER_REQUESTS:
        gc.collect()
    results = {name: p.recorder.result(p.spec.replica.num_blocks, p.spec.num_replicas, ends[name][0],
                                       p.spec.replica.engine_loop) for name, p in pools.items()}
    for name, res in results.items():
        res.leaks = ends[name][1]
    for name, res in results.items():           # a pool's own figures for the requests it took
        pool_rows(name, (res.columns, res.reject_reasons))
    reasons = dict(sorted(reasons.items()))        # by request id, as the records list them
    whole = records()
    if rows is not None and written[0] < n:
        rows(whole, written[0], n)
    return GatewayResult(whole, results, thresholds)
