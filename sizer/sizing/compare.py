"""`sizer compare`: replay a measured benchmark's workload through the simulator and put each measured
metric beside sizer's prediction of it, computed the way the benchmark computes it.

Two benchmark tools are read: `vllm bench serve` (`--save-result`) and GuideLLM (its report: one
benchmark per strategy, each compared on its own). The workload is the benchmark's: its request count,
its arrivals (a client limit at an infinite rate, `vllm bench serve --max-concurrency N` or GuideLLM's
synchronous, concurrent and throughput strategies: a closed loop of N clients; every request sent at
once: a closed loop of as many clients as requests; a finite rate: `vllm bench serve`'s gamma gaps of
shape `burstiness`, GuideLLM's even (constant) or Poisson gaps, from a first request at time 0) and
its per-request lengths when the file has them, else the scenario's lengths. The scenario's arrival,
schedule and request count give way to the benchmark's; its prefixes, adapters and schemas are drawn
as for its own workload; a scenario replaying a trace is refused (the trace's arrivals and lengths are
not the benchmark's). The deployment, engine and step model are the scenario's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulator import Arrivals, ClosedLoop, SimulationResult, Workload, itl_as_numpy, summarise, weighted_percentiles
from sizer.errors import InputError
from sizer.inputs.bench_result import BenchResult, latency_stat
from sizer.inputs.checkpoint import Checkpoint
from sizer.inputs.guidellm_report import GuideLLMBenchmark
from sizer.inputs.scenario import Scenario
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from sizer.sizing.workload import workload_of
from validation.errors import FieldError, excerpt

# The ITL statistics sizer predicts: its pooled ITL summary (the simulator's mean, p50, p95 and p99; vLLM's median
# is the p50). Another ITL percentile is shown unpredicted.
ITL_STATISTICS = ("mean", "median", "p50", "p95", "p99")


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
    benchmark: str = ""              # which benchmark of a file holding several (GuideLLM), else ""
    not_modelled: tuple[str, ...] = ()   # what the benchmark did that the simulation leaves out
    warnings: tuple[str, ...] = ()   # where the inputs disagree (another model, requests the engine rejects)


def compare(result: BenchResult, scenario: Scenario, progress: Callable[[int], None] | None = None) -> Comparison:
    """Simulate `result`'s workload on `scenario`'s deployment; every measured metric beside its prediction.
    `progress`: told the requests simulated so far."""
    n = result.num_requests
    if result.request_rate_per_s is not None and result.max_concurrency is not None and result.max_concurrency < n:
        raise FieldError(result.file, "max_concurrency", f"{result.max_concurrency} with request_rate "
                         f"{result.request_rate_per_s:g}: arrivals at a rate held back by a client limit are not "
                         "modelled; compare a run at request_rate inf (a closed loop) or without max_concurrency")
    _check_predicted(result)
    rate, shape = result.request_rate_per_s, result.burstiness
    if rate is None:
        arrivals = None
    elif math.isinf(shape):        # vLLM's get_request: even gaps of 1 / rate
        arrivals = Arrivals("constant", rate)
    else:        # vLLM's burstiness is the gamma shape: cv = 1 / sqrt(shape), Poisson at 1
        arrivals = Arrivals("poisson", rate) if shape == 1.0 else Arrivals("gamma", rate, 1.0 / shape ** 0.5)
    workload, clients = _replayed(scenario, n, arrivals, result.max_concurrency, scaled=True)
    words = (f"closed loop of {clients} clients (request_rate inf, max_concurrency {result.max_concurrency})"
             if rate is None else f"even arrivals at {rate:g} req/s (burstiness inf)" if math.isinf(shape) else
             f"{'Poisson' if shape == 1.0 else f'gamma (burstiness {shape:g})'} arrivals at {rate:g} req/s, the last "
             f"sent at {n:,} / {rate:g} s as vllm bench serve scales them")
    workload, lengths_from = _lengths(workload, result.input_lens, result.output_lens, "the result file")
    r = resolve(scenario)
    sim = simulate_scenario(r, workload=workload, progress=progress)
    rejected = _rejected(sim, scenario, result.file)
    rows = _rows(result.measured, predictions(sim, [key for key, _ in result.measured]))
    lengths = () if result.input_lens is not None else _length_warnings(result, sim)
    # vllm bench serve computes its statistics over the successful requests; sizer serves every request sent
    failed = ((f"failed: {result.failed:,} of {n:,} requests failed in the run; sizer serves them"
               f"{' (an output of 0 tokens as 1)' if result.output_lens else ''} and counts them in its predictions, "
               "where the measured statistics are over the successful ones",)
              if result.failed else ())
    unread = ((f"{', '.join(result.unread)}: in the file, not compared",)
              if result.unread else ())
    return Comparison(result.file, scenario.name, words, n, lengths_from, rows, not_modelled=failed + unread,
                      warnings=result.warnings + _model_warning(result.model_id, r.checkpoint, result.file) + rejected
                      + lengths)


# how far the scenario's mean lengths may sit from the run's before compare says so
LENGTH_TOLERANCE = 0.03


def _length_warnings(result: BenchResult, sim: SimulationResult) -> tuple[str, ...]:
    """A warning for each of the run's mean prompt and output lengths (its total_input_tokens and
    total_output_tokens over its completed requests) that the scenario's lengths, simulated in their place, miss by
    more than LENGTH_TOLERANCE: the throughputs and latencies then compare different requests."""
    c = sim.columns
    done = ~c["rejected"]
    out = []
    for key, stated, column in (("total_input_tokens", result.total_input_tokens, "prompt_tokens"),
                                ("total_output_tokens", result.total_output_tokens, "output_tokens")):
        if stated is None or not done.any():
            continue
        run, simulated = stated / result.completed, float(np.mean(c[column][done]))
        if abs(simulated - run) > LENGTH_TOLERANCE * run:
            # a run's outputs can total 0 tokens (empty texts, re-tokenised): no ratio to it
            ratio = f" ({simulated / run - 1:+.0%})" if run else ""
            out.append(f"{result.file}: {key}: the run's requests averaged {run:,.0f} tokens, the scenario's "
                       f"simulated in their place {simulated:,.0f}{ratio}; state its lengths in the scenario, or "
                       "save the run with --save-detailed (per-request lengths)")
    return tuple(out)


def _check_predicted(result: BenchResult) -> None:
    """A result with a latency statistic sizer predicts: one whose only latency statistics are ITL percentiles
    sizer does not compute (all but ITL_STATISTICS) would compare throughputs alone, timing nothing, as a file
    without a latency statistic would (refused when read)."""
    latencies = [(key, parsed) for key, _ in result.measured if (parsed := latency_stat(key)) is not None]
    if latencies and not any(metric != "itl" or stat in ITL_STATISTICS for _, (stat, metric) in latencies):
        raise FieldError(result.file, latencies[0][0], "an ITL percentile sizer does not predict, and the file has no "
                         "other latency statistic: nothing to time; expected mean_, median_ or pN_ of ttft, tpot or "
                         "e2el, or mean_, median_, p50_, p95_ or p99_ of itl (in ms)")


def compare_guidellm(bench: GuideLLMBenchmark, scenario: Scenario,
                     progress: Callable[[int], None] | None = None) -> Comparison:
    """Simulate one GuideLLM benchmark's workload on `scenario`'s deployment: its successful requests with
    their own lengths when the report keeps every one, else its measured window's requests with the
    scenario's lengths; every measured metric beside its prediction, computed as GuideLLM computes it. `progress`:
    told the requests simulated so far."""
    n = bench.num_simulated
    rate = bench.rate_per_s
    workload, clients = _replayed(scenario, n, None if rate is None else Arrivals(bench.strategy, rate), bench.clients)
    capped = (f", {bench.streams} streams held to max_concurrency {bench.clients}"
              if bench.streams is not None and bench.streams != bench.clients else "")
    words = (f"closed loop of {clients} client{'s' if clients != 1 else ''} (GuideLLM {bench.strategy}{capped})"
             if rate is None else f"{'even' if bench.strategy == 'constant' else 'Poisson'} arrivals at {rate:g} req/s")
    workload, lengths_from = _lengths(workload, bench.prompt_tokens, bench.output_tokens, "the report")
    not_modelled = ((f"rampup_duration {bench.rampup_s:g} s: arrivals simulated at the full rate from the start",)
                    if bench.rampup_s else ())
    not_modelled += tuple(f"{phase}: GuideLLM left its {phase} requests out of its metrics; sizer simulates the "
                          "measured window's requests from an idle start" for phase in bench.transient_phases)
    r = resolve(scenario)
    sim = simulate_scenario(r, workload=workload, progress=progress)
    rejected = _rejected(sim, scenario, bench.file)
    rows = _rows(bench.measured, guidellm_predictions(sim))
    return Comparison(bench.file, scenario.name, words, n, lengths_from, rows, bench.label, not_modelled,
                      _model_warning(bench.model, r.checkpoint, bench.file, bench.model_key) + rejected)


def _replayed(scenario: Scenario, n: int, arrivals: Arrivals | None, limit: int | None,
              scaled: bool = False) -> tuple[Workload, int]:
    """The scenario's workload of `n` requests sent as the benchmark sent them: open `arrivals` from a first
    request at time 0 (a gap each after it), or with `scaled` as vllm bench serve sends them (its get_request: each
    request a gap after the one before, the first a gap after the start, all scaled so that the last goes at n /
    rate); else a closed loop of `limit` clients (all `n` at once without a limit); and the clients of that loop (0
    for open arrivals)."""
    trace = scenario.workload.trace
    if trace is not None:
        raise InputError(scenario.file, "workload.trace", "expected no trace: compare replays the benchmark's own "
                         "arrivals and request count, with the result's per-request lengths or else the "
                         f"scenario's prompt_tokens and output_tokens; got a trace ({excerpt(trace.path)}: "
                         "sizer simulate replays it)")
    base = workload_of(scenario, n)
    if arrivals is None:
        clients = min(limit or n, n)
        return dataclasses.replace(base, arrival_s=np.zeros(n), closed_loop=ClosedLoop(clients)), clients
    gaps = arrivals.gaps_s(n, np.random.Generator(np.random.PCG64(scenario.workload.seed)))
    if scaled:
        at = np.cumsum(gaps)
        if at[-1] > 0:          # as vLLM: every gap drawn 0 (a gamma of a tiny shape) leaves every send at the start
            at = at / at[-1] * (n / arrivals.rate_per_s)       # the ratio first: a total of a few 1e-300 s stays finite
    else:
        at = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    return dataclasses.replace(base, arrival_s=at, closed_loop=None), 0


def _lengths(workload: Workload, prompts: tuple[int, ...] | None, outputs: tuple[int, ...] | None,
             source: str) -> tuple[Workload, str]:
    """The workload with the file's per-request lengths when it has them (an output of 0 tokens, a failed
    request's or a reply's without usage, as 1: sizer serves every request), its prefixes, adapters and schemas
    kept (a prefix longer than a prompt covers the whole prompt)."""
    if prompts is None or outputs is None:
        return workload, "the scenario"
    return (dataclasses.replace(workload, prompt_tokens=np.asarray(prompts, np.int64),
                                output_tokens=np.maximum(np.asarray(outputs, np.int64), 1)),
            f"{source} (per request)")


def _rejected(sim: SimulationResult, scenario: Scenario, source: str) -> tuple[str, ...]:
    """A warning naming the requests of `source` the scenario's engine rejects, if any (its predictions are over
    the rest, though the benchmark's deployment took them all); refused when it rejects every one: nothing would
    be left to compare."""
    rejected = sim.columns["rejected"]
    if not rejected.any():
        return ()
    first = int(sim.columns["request_id"][rejected][0])
    why = f"request {first}: {sim.reject_reasons.get(first, 'rejected')}"
    if rejected.all():
        raise InputError(scenario.file, "deployment", f"expected a deployment that serves the benchmark's requests, "
                         f"got one that rejects all {len(rejected):,} of {source} ({why})")
    return (f"{scenario.file}: deployment: rejects {int(rejected.sum()):,} of the {len(rejected):,} requests of "
            f"{source} ({why}); the predictions are over the rest",)


def _model_warning(model_id: str | None, ckpt: Checkpoint, file: str, key: str = "model_id") -> tuple[str, ...]:
    """A warning when the run's `model_id` (a GuideLLM report's model, stated at `key`) names neither the scenario's
    model nor the Hugging Face repo its catalog entry is read from (each compared by its last path part, without
    case, one containing the other: meta-llama/Llama-3.1-8B-Instruct is llama-3.1-8b): the comparison assumes the
    benchmark ran the scenario's model, and an 8B's latencies are no test of a 70B's."""
    if not model_id:
        return ()
    repo = (ckpt.config.get("_sizer") or {}).get("hf_repo")
    ran = _last_part(model_id)
    if any(name and (_last_part(name) in ran or ran in _last_part(name)) for name in (ckpt.name, repo)):
        return ()
    also = f" ({repo})" if repo else ""
    return (f"{file}: {key}: {excerpt(model_id)} is not the scenario's model, {ckpt.name}{also}; compared as "
            "if the benchmark ran the scenario's",)


