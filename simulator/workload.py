"""Synthetic and replayed workloads: when requests arrive, how long they are, what they share.

A `Workload` is columnar (numpy arrays), so a 100,000-request run holds a few megabytes until
each `Request` is made at its arrival. Every random draw comes from its own stream of one
seed, so changing, say, the output lengths leaves the arrival times bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from simulator.request import Request

ARRIVAL_KINDS = ("poisson", "gamma", "constant")
LENGTH_KINDS = ("fixed", "uniform", "normal", "lognormal", "empirical")
REQUESTS_AT_A_TIME = 1 << 14     # `Workload.requests` reads its columns this many requests at a time


@dataclass(frozen=True)
class Arrivals:
    kind: str = "poisson"          # poisson | gamma | constant
    rate_per_s: float = 1.0
    cv: float | None = None        # gamma only: coefficient of variation of inter-arrival gaps

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise ValueError(f"arrival kind must be one of {ARRIVAL_KINDS}, not {self.kind!r}")
        if self.rate_per_s <= 0:
            raise ValueError("arrival rate_per_s must be > 0")
        if (self.kind == "gamma") != (self.cv is not None) or (self.cv is not None and self.cv <= 0):
            raise ValueError(f"arrival cv must be > 0 for gamma arrivals and absent otherwise, not {self.cv!r}")

    def gaps_s(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "constant":
            return np.full(n, 1.0 / self.rate_per_s)
        if self.kind == "poisson":
            return rng.exponential(1.0 / self.rate_per_s, n)
        shape = 1.0 / self.cv ** 2                 # gamma: mean shape*scale = 1/rate, cv = 1/sqrt(shape)
        return rng.gamma(shape, 1.0 / (self.rate_per_s * shape), n)


@dataclass(frozen=True)
class ClosedLoop:
    """`concurrency` clients, each sending its next request `think_time_s` after the last token of
    its previous one reached it; all send their first request at time 0. This is `vllm bench serve
    --max-concurrency N` at its default infinite request rate (benchmarks/serve.py: every request
    waits on a semaphore of N, and is sent when it gets one) and GuideLLM's concurrent profile."""
    concurrency: int
    think_time_s: float = 0.0

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.think_time_s < 0:
            raise ValueError("a closed loop needs concurrency >= 1 and think_time_s >= 0")


@dataclass(frozen=True)
class Lengths:
    """Token counts: fixed (mean_tokens), uniform (min..max inclusive), normal or lognormal
    (mean and std of the tokens themselves), or empirical (values, optional weights).
    Draws are rounded and clamped to [min_tokens, max_tokens]."""
    kind: str = "fixed"
    mean_tokens: float = 0.0
    std_tokens: float = 0.0
    min_tokens: int = 1
    max_tokens: int | None = None
    values_tokens: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ValueError(f"length kind must be one of {LENGTH_KINDS}, not {self.kind!r}")
        if self.kind == "empirical" and not self.values_tokens:
            raise ValueError("empirical lengths need values_tokens")
        if self.kind in ("fixed", "normal", "lognormal") and self.mean_tokens < 1:
            raise ValueError(f"{self.kind} lengths need mean_tokens >= 1")
        if self.kind == "uniform" and (self.max_tokens is None or self.max_tokens < self.min_tokens):
            raise ValueError("uniform lengths need max_tokens >= min_tokens")
        if self.weights and len(self.weights) != len(self.values_tokens):
            raise ValueError("weights must match values_tokens one for one")

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "fixed":
            x = np.full(n, self.mean_tokens)
        elif self.kind == "uniform":
            x = rng.integers(self.min_tokens, self.max_tokens + 1, n)
        elif self.kind == "normal":
            x = rng.normal(self.mean_tokens, self.std_tokens, n)
        elif self.kind == "lognormal":
            s2 = np.log1p((self.std_tokens / self.mean_tokens) ** 2)
            x = rng.lognormal(np.log(self.mean_tokens) - s2 / 2, np.sqrt(s2), n)
        else:
            p = np.asarray(self.weights, float) / np.sum(self.weights) if self.weights else None
            x = rng.choice(np.asarray(self.values_tokens), n, p=p)
        # Unclipped draws stop at 2^53, the largest float64 that is an exact integer, so the cast
        # to int64 never overflows (int64's max as a float rounds up to 2^63, which does).
        hi = self.max_tokens if self.max_tokens is not None else 2 ** 53
        return np.clip(np.rint(x), max(self.min_tokens, 1), hi).astype(np.int64)


