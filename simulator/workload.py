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


@dataclass(frozen=True)
class Arrivals:
    kind: str = "poisson"          # poisson | gamma | constant
    rate_per_s: float = 1.0
    cv: float = 1.0                # gamma: coefficient of variation of inter-arrival gaps

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise ValueError(f"arrival kind must be one of {ARRIVAL_KINDS}, not {self.kind!r}")
        if self.rate_per_s <= 0 or self.cv <= 0:
            raise ValueError("arrival rate_per_s and cv must be > 0")

    def gaps_s(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "constant":
            return np.full(n, 1.0 / self.rate_per_s)
        if self.kind == "poisson":
            return rng.exponential(1.0 / self.rate_per_s, n)
        shape = 1.0 / self.cv ** 2                 # gamma: mean shape*scale = 1/rate, cv = 1/sqrt(shape)
        return rng.gamma(shape, 1.0 / (self.rate_per_s * shape), n)


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
class WorkloadSpec:
    num_requests: int
    arrivals: Arrivals
    prompt: Lengths
    output: Lengths
    shared_prefix: SharedPrefix | None = None


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

    def __len__(self) -> int:
        return len(self.arrival_s)

    def requests(self) -> Iterator[Request]:
        """Make each request when asked, ids 0..n-1 in arrival order."""
        cols = zip(self.arrival_s.tolist(), self.prompt_tokens.tolist(), self.output_tokens.tolist(),
                   self.segments, self.tenant.tolist(), strict=True)
        seg = self.segment_tokens
        for i, (a, p, o, s, t) in enumerate(cols):
            yield Request(i, a, p, o, s, seg, t)

    def summary(self) -> WorkloadSummary:
        n = len(self)
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if n > 1 else 0.0
        return WorkloadSummary(n, span, (n - 1) / span if span > 0 else 0.0,
                               float(self.prompt_tokens.mean()), float(self.output_tokens.mean()))

    def time_scaled(self, rate_factor: float) -> Workload:
        """The same requests arriving `rate_factor` times as fast (for rate sweeps of a trace)."""
        return Workload(self.arrival_s / rate_factor, self.prompt_tokens, self.output_tokens,
                        self.tenant, self.segments, self.segment_tokens)


def generate(spec: WorkloadSpec, seed: int) -> Workload:
    """Draw a workload; the same spec and seed give the same workload to the bit."""
    n = spec.num_requests
    if n < 1:
        raise ValueError("num_requests must be >= 1")
    arrival_rng, prompt_rng, output_rng, prefix_rng = (
        np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(4))
    arrival_s = np.cumsum(spec.arrivals.gaps_s(n, arrival_rng))
    prompt = spec.prompt.draw(n, prompt_rng)
    output = spec.output.draw(n, output_rng)
    sp = spec.shared_prefix
    if sp is None:
        return Workload(arrival_s, prompt, output, np.zeros(n, np.int64), [()] * n)
    has = prefix_rng.random(n) < sp.share
    which = prefix_rng.integers(0, sp.num_prefixes, n)
    tenant = prefix_rng.integers(0, sp.num_tenants, n)
    segments = [(w,) if h else () for h, w in zip(has.tolist(), which.tolist(), strict=True)]
    return Workload(arrival_s, prompt, output, tenant, segments, sp.prefix_tokens)