def _last_part(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def _rows(measured: tuple[tuple[str, float], ...], predicted: dict[str, float]) -> tuple[MetricComparison, ...]:
    rows = []
    for key, value in measured:
        guess = predicted.get(key)
        error = (guess - value) / value if guess is not None and value > 0 else None
        rows.append(MetricComparison(key, value, guess, error))
    return tuple(rows)


def predictions(sim: SimulationResult, keys: list[str]) -> dict[str, float]:
    """The simulated run's metrics under the result file's `keys`, as `vllm bench serve` computes them:
    per-request latencies by numpy's mean, median and linear percentiles over the successful requests,
    ITL pooled over every gap (its mean, and numpy's linear p50, p95 and p99 of the gaps), throughputs over the
    benchmark's duration, from its start (time 0, before the first send) to the last finish. A key sizer cannot
    compute (an ITL percentile but those three) is left out."""
    s = summarise(sim, itl=False, start_s=0.0)
    out = {"request_throughput": s.request_throughput_per_s, "output_throughput": s.output_tokens_per_s,
           "total_token_throughput": s.total_tokens_per_s}
    itl = itl_as_numpy(sim)
    done = ~sim.columns["rejected"]
    pooled = dict(zip(ITL_STATISTICS, (itl.mean_ms, itl.p50_ms, itl.p50_ms, itl.p95_ms, itl.p99_ms), strict=True))
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


def guidellm_predictions(sim: SimulationResult) -> dict[str, float]:
    """The simulated run's metrics under GuideLLM's names (`time_to_first_token_ms.p99`, ...), computed as
    GuideLLM computes them over the successful requests: per request, weighted (inter-token latency by
    output tokens - 1, time per output token by output tokens), percentiles the smallest value whose
    cumulative weight reaches the share (its `Percentiles.from_pdf`), throughputs over the run's span."""
    s = summarise(sim, itl=False)
    out = {"requests_per_second": s.request_throughput_per_s, "output_tokens_per_second": s.output_tokens_per_s}
    c = sim.columns
    done = ~c["rejected"]
    ttft, e2e = c["ttft_ms"][done], c["e2e_ms"][done]
    tokens = c["output_tokens"][done].astype(float)
    ones = np.ones(len(ttft))
    per_request = {
        "time_to_first_token_ms": (ttft, ones),
        # a one-token request: GuideLLM's value 0 at weight 0, so it counts nowhere
        "inter_token_latency_ms": ((e2e - ttft) / np.maximum(tokens - 1, 1), tokens - 1),
        "time_per_output_token_ms": (e2e / tokens, tokens),
        "request_latency": (e2e / 1000.0, ones),
    }
    for metric, (values, weights) in per_request.items():
        if not (weights > 0).any():
            continue
        p50, p90, p95, p99 = weighted_percentiles(values, weights, (50.0, 90.0, 95.0, 99.0))
        mean = float(np.sum(values * weights) / np.sum(weights))
        for stat, value in (("mean", mean), ("p50", p50), ("p90", p90), ("p95", p95), ("p99", p99)):
            out[f"{metric}.{stat}"] = value
    return out
