"""Top level: a replica (or cluster) configuration, a step-time model and a workload in;
per-request records and per-step timelines out."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import simpy

from simulator.cluster import Cluster, DisaggregationConfig, Router
from simulator.live_rows import InOrder, LiveRecorder, every_chunk
from simulator.records import Recorder, SimulationResult
from simulator.replica import ReplicaConfig
from simulator.request import Request
from simulator.step_batch import StepTimeModel
from simulator.workload import Workload, WorkloadSpec, generate

COLLECT_AFTER_REQUESTS = 100_000     # a run of this many requests frees its cycles before reading its records


@dataclass(frozen=True)
class SimulationConfig:
    replica: ReplicaConfig
    num_replicas: int
    router: str                             # round_robin | least_outstanding | prefix_aware
    prefix_balance_slack: int               # prefix_aware: max extra outstanding requests tolerated
    disaggregation: DisaggregationConfig | None          # replaces num_replicas with two pools
    fast_forward: bool = True               # apply runs of identical decode steps in one event
    check_invariants: bool = False          # verify KV block conservation after every event (slow)

    def __post_init__(self) -> None:
        if self.num_replicas < 1:
            raise ValueError("num_replicas must be >= 1")


def simulate(config: SimulationConfig, step_model: StepTimeModel,
             requests: WorkloadSpec | Workload | Iterable[Request], seed: int = 0,
             progress: Callable[[int], None] | None = None,
             rows: Callable[[dict[str, np.ndarray], dict[int, str]], None] | None = None) -> SimulationResult:
    """Run the workload to completion; the same inputs and seed give the same result to the bit.

    A `WorkloadSpec` is drawn with `seed`; `seed` also drives speculative acceptance draws. A
    closed-loop workload's requests are sent by its clients as their previous answers arrive.
    `progress`, if given, is called with the number of requests done so far. `rows`, if given, is handed the
    per-request rows (`SimulationResult.columns`' values and the reject reasons) as the run goes, in request order,
    as soon as they are final, a chunk of finished requests at a time (`simulator.live_rows`); the last at the end.
    """
    if isinstance(requests, WorkloadSpec):
        requests = generate(requests, seed)
    closed = None
    if isinstance(requests, Workload):
        stream: Iterable[Request] = requests.requests()
        closed = requests.closed_loop
        prefix_content = any(requests.segments)
    else:
        stream = sorted(requests, key=lambda r: r.arrival_s)
        prefix_content = any(r.prefix_segments for r in stream)
    env = simpy.Environment()
    recorder, on_done = Recorder(), progress
    if rows is not None:
        recorder, in_order = LiveRecorder(config.replica.engine_loop), InOrder(rows)

        # a closed loop's next request is numbered when its sender finishes on the engine and arrives when the answer
        # reaches the client, after as many API-server passes as that replica's server lags (api_passes.py: no
        # bound where it falls behind short steps), so a later id can arrive before an earlier one by any lag: no
        # client time is let go; arrivals known ahead come in id order
        skew_s = math.inf if closed is not None else 0.0

        def flush() -> None:
            in_order.take(recorder.ready(False), False)
            recorder.live.trim(in_order.floor_s - skew_s)
        on_done = every_chunk(progress, flush)
    router = Router(config.router, config.prefix_balance_slack)
    cluster = Cluster(env, config.replica, config.num_replicas, router, step_model, recorder, seed, stream,
                      config.disaggregation, config.fast_forward, config.check_invariants, on_done, closed,
                      prefix_content)
    env.run()
    replicas, preemptions, leaks = len(cluster.replicas), cluster.num_preemptions, cluster.leaks()
    # the replicas (block tables, step-time memos), the event loop and the workload (the caller's, if it keeps it) let
    # go before the records are read; they hold reference cycles, which a big run collects now (a collection costs
    # about 0.1 s, a tenth of a 10,000-request run)
    del cluster, env, router, requests, stream
    if recorder.num_done >= COLLECT_AFTER_REQUESTS:
        gc.collect()
    if rows is not None:
        in_order.take(recorder.ready(True), True)
        recorder.close()
    result = recorder.result(config.replica.num_blocks, replicas, preemptions, config.replica.engine_loop)
    result.leaks = leaks
    return result