@dataclass(frozen=True)
class SharedPrefix:
    """A `share` of requests open with one of `num_prefixes` prefixes of `prefix_tokens`
    (a system prompt, a document); each request belongs to one of `num_tenants` tenants."""
    share: float
    prefix_tokens: int
    num_prefixes: int = 1
    num_tenants: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0 or self.prefix_tokens < 1 or self.num_prefixes < 1 or self.num_tenants < 1:
            raise ValueError("shared prefix needs 0 <= share <= 1 and prefix_tokens, num_prefixes, num_tenants >= 1")


@dataclass(frozen=True)
class AdapterPopularity:
    """Each request asks for one of `num_adapters` LoRA adapters, adapter k (0-based) with
    probability proportional to 1 / (k + 1)^zipf_s (Zipf; zipf_s 0: uniform)."""
    num_adapters: int
    zipf_s: float = 1.0

    def __post_init__(self) -> None:
        if self.num_adapters < 1 or self.zipf_s < 0:
            raise ValueError("adapter popularity needs num_adapters >= 1 and zipf_s >= 0")

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        weights = 1.0 / np.arange(1, self.num_adapters + 1, dtype=float) ** self.zipf_s
        return rng.choice(self.num_adapters, n, p=weights / weights.sum()).astype(np.int64)


@dataclass(frozen=True)
class SchemaUse:
    """A `share` of requests ask for structured output, each with one of `num_schemas` schemas
    drawn uniformly."""
    share: float
    num_schemas: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0 or self.num_schemas < 1:
            raise ValueError("schema use needs 0 <= share <= 1 and num_schemas >= 1")

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        has = rng.random(n) < self.share
        which = rng.integers(0, self.num_schemas, n)
        return np.where(has, which, -1).astype(np.int64)


@dataclass(frozen=True)
class WorkloadSpec:
    num_requests: int
    arrivals: Arrivals | ClosedLoop               # open-loop arrivals, or clients that wait for their answers
    prompt: Lengths
    output: Lengths
    shared_prefix: SharedPrefix | None = None
    adapters: AdapterPopularity | None = None     # None: every request runs on the base model
    schemas: SchemaUse | None = None              # None: no request asks for structured output


@dataclass(frozen=True)
class WorkloadSummary:
    num_requests: int
    duration_s: float                 # first to last arrival
    rate_per_s: float                 # (requests - 1) / duration
    prompt_tokens_mean: float
    output_tokens_mean: float


