"""A `vllm bench serve` result file (`--save-result`), read as what `sizer compare` replays and checks.

The keys and their meaning are vLLM's (vllm/benchmarks/serve.py, `benchmark` and `main_async`, at
commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): `completed` requests succeeded, `num_prompts` were
sent, at `request_rate` ("inf": all at once) through at most `max_concurrency` clients (null: no
limit), with gamma gaps of shape `burstiness` (1: Poisson). Latencies are milliseconds over the
successful requests: `mean_`, `median_` and `pN_` (`--metric-percentiles`, default 99) of `ttft`,
`tpot` ((latency - ttft) / (output tokens - 1), requests of more than one token), `itl` (every gap
between streamed messages, pooled) and `e2el`; throughputs are per second over the benchmark's
duration. Each request sent either completed or failed (`completed + failed = num_prompts`).
`--save-detailed` adds per-request `input_lens`, `output_lens` and `errors` (one per request sent; a
failed request's output is 0 and its error not empty). `model_id` is checked against the scenario's
model by `sizer compare` (a warning). A ramped rate (`ramp_up_strategy`) is refused: not modelled; so is a
run of a pooling or transcription API (`endpoint_type`, or `backend` where an older vLLM wrote only it:
embeddings, pooling, rerank, audio), whose requests generate no tokens from a text prompt. Each metric's
percentiles rise with the percentile. `total_input_tokens` (at least a token a completed request's prompt) and
`total_output_tokens` are checked against the lengths compare simulates; the statistics and counters it does not
compare are named (`_UNREAD`); other keys are ignored.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from sizer.inputs.scenario import (
    MAX_CONCURRENCY,
    MAX_CV,
    MAX_RATE_PER_S,
    MAX_REQUESTS,
    MAX_TOKENS,
    MIN_CV,
    MIN_RATE_PER_S,
)
from validation.errors import FieldError, excerpt
from validation.safe_load import load_json
from validation.schema import Key, check_key, read_key

# Throughputs: name in the file -> per second.
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")
_STAT = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
_MAX_MS = 1e12

COMPLETED = Key("completed", int, ge=1, le=MAX_REQUESTS, nullable=False)
NUM_PROMPTS = Key("num_prompts", int, ge=1, le=MAX_REQUESTS)
FAILED = Key("failed", int, ge=0, le=MAX_REQUESTS)
MAX_CONCURRENCY_KEY = Key("max_concurrency", int, ge=1, le=MAX_CONCURRENCY)
BURSTINESS = Key("burstiness", float, gt=0, le=1e6, default=1.0)
MODEL_ID = Key("model_id", str)
# the successful requests' prompt and output tokens (serve.py calculate_metrics: total_input, sum(actual_output_lens))
TOTAL_INPUT = Key("total_input_tokens", int, ge=0, le=MAX_REQUESTS * MAX_TOKENS)
TOTAL_OUTPUT = Key("total_output_tokens", int, ge=0, le=MAX_REQUESTS * MAX_TOKENS)
# what serve.py writes that sizer does not compare: standard deviations, the client's own queueing
# (process_one_metric's client_queue_time and e2el_including_client_queue), goodput against its own SLOs, the
# probe requests of --probe-request-rate, speculative decoding's counters, the real send times, the duration and
# the peaks (max_output_tokens_per_s, max_concurrent_requests)
_UNREAD = re.compile(r"^(std_\w+_ms|\w*client_queue\w*|request_goodput|probe_\w+|spec_decode_\w+|start_times"
                     r"|duration|max_output_tokens_per_s|max_concurrent_requests|queue_times)$")
# --save-detailed, one entry per request sent: a prompt of at least one token (vLLM refuses an empty one), an
# output of 0 for a failed request (its `calculate_metrics`), an error "" for a successful one.
PER_REQUEST = (Key("input_lens", list[int], ge=1, le=MAX_TOKENS), Key("output_lens", list[int], ge=0, le=MAX_TOKENS),
               Key("errors", list[str]))


def latency_stat(key: str) -> tuple[str, str] | None:
    """("p99", "ttft") for `p99_ttft_ms`, ("mean", "itl") for `mean_itl_ms`; None for any other key."""
    m = _STAT.match(key)
    return (m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class BenchResult:
    """What a `vllm bench serve` run did and measured. Latencies in ms, throughputs per second."""
    file: str
    completed: int
    num_prompts: int | None
    failed: int                             # requests sent that failed: num_prompts - completed (else `failed`)
    request_rate_per_s: float | None        # None: "inf", every request sent at once
    max_concurrency: int | None
    burstiness: float                       # gamma shape of the gaps (1: Poisson); cv = 1 / sqrt(burstiness)
    input_lens: tuple[int, ...] | None      # per request (--save-detailed)
    output_lens: tuple[int, ...] | None
    measured: tuple[tuple[str, float], ...]  # (key as in the file, value): throughputs, then latency statistics
    model_id: str | None = None             # the model the run asked the server for
    warnings: tuple[str, ...] = ()          # where the file's counts disagree with each other (read, not refused)
    total_input_tokens: int | None = None   # over the completed requests
    total_output_tokens: int | None = None
    unread: tuple[str, ...] = ()            # keys of the file sizer reads but does not compare (`_UNREAD`)

    @property
    def num_requests(self) -> int:
        """Requests the run sent (`--num-prompts`): those that completed and those that failed."""
        return self.completed + self.failed


def read_bench_result(path: Path) -> BenchResult:
    """The result file at `path`, or a FieldError naming the file and the key."""
    return bench_result(load_json(path), str(path))


def bench_result(data: object, file: str) -> BenchResult:
    """A parsed result file `data` read from `file`, or a FieldError naming the file and the key."""
    if not isinstance(data, dict):
        raise FieldError(file, None, f"expected a JSON object (a vllm bench serve --save-result file), "
                                     f"got {type(data).__name__}")
    completed, num_prompts, failed, warnings = _counts(data, file)
    concurrency, _ = read_key(MAX_CONCURRENCY_KEY, data, file)
    # vLLM's get_request takes burstiness inf as even gaps of 1 / rate (json.dump writes Infinity)
    even = data.get("burstiness") == math.inf
    burstiness = math.inf if even else read_key(BURSTINESS, data, file)[0]
    _check_endpoint(data, file)
    rate = _rate(data, file)
    if rate is not None and not even:
        _check_burstiness(burstiness, file)
    inputs, outputs, more = _per_request(data, file, completed + failed, failed)
    model_id, _ = read_key(MODEL_ID, data, file)
    total_in, _ = read_key(TOTAL_INPUT, data, file)
    if total_in is not None and total_in < completed:     # as input_lens, each >= 1
        raise FieldError(file, "total_input_tokens", f"expected at least {completed:,}, a token for each completed "
                                                     f"request's prompt (vLLM refuses an empty prompt), got "
                                                     f"{total_in:,}")
    total_out, _ = read_key(TOTAL_OUTPUT, data, file)
    unread = tuple(key for key in data if _UNREAD.match(key))
    return BenchResult(file, completed, num_prompts, failed, rate, concurrency, burstiness, inputs,
                       outputs, _measured(data, file), model_id, warnings + more, total_in, total_out, unread)


def _counts(data: dict, file: str) -> tuple[int, int | None, int, tuple[str, ...]]:
    """(completed, num_prompts, failed, warnings): vLLM counts each request sent as completed or failed, and
    writes num_prompts as asked (--num-prompts), which a dataset with fewer rows leaves short of what was sent:
    with `failed` stated, the requests sent are completed + failed (a warning where num_prompts differs)."""
    completed, _ = read_key(COMPLETED, data, file)
    if completed is None:
        raise FieldError(file, "completed", "missing; expected the number of successful requests >= 1 "
                                            "(a vllm bench serve --save-result file)")
    num_prompts, _ = read_key(NUM_PROMPTS, data, file)
    failed, _ = read_key(FAILED, data, file)
    if num_prompts is None:
        if completed + (failed or 0) > MAX_REQUESTS:
            raise FieldError(file, "failed", f"expected completed + failed <= {MAX_REQUESTS:,} requests, the most "
                                             f"sizer simulates, got {completed:,} + {failed:,}")
        return completed, None, failed or 0, ()
    if completed > num_prompts:
        raise FieldError(file, "completed", f"expected at most num_prompts ({num_prompts:,}), the requests sent, "
                                            f"got {completed:,}")
    if failed is not None:
        sent = completed + failed
        if sent > num_prompts:
            raise FieldError(file, "failed", f"expected completed + failed at most num_prompts ({num_prompts:,}), the "
                                             f"requests asked for, got {completed:,} + {failed:,}")
        return completed, num_prompts, failed, () if sent == num_prompts else (
            f"{file}: num_prompts: {num_prompts:,} asked, but completed + failed = {sent:,} sent (a dataset with "
            "fewer rows); the requests sent are replayed",)
    return completed, num_prompts, num_prompts - completed, ()


def _per_request(data: dict, file: str, sent: int,
                 failed: int) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None, tuple[str, ...]]:
    """--save-detailed's input and output lengths per request (None without them) and warnings, checked against
    the counts: one entry per request sent, both lists or neither, no more errors than failed requests (a failed
    one's may be empty: vLLM writes the HTTP reason, or ""). Outputs of 0 tokens beyond the failed requests are
    read with a warning: vLLM counts a successful reply without usage by tokenizing its text, which is 0 for a
    reply of only the end-of-sequence token."""
    lists = {}
    for key in PER_REQUEST:
        value, _ = read_key(key, data, file)
        if value is not None and len(value) != sent:
            raise FieldError(file, key.name, f"{len(value):,} entries; expected one per request sent ({sent:,})")
        lists[key.name] = value
    inputs, outputs, errors = lists["input_lens"], lists["output_lens"], lists["errors"]
    if (inputs is None) != (outputs is None):
        missing, given = ("input_lens", "output_lens") if inputs is None else ("output_lens", "input_lens")
        raise FieldError(file, missing, f"missing or null beside {given}; expected both (vllm bench serve "
                                        "--save-detailed writes both) or neither (the scenario's lengths)")
    if errors is not None and (errored := sum(1 for e in errors if e)) > failed:
        raise FieldError(file, "errors", f"expected at most {failed:,} non-empty, one per failed request, got "
                                         f"{errored:,}")
    if inputs is None:
        return None, None, ()
    empty = outputs.count(0) - failed
    warnings = (f"{file}: output_lens: {empty:,} successful requests with an output of 0 tokens (a reply without "
                "usage, counted by the tokenizer); simulated as 1 token each",) if empty > 0 else ()
    return tuple(inputs), tuple(outputs), warnings


def _measured(data: dict, file: str) -> tuple[tuple[str, float], ...]:
    """Every throughput and latency statistic of the file, throughputs first; a null refused (vLLM writes a
    number for each statistic it computes), and a file without a latency statistic (nothing to time)."""
    latencies = [(key, _latency(key, value, file)) for key, value in data.items() if _STAT.match(key)]
    if not latencies:
        raise FieldError(file, None, "no latency statistic; expected mean_, median_ or pN_ of ttft, tpot, itl or "
                                     "e2el in ms (as vllm bench serve --save-result writes them)")
    _check_percentiles(latencies, file)
    per_s = MAX_RATE_PER_S * MAX_TOKENS
    throughputs = [(key, check_key(Key(key, float, ge=0, le=per_s, nullable=False), data[key], file, key))
                   for key in THROUGHPUTS if key in data]
    return tuple(throughputs + latencies)


def _latency(key: str, value: object, file: str) -> float:
    """A latency statistic in ms; a percentile's in [0, 100], as numpy takes it (`--metric-percentiles` is not
    checked by vLLM)."""
    stat = _STAT.match(key).group(1)
    if stat.startswith("p") and not 0 <= float(stat[1:]) <= 100:
        raise FieldError(file, key, f"expected a percentile in [0, 100] (p99_ttft_ms, p99.9_ttft_ms: vllm bench "
                                    f"serve --metric-percentiles), got {excerpt(stat)}")
    return check_key(Key(key, float, ge=0, le=_MAX_MS, nullable=False), value, file, key)


# vllm bench serve's --backend values (vllm/benchmarks/lib/endpoint_request_func.py ASYNC_REQUEST_FUNCS) of APIs
# that do not generate text from a text prompt: embeddings, pooling and rerank (no output tokens), transcription
_NOT_GENERATION = re.compile(r"embeddings|pooling|rerank|audio")


def _check_endpoint(data: dict, file: str) -> None:
    """A run of a text-generation API (`endpoint_type`, else `backend`); the others are not modelled."""
    for name in ("endpoint_type", "backend"):
        value, _ = read_key(Key(name, str), data, file)
        if value is not None and _NOT_GENERATION.search(value):
            raise FieldError(file, name, f"{excerpt(value)}: a run of an API that does not generate text from a text "
                                         "prompt is not modelled; expected a completions or chat run (vllm, openai, "
                                         "openai-chat)")


def _check_percentiles(latencies: list[tuple[str, float]], file: str) -> None:
    """Each metric's percentiles (its median the 50th) rise with the percentile (`check_rising`)."""
    ranked: dict[str, list[tuple[float, str, float]]] = {}
    for key, value in latencies:
        stat, metric = latency_stat(key)
        if stat != "mean":
            ranked.setdefault(metric, []).append((50.0 if stat == "median" else float(stat[1:]), key, value))
    for points in ranked.values():
        check_rising([(key, value) for _, key, value in sorted(points)], file)


