"""A GuideLLM benchmark report (`guidellm benchmark ... --output-path benchmarks.json`), read as the runs
`sizer compare` replays and checks.

The layout and the meaning of each field are GuideLLM's (vllm-project/guidellm at commit
ee7a77457ba668b4b5ccb40f110518829893b36a: src/guidellm/benchmark/schemas/report.py, benchmark.py,
metrics.py; src/guidellm/schemas/statistics.py and request_stats.py). A report holds one benchmark per
scheduling strategy of its profile (a sweep holds several): `config.strategy` says how requests were
sent (`synchronous`: one at a time; `concurrent`: `streams` clients, each sending its next request when
its last finishes; `throughput`: everything at once, at most `max_concurrency` in flight; `constant`:
evenly spaced at `rate` per second; `poisson`: Poisson arrivals at `rate`). `metrics` holds, per metric,
distribution summaries of the `successful` requests (`mean`, `median`, `percentiles.p50` ... `p99`),
each per request and weighted as GuideLLM weights it:

- `time_to_first_token_ms`: send to first token, one value a request;
- `inter_token_latency_ms`: (last token - first token) / (output tokens - 1), weighted by
  output tokens - 1 (what `vllm bench serve` calls TPOT, token-weighted);
- `time_per_output_token_ms`: (last token - send) / output tokens, weighted by output tokens
  (the first token included);
- `request_latency`: send to end, in seconds.

Each benchmark is a `generative_benchmark` (its `type_`). `metrics.request_totals` counts the requests
of the measured window, `duration` is its length in seconds, and
`metrics.output_token_count.successful.total_sum` the tokens the successful requests got.
`requests.successful`, when every one is kept (no `sample_size`), gives each one's `prompt_tokens`
and `output_tokens` (at least one each: a successful request had a prompt and streamed a token).
Other keys are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sizer.inputs.bench_result import check_rising
from sizer.inputs.scenario import MAX_CONCURRENCY, MAX_RATE_PER_S, MAX_REQUESTS, MAX_TOKENS, MIN_RATE_PER_S
from validation.errors import FieldError, excerpt
from validation.safe_load import load_json
from validation.schema import Key, check_key, read_key

# Benchmarks in one report: GuideLLM's sweep profile runs 10 by default; each is simulated
MAX_BENCHMARKS = 1_000
# A report with every request's statistics runs to tens of MB for a sweep of thousands of requests.
MAX_REPORT_BYTES = 256 << 20
# Latency metrics: name in the report -> its unit, as GuideLLM writes it.
LATENCIES = {"time_to_first_token_ms": "ms", "inter_token_latency_ms": "ms", "time_per_output_token_ms": "ms",
             "request_latency": "s"}
STATISTICS = ("mean", "p50", "p90", "p95", "p99")   # its `median` is its p50
# Throughputs sizer computes from the report's totals: successful requests (or their output tokens) / duration.
THROUGHPUTS = ("requests_per_second", "output_tokens_per_second")
STRATEGIES = ("synchronous", "concurrent", "throughput", "constant", "poisson")
GENERATIVE = "generative_benchmark"     # a benchmark's `type_` (GuideLLM's GenerativeBenchmark)
_MAX_MS = 1e12


@dataclass(frozen=True)
class GuideLLMBenchmark:
    """One benchmark (one strategy) of a GuideLLM report: how it sent requests, and what it measured."""
    file: str
    index: int                               # position in the report's `benchmarks`
    strategy: str                            # one of STRATEGIES
    clients: int | None                      # closed loop: synchronous 1, concurrent streams, throughput's limit
    rate_per_s: float | None                 # constant and poisson
    rampup_s: float                          # constant and poisson: a linear ramp to the rate (0: none)
    transient_phases: tuple[str, ...]        # "warmup", "cooldown": set, so excluded from the measured window
    num_requests: int                        # in the measured window, every status
    num_successful: int
    duration_s: float
    prompt_tokens: tuple[int, ...] | None    # per successful request, when the report keeps every one
    output_tokens: tuple[int, ...] | None
    measured: tuple[tuple[str, float], ...]  # ("time_to_first_token_ms.p99", value), throughputs first

    @property
    def num_simulated(self) -> int:
        """The requests a comparison simulates: the successful ones with their own lengths when the report keeps
        every one, else the measured window's."""
        return self.num_successful if self.prompt_tokens is not None else self.num_requests

    @property
    def label(self) -> str:
        if self.strategy in ("constant", "poisson"):
            return f"benchmark {self.index}: {self.strategy} at {self.rate_per_s:g} req/s"
        if self.strategy == "throughput" and self.clients is None:
            return f"benchmark {self.index}: throughput (every request at once)"
        return f"benchmark {self.index}: {self.strategy}, {self.clients} client{'s' if self.clients != 1 else ''}"