@dataclass
class Workload:
    """Requests as columns. `segments[i]` are request i's prompt content ids, each covering
    `segment_tokens` tokens (see `Request.prefix_segments`)."""
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    tenant: np.ndarray
    segments: Sequence[tuple[int, ...]]
    segment_tokens: int = 1
    adapter: np.ndarray | None = None      # LoRA adapter per request, -1 the base model (None: all base)
    schema: np.ndarray | None = None       # structured-output schema per request, -1 none (None: none)
    closed_loop: ClosedLoop | None = None  # sent by clients as their answers come (arrival_s then unused)
    unread: tuple[str, ...] = ()           # a trace's columns (CSV) or keys (Mooncake) the reader does not use

    def __len__(self) -> int:
        return len(self.arrival_s)

    def requests(self) -> Iterator[Request]:
        """Make each request when asked, ids 0..n-1 in arrival order; the columns are read as Python values
        REQUESTS_AT_A_TIME at a time (a million requests' values as lists would be about 90 MB)."""
        n, seg = len(self), self.segment_tokens
        for start in range(0, n, REQUESTS_AT_A_TIME):
            part = slice(start, min(start + REQUESTS_AT_A_TIME, n))
            none = [-1] * (part.stop - start)
            adapter = self.adapter[part].tolist() if self.adapter is not None else none
            schema = self.schema[part].tolist() if self.schema is not None else none
            cols = zip(self.arrival_s[part].tolist(), self.prompt_tokens[part].tolist(),
                       self.output_tokens[part].tolist(), self.segments[part], self.tenant[part].tolist(), adapter,
                       schema, strict=True)
            for i, (a, p, o, s, t, lora, schema_id) in enumerate(cols, start):
                yield Request(i, a, p, o, s, seg, t, lora, schema_id)

    def summary(self) -> WorkloadSummary:
        n = len(self)
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if n > 1 else 0.0
        return WorkloadSummary(n, span, (n - 1) / span if span > 0 else 0.0,
                               float(self.prompt_tokens.mean()), float(self.output_tokens.mean()))

    def time_scaled(self, rate_factor: float) -> Workload:
        """The same requests arriving `rate_factor` times as fast (for rate sweeps of a trace)."""
        return Workload(self.arrival_s / rate_factor, self.prompt_tokens, self.output_tokens,
                        self.tenant, self.segments, self.segment_tokens, self.adapter, self.schema, self.closed_loop,
                        self.unread)


def generate(spec: WorkloadSpec, seed: int) -> Workload:
    """Draw a workload; the same spec and seed give the same workload to the bit."""
    n = spec.num_requests
    if n < 1:
        raise ValueError("num_requests must be >= 1")
    arrival_rng, prompt_rng, output_rng, prefix_rng = _streams(seed)[:4]
    closed = spec.arrivals if isinstance(spec.arrivals, ClosedLoop) else None
    arrival_s = np.zeros(n) if closed else np.cumsum(spec.arrivals.gaps_s(n, arrival_rng))
    prompt = spec.prompt.draw(n, prompt_rng)
    output = spec.output.draw(n, output_rng)
    adapter, schema = _draw_tags(n, spec.adapters, spec.schemas, seed)
    sp = spec.shared_prefix
    if sp is None:
        return Workload(arrival_s, prompt, output, np.zeros(n, np.int64), [()] * n, 1, adapter, schema, closed)
    has = prefix_rng.random(n) < sp.share
    which = prefix_rng.integers(0, sp.num_prefixes, n)
    tenant = prefix_rng.integers(0, sp.num_tenants, n)
    segments = [(w,) if h else () for h, w in zip(has.tolist(), which.tolist(), strict=True)]
    return Workload(arrival_s, prompt, output, tenant, segments, sp.prefix_tokens, adapter, schema, closed)


def _streams(seed: int) -> list[np.random.Generator]:
    """The workload's six random streams. spawn(6)'s first four are spawn(4)'s, so adapters and
    schemas (streams 4 and 5) leave arrivals, lengths and prefixes as they were without them."""
    return [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(6)]