def check_rising(percentiles: list[tuple[str, float]], file: str) -> None:
    """One metric's percentiles, lowest first, as (the key that states it, ms): each at least the one before. A p99
    below the median is no measurement (numpy's percentiles of one sample never fall); GuideLLM's reports too."""
    for (low_key, low), (key, value) in itertools.pairwise(percentiles):
        if value < low:
            raise FieldError(file, key, f"{value:g} ms, below {low_key} {low:g} ms; expected percentiles that rise "
                             "with the percentile")


def _check_burstiness(shape: float, file: str) -> None:
    """A finite rate's gamma shape whose cv = 1 / sqrt(shape) is within a scenario's workload.arrival.cv bounds (vLLM
    ignores the shape at an infinite rate); compared as cv^2 x shape = 1, so the bounds' own shapes are in."""
    if not MIN_CV**2 * shape <= 1 + 1e-9 or not MAX_CV**2 * shape >= 1 - 1e-9:
        raise FieldError(file, "burstiness", f"expected a gamma shape from {1 / MAX_CV**2:g} to {1 / MIN_CV**2:g} (cv "
                                             f"1 / sqrt(burstiness) from {MIN_CV:g} to {MAX_CV:g}, as a scenario's "
                                             f"workload.arrival.cv), got {shape:g}")


def _rate(data: dict, file: str) -> float | None:
    """`request_rate`: requests per second, or "inf" (vLLM writes the string for an infinite rate: `main_async`,
    `args.request_rate if args.request_rate < float("inf") else "inf"`, always, so a file without it, or with
    null, is refused rather than read as "inf"); a ramp from one rate to another (`ramp_up_strategy`) is refused."""
    ramp, _ = read_key(Key("ramp_up_strategy", str), data, file)
    if ramp is not None:
        raise FieldError(file, "ramp_up_strategy", f"expected none (a ramp from ramp_up_start_rps to "
                         f"ramp_up_end_rps is not modelled; compare a run at a fixed --request-rate), got "
                         f"{excerpt(ramp)}")
    value = data.get("request_rate")
    if value is None:
        raise FieldError(file, "request_rate", f"{'null' if 'request_rate' in data else 'missing'}; expected "
                         "requests per second > 0 or \"inf\" (vllm bench serve --save-result writes the run's "
                         "--request-rate)")
    if value == "inf":
        return None
    if isinstance(value, str):
        raise FieldError(file, "request_rate", f"expected requests per second > 0 or \"inf\", got {excerpt(value)}")
    return check_key(Key("request_rate", float, ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S), value, file, "request_rate")