def is_guidellm_report(data: Any) -> bool:
    """A GuideLLM report is a JSON object with a `benchmarks` list (a vllm bench serve result has none)."""
    return isinstance(data, dict) and "benchmarks" in data


def read_guidellm_report(path: Path) -> tuple[GuideLLMBenchmark, ...]:
    """Every benchmark of the report at `path`, or a FieldError naming the file and the key."""
    return guidellm_benchmarks(load_json(path, MAX_REPORT_BYTES), str(path))


def guidellm_benchmarks(data: Any, file: str) -> tuple[GuideLLMBenchmark, ...]:
    """The benchmarks of a parsed GuideLLM report `data` read from `file`."""
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benchmarks, list) or not benchmarks:
        raise FieldError(file, "benchmarks", "expected a non-empty list of benchmarks (a GuideLLM report: "
                                             f"guidellm benchmark --output-path), got {excerpt(benchmarks)}")
    if len(benchmarks) > MAX_BENCHMARKS:
        raise FieldError(file, "benchmarks", f"{len(benchmarks):,} benchmarks; expected at most {MAX_BENCHMARKS:,}")
    return tuple(_benchmark(b, i, file) for i, b in enumerate(benchmarks))


def check_compared(runs: tuple[GuideLLMBenchmark, ...], file: str) -> None:
    """The benchmarks compared: each with a successful request (its metrics are over them), all together
    simulating at most MAX_REQUESTS requests (each is bounded alone). Another benchmark of the report may have none
    (a rate the server could not take): it is not compared."""
    for run in runs:
        if not run.num_successful:
            raise FieldError(file, f"benchmarks[{run.index}].metrics.request_totals.successful",
                             "0: no request succeeded, nothing measured to compare (--benchmark picks another)")
    simulated = sum(run.num_simulated for run in runs)
    if simulated > MAX_REQUESTS:
        raise FieldError(file, "benchmarks", f"{len(runs):,} benchmarks of {simulated:,} requests in all; expected "
                                             f"at most {MAX_REQUESTS:,} to simulate (compare one with --benchmark)")