def _draw_tags(n: int, adapters: AdapterPopularity | None, schemas: SchemaUse | None,
               seed: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    adapter_rng, schema_rng = _streams(seed)[4:]
    return (adapters.draw(n, adapter_rng) if adapters else None, schemas.draw(n, schema_rng) if schemas else None)


def with_tags(workload: Workload, adapters: AdapterPopularity | None, schemas: SchemaUse | None,
              seed: int) -> Workload:
    """`workload` (a trace, say) with each request's adapter and schema drawn as `generate` draws them;
    without `adapters` (or `schemas`) it keeps its own (a trace's adapter column)."""
    adapter, schema = _draw_tags(len(workload), adapters, schemas, seed)
    return Workload(workload.arrival_s, workload.prompt_tokens, workload.output_tokens, workload.tenant,
                    workload.segments, workload.segment_tokens,
                    workload.adapter if adapter is None else adapter, workload.schema if schema is None else schema,
                    workload.closed_loop, workload.unread)


@dataclass(frozen=True)
class Stage:
    """A stretch of constant-rate load (a load generator's stage: rate x duration requests)."""
    rate_per_s: float
    duration_s: float

    def __post_init__(self) -> None:
        if self.rate_per_s <= 0 or self.duration_s <= 0:
            raise ValueError("a stage needs rate_per_s > 0 and duration_s > 0")


STAGED_ARRIVAL_KINDS = ("inference-perf", "constant", "poisson")     # staged_arrival_s's kinds


def staged_arrival_s(stages: Sequence[Stage], kind: str, seed: int) -> np.ndarray:
    """Arrival times of stages run one after another, each from its start: `inference-perf`, what that load
    generator's `load.type: constant` sends (its ConstantLoadTimer, inference_perf/loadgen/load_timer.py since
    kubernetes-sigs/inference-perf 5e1649d, 2025-08: int(rate x duration) exponential gaps, rescaled so that
    they sum to the stage's duration), `constant` gaps of 1 / rate from the stage's start (round(rate x
    duration) requests), or `poisson` (exponential gaps, cut at the stage's end)."""
    if kind not in STAGED_ARRIVAL_KINDS:
        raise ValueError(f"staged arrivals are {', '.join(map(repr, STAGED_ARRIVAL_KINDS))}, not {kind!r}")
    rng = np.random.Generator(np.random.PCG64(seed))
    out, start = [], 0.0
    for st in stages:
        if kind == "constant":
            t = start + np.arange(round(st.rate_per_s * st.duration_s)) / st.rate_per_s
        elif kind == "poisson":
            t = start + np.cumsum(rng.exponential(1.0 / st.rate_per_s, round(st.rate_per_s * st.duration_s)))
            t = t[t < start + st.duration_s]
        else:
            gaps = rng.exponential(1.0 / st.rate_per_s, int(st.rate_per_s * st.duration_s))
            t = start + np.cumsum(gaps * (st.duration_s / gaps.sum())) if len(gaps) else gaps
        out.append(t)
        start += st.duration_s
    return np.concatenate(out)


@dataclass(frozen=True)
class PromptSet:
    """A fixed set of prompts cycled through, as inference-perf's shared-prefix generator makes
    (inference_perf/datagen/shared_prefix_datagen.py): `num_groups` system prompts of
    `system_prompt_tokens`, each followed by `prompts_per_group` questions of `question_tokens`;
    the set is shuffled once and request i sends prompt i mod (groups x prompts per group), so
    whole prompts repeat. Every request asks for `output_tokens`."""
    num_groups: int
    prompts_per_group: int
    system_prompt_tokens: int
    question_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if min(self.num_groups, self.prompts_per_group, self.question_tokens, self.output_tokens) < 1 \
                or self.system_prompt_tokens < 0:
            raise ValueError("a prompt set needs groups, prompts per group, question and output tokens >= 1")

    @property
    def prompt_tokens(self) -> int:
        return self.system_prompt_tokens + self.question_tokens

    def workload(self, arrival_s: np.ndarray, block_tokens: int, seed: int) -> Workload:
        """The requests arriving at `arrival_s`. Prompt content is given per block of
        `block_tokens` (the KV block size, so sharing is exact): a block wholly inside its
        group's system prompt has the group's content id, any other block is its prompt's own."""
        order = np.random.Generator(np.random.PCG64(seed)).permutation(self.num_groups * self.prompts_per_group)
        shared = self.system_prompt_tokens // block_tokens
        blocks = -(-self.prompt_tokens // block_tokens)
        prompts = []
        for p in order.tolist():
            group = p // self.prompts_per_group
            own = 1_000_000 * (p + 1)            # ids of a prompt's own blocks, apart from every group id
            prompts.append(tuple(group * blocks + b for b in range(shared)) +
                           tuple(own + b for b in range(shared, blocks)))
        n = len(arrival_s)
        return Workload(np.asarray(arrival_s, float), np.full(n, self.prompt_tokens, np.int64),
                        np.full(n, self.output_tokens, np.int64), np.zeros(n, np.int64),
                        [prompts[i % len(prompts)] for i in range(n)], block_tokens)
