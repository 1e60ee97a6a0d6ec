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
of the measured window (`total` = `successful` + `incomplete` + `errored`: GuideLLM's
`GenerativeMetrics.compile`), `duration` is its length in seconds, and
`metrics.output_token_count.successful.total_sum` the tokens the successful requests got; a benchmark
without a latency metric is refused (its throughput alone times nothing). `config.warmup` and
`config.cooldown` are GuideLLM's `TransientPhaseConfig` (`percent` in [0, 1), `value` >= 0, each or
both null). `config.strategy.max_concurrency` is the cap GuideLLM's scheduler resolved and wrote back
(`WorkerGroup.create_processes`: the strategy's and the backend's request limits, else its
`max_concurrency` setting, 10240 by default; `SchedulingStrategy.init_processes_timings` stores it on the
strategy the report keeps): a concurrent strategy's in-flight requests are at most it, so its clients are
min(streams, max_concurrency); a constant or Poisson rate's is read as never reached when it is at least
the benchmark's requests, else refused (not modelled). The model benchmarked is the benchmark's
`config.backend.model` (its backend's settings), else the report's `config.spec.backend.model`
(GuideLLM 0.7+), `args.model` (0.5, 0.6) or `config.model`; `sizer compare` warns when it is not the
scenario's.
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
    model: str | None = None                 # the model benchmarked, as the report states it (None: not stated)
    model_key: str = ""                      # where the report states it: "benchmarks[0].config.backend.model"
    streams: int | None = None               # concurrent: the strategy's streams, of which max_concurrency ran

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
        if self.streams is not None and self.streams != self.clients:
            return f"benchmark {self.index}: concurrent, {self.streams} streams held to {self.clients} in flight"
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
    model = _model(data, ("config", "spec", "backend", "model"), file) or _model(data, ("args", "model"), file) or \
        _model(data, ("config", "model"), file)
    return tuple(_benchmark(b, i, file, model) for i, b in enumerate(benchmarks))


def _model(data: dict, path: tuple[str, ...], file: str, at: str = "") -> tuple[str, str] | None:
    """(the model's name, the key that states it) at `path` in `data`, keys under `at`; None where the report does
    not state it (a mapping on the way or the name null or absent, or the name empty: GuideLLM's "the server's
    first model")."""
    node: Any = data
    for depth, key in enumerate(path):
        if node is None:
            return None
        node = _mapping(node, file, at + ".".join(path[:depth])).get(key)
    if node is not None and not isinstance(node, str):
        raise FieldError(file, at + ".".join(path), f"expected the benchmarked model's name (a string), got "
                                                   f"{excerpt(node)}")
    return (node, at + ".".join(path)) if node else None


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


def _benchmark(b: Any, i: int, file: str, report_model: tuple[str, str] | None = None) -> GuideLLMBenchmark:
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
    rate, rampup, streams = None, 0.0, None
    if kind == "synchronous":
        clients = 1
    elif kind == "concurrent":
        streams, _ = read_key(Key("streams", int, ge=1, le=MAX_CONCURRENCY, nullable=False), strategy, file, s)
        if streams is None:
            raise FieldError(file, s + "streams", "missing; expected the concurrent strategy's number of clients")
        # GuideLLM holds the streams' requests in flight to the cap it resolved (max_concurrency, as written back)
        clients = min(streams, limit) if limit is not None else streams
    elif kind == "throughput":
        clients = limit
    else:
        rate, _ = read_key(Key("rate", float, ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S, nullable=False), strategy, file, s)
        if rate is None:
            raise FieldError(file, s + "rate", f"missing; expected the {kind} strategy's requests per second")
        rampup, _ = read_key(Key("rampup_duration", float, ge=0, le=1e6, default=0.0), strategy, file, s)
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
    _check_totals(totals, successful, total, file, f"{at}.metrics.request_totals")
    if rate is not None and limit is not None and limit < total:
        raise FieldError(file, s + "max_concurrency", f"{limit} with a {kind} rate, below the benchmark's {total:,} "
                         "requests: arrivals at a rate held back by a client limit are not modelled; compare a "
                         "benchmark whose max_concurrency is null or at least its requests (GuideLLM's default is "
                         "10240)")
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
    if not any("." in key for key, _ in measured):
        raise FieldError(file, f"{at}.metrics", f"no latency metric; expected one of {', '.join(LATENCIES)} with its "
                         "successful requests' mean or percentiles (a GuideLLM generative benchmark's metrics): a "
                         "throughput alone times nothing")
    prompts, outputs = _lengths(b, successful, file, at)
    phases = tuple(p for p in ("warmup", "cooldown") if _transient(b["config"].get(p), file, f"{at}.config.{p}"))
    model, model_key = _model(b, ("config", "backend", "model"), file, f"{at}.") or report_model or (None, "")
    return GuideLLMBenchmark(file, i, kind, clients, rate, rampup, phases, total, successful, duration, prompts,
                             outputs, tuple(measured), model, model_key, streams)


def _check_totals(totals: dict, successful: int, total: int, file: str, at: str) -> None:
    """GuideLLM counts each request of the measured window once: total = successful + incomplete + errored (each
    of those stated; with one missing, the others at most the total)."""
    parts = {"successful": successful}
    for name in ("incomplete", "errored"):
        value, _ = read_key(Key(name, int, ge=0, le=MAX_REQUESTS, nullable=False), totals, file, at + ".")
        if value is not None:
            parts[name] = value
    counted = sum(parts.values())
    if counted > total or (len(parts) == 3 and counted != total):
        raise FieldError(file, at, f"{' + '.join(f'{k} {v:,}' for k, v in parts.items())} = {counted:,} requests, "
                         f"but total {total:,}; expected total = successful + incomplete + errored")


def _transient(phase: Any, file: str, at: str) -> bool:
    """A warm-up or cool-down (GuideLLM's TransientPhaseConfig) set to a share (`percent`, in [0, 1)) or an amount
    (`value`, seconds or requests) above 0; absent or null: none."""
    if phase is None:
        return False
    if not isinstance(phase, dict):
        raise FieldError(file, at, f"expected a mapping of percent, value and mode (GuideLLM's TransientPhaseConfig) "
                                   f"or null, got {excerpt(phase)}")
    percent = phase.get("percent")
    if percent is not None and (isinstance(percent, bool) or not isinstance(percent, int | float)
                                or not 0 <= percent < 1):
        raise FieldError(file, at + ".percent", f"expected a share of the benchmark in [0, 1) or null (GuideLLM's "
                                                f"TransientPhaseConfig), got {excerpt(percent)}")
    value, _ = read_key(Key("value", float, ge=0, le=1e9), phase, file, at + ".")
    return bool(percent or value)


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
