"""Multi-LoRA serving inside a replica (vLLM's --enable-lora; S-LoRA, Punica): which adapters a
step may run and what bringing an adapter into GPU memory costs.

vLLM's scheduler runs at most `max_loras` distinct adapters at once: a waiting request whose
adapter is neither running nor has a free slot is held back (skipped, not blocking the queue)
while later requests are considered (vllm/v1/core/sched/scheduler.py, `scheduled_loras`). The
GPU holds `max_loras` adapter slots and the host an LRU cache of `max_cpu_loras` adapters
(vllm/lora/worker_manager.py, LRUCacheWorkerLoRAManager): an adapter not in a GPU slot is
copied from the host cache over the host link, or first read from disk when not there either.
Adapter id -1 is the base model, which takes no slot.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

BASE_MODEL = -1
GPU, HOST, DISK = "gpu", "host", "disk"     # where an adapter was when a request needed it


@dataclass(frozen=True)
class LoraConfig:
    """Every field is given by the caller (sizer's resolve): no defaults here."""
    max_loras: int                   # GPU adapter slots: distinct adapters running at once
    max_cpu_loras: int               # adapters the host cache holds (>= max_loras, as vLLM requires)
    adapter_bytes: float             # one adapter's weights on one GPU (what a load copies)
    host_bytes_per_s: float          # host -> GPU copy bandwidth
    disk_bytes_per_s: float          # disk -> host read bandwidth

    def __post_init__(self) -> None:
        if self.max_loras < 1 or self.max_cpu_loras < self.max_loras:
            raise ValueError(f"need 1 <= max_loras <= max_cpu_loras, got {self.max_loras} and {self.max_cpu_loras}")
        if self.adapter_bytes < 0 or self.host_bytes_per_s <= 0 or self.disk_bytes_per_s <= 0:
            raise ValueError("adapter bytes must be >= 0 and bandwidths > 0")

    def load_s(self, source: str) -> float:
        """Seconds to bring one adapter into a GPU slot from `source` (HOST or DISK)."""
        host = self.adapter_bytes / self.host_bytes_per_s
        return host + self.adapter_bytes / self.disk_bytes_per_s if source == DISK else host


class AdapterCache:
    """GPU slots and the host cache, both least recently used, and the adapters running now."""

    def __init__(self, config: LoraConfig):
        self.config = config
        self.gpu: OrderedDict[int, None] = OrderedDict()
        self.host: OrderedDict[int, None] = OrderedDict()
        self.running: Counter[int] = Counter()      # adapter -> running requests using it
        self.loads = Counter()                       # HOST / DISK -> adapters loaded from there

    def can_run(self, adapter: int) -> bool:
        """Whether a request for `adapter` may join the running set without exceeding max_loras."""
        return adapter == BASE_MODEL or adapter in self.running or len(self.running) < self.config.max_loras

    def start(self, adapter: int) -> str:
        """A request for `adapter` starts running (the caller checked `can_run`); returns where the
        adapter was: GPU (no cost), HOST or DISK (a load the step pays for)."""
        if adapter == BASE_MODEL:
            return GPU
        self.running[adapter] += 1
        if adapter in self.gpu:
            self.gpu.move_to_end(adapter)
            return GPU
        source = HOST if adapter in self.host else DISK
        self.host[adapter] = None
        self.host.move_to_end(adapter)
        if len(self.host) > self.config.max_cpu_loras:
            self.host.popitem(last=False)
        if len(self.gpu) >= self.config.max_loras:   # evict the least recently used slot not running
            victim = next(a for a in self.gpu if a not in self.running)
            del self.gpu[victim]
        self.gpu[adapter] = None
        self.loads[source] += 1
        return source

    def stop(self, adapter: int) -> None:
        """A request for `adapter` left the running set (finished or preempted)."""
        if adapter == BASE_MODEL:
            return
        self.running[adapter] -= 1
        if not self.running[adapter]:
            del self.running[adapter]
