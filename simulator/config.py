"""A replica's configuration and a disaggregated cluster's: frozen dataclasses of numbers and settings, which
import nothing heavy, so sizer builds them (sizer/sizing/resolve.py) on the plan path without loading the
simulator's machinery (simpy, numpy). The replica (simulator/replica.py) and the cluster
(simulator/cluster.py) run them.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.engine_loop import EngineLoop
from simulator.scheduler import SchedulerConfig


@dataclass(frozen=True)
class SwapLink:
    """What a swap preemption moves and how fast: KV bytes per token over the host link."""
    kv_bytes_per_token: float
    bytes_per_s: float


@dataclass(frozen=True)
class ReplicaConfig:
    """One replica's engine: its scheduler, its KV block pool, (for swap preemption) the host
    link, and the loop around its steps. Every field is given by the caller; nothing here defaults."""
    scheduler: SchedulerConfig
    num_blocks: int
    block_size: int
    enable_prefix_caching: bool
    tenant_isolation: bool
    swap: SwapLink | None                  # required when the scheduler preempts by swap
    engine_loop: EngineLoop
    slot_prompt_reuse: bool = False        # llama.cpp slots (one block each) keep their last prompt; paged
    #                                        engines leave it off
    # sliding-window / chunked-local layers: (pool blocks per block of their tokens, window tokens) per group;
    # a block then holds the other layers' KV (simulator/kv_cache.py)
    kv_windows: tuple[tuple[float, int], ...] = ()

    def __post_init__(self) -> None:
        if self.scheduler.preemption_mode == "swap" and self.swap is None:
            raise ValueError("preemption by swap needs a swap link (KV bytes per token, host bandwidth)")


@dataclass(frozen=True)
class DisaggregationConfig:
    num_prefill_replicas: int
    num_decode_replicas: int
    kv_bytes_per_token: float          # the layers that keep every token
    interconnect_bytes_per_s: float
    transfer_latency_s: float
    # windowed layers: (bytes per token, window) of each group; a prompt sends at most a window of theirs
    kv_window_bytes: tuple[tuple[float, int], ...] = ()
    state_bytes_per_seq: float = 0.0   # a hybrid model's recurrent state: sent once a prompt, whatever its length

    def __post_init__(self) -> None:
        if self.num_prefill_replicas < 1 or self.num_decode_replicas < 1:
            raise ValueError("disaggregation needs at least one prefill and one decode replica")
        windowed = sum(b for b, _ in self.kv_window_bytes)
        if self.kv_bytes_per_token < 0 or self.kv_bytes_per_token + windowed <= 0 or self.interconnect_bytes_per_s <= 0:
            raise ValueError("kv_bytes_per_token and interconnect_bytes_per_s must be > 0")

    def transfer_s(self, prompt_tokens: int) -> float:
        nbytes = prompt_tokens * self.kv_bytes_per_token + self.state_bytes_per_seq
        for per_token, window in self.kv_window_bytes:
            nbytes += min(prompt_tokens, window) * per_token
        return self.transfer_latency_s + nbytes / self.interconnect_bytes_per_s
