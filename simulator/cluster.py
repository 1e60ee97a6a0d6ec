"""Replicas behind a router, optionally split into prefill and decode pools.

Routers: round robin; least outstanding requests; prefix-aware (the replica whose cache
already holds the longest prefix of the request, among replicas within `balance_slack`
requests of the least loaded). Requests come at their arrival times, or, from a closed loop's
clients, each when the answer to its client's previous request has reached it. With
disaggregation, a prefill-pool replica finishes a
request at its first token. A request asking for one token is then done, there; any other's
KV travels to a decode-pool replica in `latency + prompt tokens x bytes per token / bandwidth`
seconds, and the decode replica streams every output token to the client, the first included: as vLLM's
disaggregated serving runs it (the proxy sends the prefill with max_tokens 1 and streams the decode instance's answer;
the decode instance recomputes the last prompt token, whose KV it does not load, and samples the first token itself,
as its scheduler always computes at least one token of a request).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

import numpy as np
import simpy

from simulator.api_passes import ApiPasses
from simulator.config import DisaggregationConfig
from simulator.records import Recorder
from simulator.replica import Replica, ReplicaConfig, StepTimes
from simulator.request import Request, Status
from simulator.speculative import with_drafting
from simulator.step_batch import StepTimeModel
from simulator.workload import ClosedLoop

ROUTERS = ("round_robin", "least_outstanding", "prefix_aware")


class Router:
    def __init__(self, kind: str, balance_slack: int):
        if kind not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, not {kind!r}")
        self.kind, self.balance_slack, self._next = kind, balance_slack, 0

    def choose(self, pool: Sequence[Replica], req: Request) -> Replica:
        if len(pool) == 1:
            return pool[0]
        if self.kind == "round_robin":
            self._next = (self._next + 1) % len(pool)
            return pool[self._next - 1]
        loads = [r.outstanding for r in pool]
        if self.kind == "least_outstanding" or not req.prefix_segments:
            return pool[loads.index(min(loads))]
        ceiling = min(loads) + self.balance_slack
        best, best_key = pool[0], None
        for r, load in zip(pool, loads, strict=True):
            if load <= ceiling:
                key = (r.kv.count_computed_blocks(req)[0], -load)
                if best_key is None or key > best_key:
                    best, best_key = r, key
        return best


class Cluster:
    """Feeds arrivals to the router and keeps the replicas' shared view of what comes next."""

    def __init__(self, env: simpy.Environment, replica: ReplicaConfig, num_replicas: int, router: Router,
                 step_model: StepTimeModel, recorder: Recorder, seed: int, requests: Iterable[Request] | None,
                 disaggregation: DisaggregationConfig | None = None, fast_forward: bool = True,
                 check_invariants: bool = False, on_request_done: Callable[[int], None] | None = None,
                 closed_loop: ClosedLoop | None = None, prefix_content: bool = True):
        """`prefix_content`: whether any request may carry prompt content (prefix segments); without any, no prefix
        cache ever holds a block, so no block's id is observed and the replicas' pools may keep counts."""
        self.env, self.router, self.recorder = env, router, recorder
        self.disaggregation, self.on_request_done = disaggregation, on_request_done
        self._next_arrival_s = 0.0
        self._transfers: list[float] = []
        d = disaggregation
        pools = [(replace(replica, scheduler=replace(replica.scheduler, prefill_only=True)), d.num_prefill_replicas),
                 (replica, d.num_decode_replicas)] if d else [(replica, num_replicas)]
        rngs = [np.random.Generator(np.random.PCG64(s))
                for s in np.random.SeedSequence([seed, 1]).spawn(sum(n for _, n in pools))]
        self.replicas: list[Replica] = []
        step_times = StepTimes(with_drafting(step_model, replica.scheduler.speculative), replica.engine_loop)
        sole_entry = requests is not None and closed_loop is None and not d and num_replicas == 1
        # the sole entry, fast-forwarding, runs the arrivals itself (feed.py): no simpy event per arrival
        fed = requests if sole_entry and fast_forward else None
        for cfg, n in pools:
            for _ in range(n):
                i = len(self.replicas)
                horizon = self._decode_horizon_s if d and cfg is replica else self.next_event_s
                self.replicas.append(Replica(env, i, cfg, step_times, recorder, rngs[i], horizon,
                                             self._done, fast_forward, check_invariants, sole_entry, fed,
                                             prefix_content))
        self.entry_pool = self.replicas[:d.num_prefill_replicas] if d else self.replicas
        self.decode_pool = self.replicas[d.num_prefill_replicas:] if d else self.replicas
        self._decode_router = Router("least_outstanding", router.balance_slack)   # KV lands on the least busy
        self._clients: Iterator[Request] | None = None
        if requests is not None and closed_loop is not None:
            # nothing says when a client sends next until an answer comes: replicas step in time with
            # the clients (one event per step) instead of running ahead to the next known arrival
            self._clients, self._think_s, self._next_arrival_s = iter(requests), closed_loop.think_time_s, -math.inf
            for r in self.replicas:
                r.api = ApiPasses(env, r.config.engine_loop)
            for req in itertools.islice(self._clients, closed_loop.concurrency):
                req.arrival_s = 0.0
                self.router.choose(self.entry_pool, req).submit(req)
        elif requests is not None and fed is None:    # None: fed from outside (a gateway), see `expect_arrival`
            env.process(self._arrivals(requests))

    def expect_arrival(self, at_s: float) -> None:
        """A cluster fed from outside: the next moment a request may reach it (math.inf: no more)."""
        self._next_arrival_s = at_s

    @property
    def num_preemptions(self) -> int:
        return sum(r.scheduler.num_preemptions for r in self.replicas)

    def leaks(self) -> tuple[str, ...]:
        """At the end of a run, what is still held: requests left unfinished, KV blocks not free, LoRA
        adapter slots still running, KV transfers in flight. Empty after every complete run."""
        out = [f"{len(self._transfers)} KV transfers in flight"] if self._transfers else []
        for r in self.replicas:
            kv, sched = r.kv, r.scheduler
            if r.inbox or sched.has_unfinished():
                out.append(f"replica {r.index}: {r.outstanding} requests unfinished")
            if kv.num_free_blocks != kv.num_blocks:
                out.append(f"replica {r.index}: {kv.num_blocks - kv.num_free_blocks} of {kv.num_blocks} KV blocks "
                           "not free")
            if sched.adapters is not None and sched.adapters.running:
                out.append(f"replica {r.index}: adapters {sorted(sched.adapters.running)} hold LoRA slots")
        return tuple(out)

    def next_event_s(self) -> float:
        """Earliest time a request can next reach any replica (an arrival or a KV transfer)."""
        return min(self._next_arrival_s, self._transfers[0]) if self._transfers else self._next_arrival_s

    def _decode_horizon_s(self) -> float:
        """For a decode-pool replica: also the next wake of any prefill replica, which may
        start a transfer then that lands before an unbounded run would end."""
        return min(self.next_event_s(), min(r.wake_s for r in self.entry_pool))

    def _arrivals(self, requests: Iterable[Request]):
        env = self.env
        for req in requests:
            self._next_arrival_s = req.arrival_s
            if req.arrival_s > env.now:
                yield env.timeout(req.arrival_s - env.now)
            self.router.choose(self.entry_pool, req).submit(req)
        self._next_arrival_s = math.inf

    def _done(self, replica: Replica, req: Request) -> None:
        if (req.status is Status.FINISHED and replica.scheduler.config.prefill_only
                and req.num_output_tokens < req.output_tokens):      # its first token was not its last
            self._start_transfer(req)
            return
        self.recorder.request_done(req, replica.index)
        if self._clients is not None:
            self._send_next(replica, req)
        if self.on_request_done is not None:
            self.on_request_done(self.recorder.num_done)

    def _send_next(self, replica: Replica, req: Request) -> None:
        """The client of `req` sends its next request once the answer has reached it (think time
        later): its last token when the API server's pass over its step ends (api_passes.py), a refusal at
        once."""
        nxt = next(self._clients, None)
        if nxt is None:
            return

        def answered(answered_s: float) -> None:
            nxt.arrival_s = answered_s + self._think_s
            self.env.timeout(max(0.0, nxt.arrival_s - self.env.now)).callbacks.append(send)

        def send(_event) -> None:
            self.router.choose(self.entry_pool, nxt).submit(nxt)
        if req.status is Status.FINISHED:
            replica.api.when_answered(answered)
        else:
            answered(self.env.now)

    def _start_transfer(self, req: Request) -> None:
        t = req.finished_s + self.disaggregation.transfer_s(req.prompt_tokens)
        heapq.heappush(self._transfers, t)
        self.env.timeout(max(0.0, t - self.env.now)).callbacks.append(lambda _e: self._arrive_decode(req))

    def _arrive_decode(self, req: Request) -> None:
        """The prompt's KV has reached the decode pool: the prefill's token is dropped, and the decode replica
        computes the last prompt token again and samples the first output token (module docstring)."""
        heapq.heappop(self._transfers)
        req.status, req.finished_s = Status.WAITING, -1.0
        req.num_computed_tokens, req.num_output_tokens = req.prompt_tokens - 1, 0
        req.first_token_s = req.last_token_s = -1.0
        self._decode_router.choose(self.decode_pool, req).submit(req)
