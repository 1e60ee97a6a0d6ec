"""What a deployment costs: the one place for the cost formulas of every command.

    GPUs                        = replicas x GPUs per replica
    cost per hour               = GPUs x price per GPU-hour
    cost per million tokens     = cost per hour / (output tokens per s x 3600) x 1e6
    output tokens per s         = target arrival rate x mean output tokens

The basis for tokens is the traffic the deployment is sized for (the scenario's rate times its
mean output length), not a simulated throughput: it is the same for `plan`, `plan --simulate`,
`search`, `check` and `report`, it does not move with simulation noise, and a deployment that
meets the SLO serves all of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sizer.sizing.resolve import Resolved

THROUGHPUT_BASIS = "target rate x mean output tokens"
HOURS_PER_MONTH = 730              # 365 days x 24 hours / 12 months, the usual cloud billing month


@dataclass(frozen=True)
class CostSummary:
    price_usd_per_gpu_hour: float | None
    price_source: str
    replicas: int
    replicas_source: str
    gpus: int
    usd_per_hour: float | None
    output_tokens_per_s: float | None
    usd_per_million_output_tokens: float | None
    throughput_source: str


def gpus_per_replica(r: Resolved) -> int:
    """GPUs one replica occupies; a disaggregated replica is its prefill and decode pools together
    (the simulator's unit: one pair of pools behind the router)."""
    d = r.disaggregation
    return r.parallel.gpus_per_replica * ((d.num_prefill_replicas + d.num_decode_replicas) if d else 1)


def usd_per_hour(replicas: int, gpus_per_replica: int, price_usd_per_gpu_hour: float | None) -> float | None:
    """replicas x GPUs per replica x price per GPU-hour; None without a price."""
    return None if price_usd_per_gpu_hour is None else replicas * gpus_per_replica * price_usd_per_gpu_hour


def cost_summary(r: Resolved, replicas: int, replicas_source: str, rate_per_s: float,
                 output_tokens_mean: float) -> CostSummary:
    """Cost of `replicas` replicas of `r` serving `rate_per_s` requests of `output_tokens_mean` output tokens."""
    per_hour = usd_per_hour(replicas, gpus_per_replica(r), r.price_usd_per_gpu_hour)
    tokens_per_s = rate_per_s * output_tokens_mean
    per_million = per_hour / (tokens_per_s * 3600) * 1e6 if per_hour is not None and tokens_per_s > 0 else None
    return CostSummary(r.price_usd_per_gpu_hour, r.price_source, replicas, replicas_source,
                       replicas * gpus_per_replica(r), per_hour, tokens_per_s, per_million, THROUGHPUT_BASIS)