def _benchmark(b: Any, i: int, file: str) -> GuideLLMBenchmark:
    at = f"benchmarks[{i}]"
    b = _mapping(b, file, at)
    if b.get("type_") != GENERATIVE:
        raise FieldError(file, f"{at}.type_", f"expected {GENERATIVE!r} (sizer compares text generation), got "
                                              f"{excerpt(b.get('type_'))}")
    strategy = _mapping(_mapping(b.get("config"), file, f"{at}.config").get("strategy"), file,
                        f"{at}.config.strategy")
    kind = strategy.get("type_")
    if kind not in STRATEGIES:
        raise FieldError(file, f"{at}.config.strategy.type_", f"expected one of {', '.join(STRATEGIES)}, got "
                         f"{excerpt(kind)} (a trace replay is compared with a scenario of the trace: sizer simulate)")
    s = f"{at}.config.strategy."
    limit, _ = read_key(Key("max_concurrency", int, ge=1, le=MAX_CONCURRENCY), strategy, file, s)
    rate, rampup = None, 0.0
    if kind == "synchronous":
        clients = 1
    elif kind == "concurrent":
        clients, _ = read_key(Key("streams", int, ge=1, le=MAX_CONCURRENCY, nullable=False), strategy, file, s)
        if clients is None:
            raise FieldError(file, s + "streams", "missing; expected the concurrent strategy's number of clients")
    elif kind == "throughput":
        clients = limit
    else:
        rate, _ = read_key(Key("rate", float, ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S, nullable=False), strategy, file, s)
        if rate is None:
            raise FieldError(file, s + "rate", f"missing; expected the {kind} strategy's requests per second")
        rampup, _ = read_key(Key("rampup_duration", float, ge=0, le=1e6, default=0.0), strategy, file, s)
        if limit is not None:
            raise FieldError(file, s + "max_concurrency", f"{limit} with a {kind} rate: arrivals at a rate held "
                             "back by a client limit are not modelled; compare a benchmark without max_concurrency")
        clients = None
    metrics = _mapping(b.get("metrics"), file, f"{at}.metrics")
    totals = _mapping(metrics.get("request_totals"), file, f"{at}.metrics.request_totals")
    count = Key("total", int, ge=1, le=MAX_REQUESTS, nullable=False)
    total, _ = read_key(count, totals, file, f"{at}.metrics.request_totals.")
    successful, _ = read_key(Key("successful", int, ge=0, le=MAX_REQUESTS, nullable=False), totals, file,
                             f"{at}.metrics.request_totals.")
    duration, _ = read_key(Key("duration", float, gt=0, le=1e9, nullable=False), b, file, f"{at}.")
    for name, value in (("metrics.request_totals.total", total), ("metrics.request_totals.successful", successful),
                        ("duration", duration)):
        if value is None:
            raise FieldError(file, f"{at}.{name}", "missing; expected a GuideLLM benchmark's measured window")
    if successful > total:
        raise FieldError(file, f"{at}.metrics.request_totals.successful", f"{successful:,} of {total:,} requests; "
                                                                           "expected at most the total")
    if successful / duration > MAX_RATE_PER_S:
        raise FieldError(file, f"{at}.duration", f"{duration:g} s for {successful:,} requests; expected at most "
                                                 f"{MAX_RATE_PER_S:g} requests a second")
    measured = [("requests_per_second", successful / duration)]
    tokens = _successful(metrics, "output_token_count", file, at)
    if tokens is not None and "total_sum" in tokens:
        out_sum = check_key(Key("total_sum", float, ge=0, le=MAX_REQUESTS * MAX_TOKENS), tokens["total_sum"], file,
                            f"{at}.metrics.output_token_count.successful.total_sum")
        measured.append(("output_tokens_per_second", out_sum / duration))
    for metric in LATENCIES:
        summary = _successful(metrics, metric, file, at)
        if summary is None:
            continue
        where = f"{at}.metrics.{metric}.successful."
        percentiles = summary.get("percentiles")
        values = {"mean": summary.get("mean")}
        if percentiles is not None:
            values |= {p: _mapping(percentiles, file, where + "percentiles").get(p) for p in STATISTICS[1:]}
        ranked = []                     # (key, value) of each stated percentile, lowest first (STATISTICS' order)
        for stat in STATISTICS:
            if values.get(stat) is not None:
                key = where + ("percentiles." if stat != "mean" else "") + stat
                value = check_key(Key(stat, float, ge=0, le=_MAX_MS), values[stat], file, key)
                if stat != "mean":
                    ranked.append((key, value))
                measured.append((f"{metric}.{stat}", value))
        check_rising(ranked, file)
    prompts, outputs = _lengths(b, successful, file, at)
    phases = tuple(p for p in ("warmup", "cooldown") if _transient(b["config"].get(p)))
    return GuideLLMBenchmark(file, i, kind, clients, rate, rampup, phases, total, successful, duration, prompts,
                             outputs, tuple(measured))


def _transient(phase: Any) -> bool:
    """A warm-up or cool-down set to a share (`percent`) or an amount (`value`) above 0."""
    return isinstance(phase, dict) and any(isinstance(phase.get(k), int | float) and phase[k] > 0
                                           for k in ("percent", "value"))


def _successful(metrics: dict, name: str, file: str, at: str) -> dict | None:
    """`metrics.<name>.successful`, or None when the report has no such metric."""
    summary = metrics.get(name)
    if summary is None:
        return None
    return _mapping(_mapping(summary, file, f"{at}.metrics.{name}").get("successful"), file,
                    f"{at}.metrics.{name}.successful")


def _lengths(b: dict, successful: int, file: str, at: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """Each successful request's prompt and output tokens, when the report keeps all of them (else None)."""
    requests = b.get("requests")
    kept = _mapping(requests, file, f"{at}.requests").get("successful") if requests is not None else None
    if kept is not None and not isinstance(kept, list):
        raise FieldError(file, f"{at}.requests.successful", f"expected a list of requests (a GuideLLM report), "
                                                            f"got {excerpt(kept)}")
    if kept is None or len(kept) != successful or not successful:     # none kept, or a sample of them
        return None, None
    lengths: dict[str, list[int]] = {"prompt_tokens": [], "output_tokens": []}
    for j, request in enumerate(kept):
        request = _mapping(request, file, f"{at}.requests.successful[{j}]")
        for name, column in lengths.items():
            value, _ = read_key(Key(name, int, ge=1, le=MAX_TOKENS, nullable=False), request, file,
                                f"{at}.requests.successful[{j}].")
            if value is None:
                return None, None          # a report without token counts: the scenario's lengths
            column.append(value)
    return tuple(lengths["prompt_tokens"]), tuple(lengths["output_tokens"])


def _mapping(value: Any, file: str, at: str) -> dict:
    if not isinstance(value, dict):
        raise FieldError(file, at, f"expected a mapping (a GuideLLM report), got {excerpt(value)}")
    return value
