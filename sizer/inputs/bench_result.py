"""A `vllm bench serve` result file (`--save-result`), read as what `sizer compare` replays and checks.

The keys and their meaning are vLLM's (vllm/benchmarks/serve.py, `benchmark` and `main_async`, at
commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): `completed` requests succeeded, `num_prompts` were
sent, at `request_rate` ("inf": all at once) through at most `max_concurrency` clients (null: no
limit), with gamma gaps of shape `burstiness` (1: Poisson). Latencies are milliseconds over the
successful requests: `mean_`, `median_` and `pN_` (`--metric-percentiles`, default 99) of `ttft`,
`tpot` ((latency - ttft) / (output tokens - 1), requests of more than one token), `itl` (every gap
between streamed messages, pooled) and `e2el`; throughputs are per second over the benchmark's
duration. `--save-detailed` adds per-request `input_lens` and `output_lens` (one per request sent; a
failed request's output is 0). Other keys are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sizer.inputs.scenario import MAX_CONCURRENCY, MAX_RATE_PER_S, MAX_REQUESTS, MAX_TOKENS
from validation.errors import FieldError, excerpt
from validation.safe_load import load_json
from validation.schema import Key, check_key, read_key

# Throughputs: name in the file -> per second.
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")
_STAT = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
_MAX_MS = 1e12

COMPLETED = Key("completed", int, ge=1, le=MAX_REQUESTS, nullable=False)
NUM_PROMPTS = Key("num_prompts", int, ge=1, le=MAX_REQUESTS)
MAX_CONCURRENCY_KEY = Key("max_concurrency", int, ge=1, le=MAX_CONCURRENCY)
BURSTINESS = Key("burstiness", float, gt=0, le=1e6, default=1.0)


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
    request_rate_per_s: float | None        # None: "inf", every request sent at once
    max_concurrency: int | None
    burstiness: float                       # gamma shape of the gaps (1: Poisson); cv = 1 / sqrt(burstiness)
    input_lens: tuple[int, ...] | None      # per request (--save-detailed)
    output_lens: tuple[int, ...] | None
    measured: tuple[tuple[str, float], ...]  # (key as in the file, value): throughputs, then latency statistics

    @property
    def num_requests(self) -> int:
        """Requests the run sent (`--num-prompts`), else those that completed."""
        return self.num_prompts or self.completed


def read_bench_result(path: Path) -> BenchResult:
    """The result file at `path`, or a FieldError naming the file and the key."""
    return bench_result(load_json(path), str(path))


def bench_result(data: object, file: str) -> BenchResult:
    """A parsed result file `data` read from `file`, or a FieldError naming the file and the key."""
    if not isinstance(data, dict):
        raise FieldError(file, None, f"expected a JSON object (a vllm bench serve --save-result file), "
                                     f"got {type(data).__name__}")
    completed, _ = read_key(COMPLETED, data, file)
    if completed is None:
        raise FieldError(file, "completed", "missing; expected the number of successful requests >= 1 "
                                            "(a vllm bench serve --save-result file)")
    num_prompts, _ = read_key(NUM_PROMPTS, data, file)
    concurrency, _ = read_key(MAX_CONCURRENCY_KEY, data, file)
    burstiness, _ = read_key(BURSTINESS, data, file)
    lens, sent = {}, num_prompts or completed
    for key in ("input_lens", "output_lens"):        # one per request sent, a failed one's output 0
        value, _ = read_key(Key(key, list[int], ge=0, le=MAX_TOKENS), data, file)
        if value is not None and len(value) != sent:
            raise FieldError(file, key, f"{len(value)} lengths; expected one per request sent ({sent})")
        lens[key] = tuple(value) if value is not None else None
    measured = [(key, check_key(Key(key, float, ge=0, le=MAX_RATE_PER_S * MAX_TOKENS), data[key], file, key))
                for key in THROUGHPUTS if data.get(key) is not None]
    measured += [(key, check_key(Key(key, float, ge=0, le=_MAX_MS), value, file, key))
                 for key, value in data.items() if _STAT.match(key) and value is not None]
    if not measured:
        raise FieldError(file, None, "no measured metric; expected request_throughput, mean_ttft_ms and the like")
    return BenchResult(file, completed, num_prompts, _rate(data.get("request_rate"), file), concurrency, burstiness,
                       lens["input_lens"], lens["output_lens"], tuple(measured))


def _rate(value: object, file: str) -> float | None:
    """`request_rate`: requests per second, or "inf" (vLLM writes the string for an infinite rate)."""
    if value is None or value == "inf":
        return None
    if isinstance(value, str):
        raise FieldError(file, "request_rate", f"expected requests per second > 0 or \"inf\", got {excerpt(value)}")
    return check_key(Key("request_rate", float, gt=0, le=MAX_RATE_PER_S), value, file, "request_rate")
