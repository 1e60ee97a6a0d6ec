"""Little's law: requests in flight = arrival rate x time in system, and the KV they need.

    requests in flight   = arrival rate x time in system          (4 req/s x 6 s = 24)
    KV tokens needed     = requests in flight x KV tokens per request
    highest rate memory allows = KV capacity tokens / (tokens per request x time in system)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Capacity:
    arrival_rate_per_s: float
    time_in_system_s: float
    time_in_system_source: str          # "scenario" or "estimated from step times"
    requests_in_flight: float
    kv_tokens_per_request: int
    kv_tokens_per_request_source: str
    kv_tokens_needed: float
    kv_bytes_needed: float               # whole model (all GPUs of a replica), at the KV dtype
    kv_capacity_tokens: int              # one replica, in whole blocks
    requests_held_per_replica: int       # requests of kv_tokens_per_request whose KV one replica holds
    replicas_for_memory: int             # replicas whose KV caches hold the requests in flight
    max_arrival_rate_for_memory_per_s: float   # per replica


def littles_law(arrival_rate_per_s: float, time_in_system_s: float, time_source: str,
                kv_tokens_per_request: int, tokens_source: str, kv_bytes_per_token: int,
                kv_capacity_tokens: int, requests_held_per_replica: int,
                time_in_system_when_full_s: float | None = None) -> Capacity:
    """`requests_held_per_replica` comes from bytes per request (sliding windows and blocks counted).
    `time_in_system_when_full_s`: a request's time in system when the replica holds that many (its steps at the
    batch memory allows), which the rate memory allows is over (Little's law at that batch); None: the stated
    rate's."""
    in_flight = arrival_rate_per_s * time_in_system_s
    tokens = in_flight * kv_tokens_per_request
    held = requests_held_per_replica
    max_rate = held / (time_in_system_when_full_s or time_in_system_s)
    replicas = max(1, math.ceil(math.ceil(in_flight) / held)) if held else 0
    return Capacity(arrival_rate_per_s, time_in_system_s, time_source, in_flight, kv_tokens_per_request, tokens_source,
                    tokens, tokens * kv_bytes_per_token, kv_capacity_tokens, held, replicas, max_rate)
