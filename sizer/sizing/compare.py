"""`sizer compare`: replay a measured benchmark's workload through the simulator and put each measured
metric beside sizer's prediction of it, computed the way the benchmark computes it.

The workload is the benchmark's: its request count, its arrivals (`vllm bench serve` at an infinite
rate with `--max-concurrency N`: a closed loop of N clients; at an infinite rate without a limit:
every request sent at once, a closed loop of as many clients as requests; at a finite rate: gamma
gaps of shape `burstiness` from a first request at time 0, as its `get_request` draws them) and its
per-request lengths when the file has them (`--save-detailed`), else the scenario's lengths,
prefixes, adapters and schemas. The deployment, engine and step model are the scenario's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from simulator.errors import FieldError
from simulator.metrics import summarise
from simulator.records import SimulationResult
from simulator.run import simulate
from simulator.workload import Arrivals, ClosedLoop, Workload
from sizer.inputs.bench_result import BenchResult, latency_stat
from sizer.inputs.scenario import Scenario
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config
from sizer.sizing.step_model import step_model_for
from sizer.sizing.workload import workload_of


@dataclass(frozen=True)
class MetricComparison:
    metric: str                      # the result file's key: request_throughput, p99_ttft_ms, ...
    measured: float
    predicted: float | None          # None: a statistic sizer does not compute (ITL percentiles but 50, 95, 99)
    error: float | None              # (predicted - measured) / measured; None when measured is 0


@dataclass(frozen=True)
class Comparison:
    result_file: str
    scenario: str
    workload: str                    # what was simulated, in words
    num_requests: int
    lengths_from: str                # "the result file (per request)" or "the scenario"
    metrics: tuple[MetricComparison, ...]


def compare(result: BenchResult, scenario: Scenario) -> Comparison:
    """Simulate `result`'s workload on `scenario`'s deployment; every measured metric beside its prediction."""
    r = resolve(scenario)
    n = result.num_requests
    if result.request_rate_per_s is not None and result.max_concurrency is not None and result.max_concurrency < n:
        raise FieldError(result.file, "max_concurrency", f"{result.max_concurrency} with request_rate "
                         f"{result.request_rate_per_s:g}: arrivals at a rate held back by a client limit are not "
                         "modelled; compare a run at request_rate inf (a closed loop) or without max_concurrency")
    base = workload_of(scenario, n)
    workload, words = _arrivals(result, base, n, scenario.workload.seed)
    lengths_from = "the scenario"
    if result.input_lens is not None and result.output_lens is not None:   # one per request sent (bench_result)
        # a failed request (output 0) is simulated as asking for one token: sizer serves every request
        workload = dataclasses.replace(workload, prompt_tokens=np.maximum(np.asarray(result.input_lens), 1),
                                       output_tokens=np.maximum(np.asarray(result.output_lens), 1), segments=[()] * n)
        lengths_from = "the result file (per request)"
    sim = simulate(simulation_config(r), step_model_for(r), workload, scenario.workload.seed)
    predicted = predictions(sim, [key for key, _ in result.measured])
    rows = []
    for key, measured in result.measured:
        value = predicted.get(key)
        error = (value - measured) / measured if value is not None and measured > 0 else None
        rows.append(MetricComparison(key, measured, value, error))
    return Comparison(result.file, scenario.name, words, n, lengths_from, tuple(rows))


def _arrivals(result: BenchResult, base: Workload, n: int, seed: int) -> tuple[Workload, str]:
    if result.request_rate_per_s is None:
        clients = min(result.max_concurrency or n, n)
        return (dataclasses.replace(base, arrival_s=np.zeros(n), closed_loop=ClosedLoop(clients)),
                f"closed loop of {clients} clients (request_rate inf, max_concurrency {result.max_concurrency})")
    rate, shape = result.request_rate_per_s, result.burstiness
    arrivals = Arrivals("poisson" if shape == 1.0 else "gamma", rate, 1.0 / shape ** 0.5)
    gaps = arrivals.gaps_s(n, np.random.Generator(np.random.PCG64(seed)))
    at = np.concatenate([[0.0], np.cumsum(gaps[:-1])])          # the first request at once, then a gap each
    kind = "Poisson" if shape == 1.0 else f"gamma (burstiness {shape:g})"
    return dataclasses.replace(base, arrival_s=at, closed_loop=None), f"{kind} arrivals at {rate:g} req/s"


def predictions(sim: SimulationResult, keys: list[str]) -> dict[str, float]:
    """The simulated run's metrics under the result file's `keys`, as `vllm bench serve` computes them:
    per-request latencies by numpy's mean, median and linear percentiles over the successful requests,
    ITL pooled over every gap (sizer's weighted p50, p95, p99 and mean of it), throughputs over the
    run's span. A key sizer cannot compute (an ITL percentile but those three) is left out."""
    s = summarise(sim)
    out = {"request_throughput": s.request_throughput_per_s, "output_throughput": s.output_tokens_per_s,
           "total_token_throughput": s.total_tokens_per_s}
    itl = s.itl
    pooled = {"mean": itl.mean_ms, "median": itl.p50_ms, "p50": itl.p50_ms, "p95": itl.p95_ms, "p99": itl.p99_ms}
    done = ~sim.columns["rejected"]
    for key in keys:
        parsed = latency_stat(key)
        if parsed is None:
            continue
        stat, name = parsed
        if name == "itl":
            if stat in pooled:
                out[key] = pooled[stat]
            continue
        values = sim.columns[_COLUMNS[name]][done]
        values = values[~np.isnan(values)]
        if len(values):
            out[key] = float(np.mean(values) if stat == "mean" else np.median(values) if stat == "median"
                             else np.percentile(values, float(stat[1:])))
    return out


_COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms"}
