"""Structured outputs inside a replica: grammar compilation and the per-token mask.

A request with a JSON schema (or grammar) needs it compiled before it can be scheduled; vLLM
starts the compilation when the request arrives and leaves the request waiting
(WAITING_FOR_FSM, skipped by the scheduler, not blocking the queue) until it is done
(vllm/v1/structured_output/__init__.py, vllm/v1/core/sched/scheduler.py). Compiled grammars
are kept in an LRU cache, so only the first request of a schema (or the first after an
eviction) waits. Each sampled token of a grammar request then needs a token mask, CPU work
priced per step by the replica. Schema id -1 is a request without a grammar.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class GrammarConfig:
    """Every field is given by the caller (sizer's resolve): no defaults here."""
    compile_s: float                 # one schema's compilation
    mask_s_per_token: float          # one grammar request's token mask, per sampled token
    cache_entries: int               # compiled grammars kept

    def __post_init__(self) -> None:
        if self.compile_s < 0 or self.mask_s_per_token < 0 or self.cache_entries < 1:
            raise ValueError("grammar compile and mask seconds must be >= 0 and the cache hold >= 1 entry")


class GrammarCache:
    """Compiled (or compiling) schemas, least recently used first, each with when it is ready."""

    def __init__(self, config: GrammarConfig):
        self.config = config
        self._ready_s: OrderedDict[int, float] = OrderedDict()
        self.compilations = 0

    def ready_s(self, schema: int, now_s: float) -> float:
        """When `schema` is compiled, starting its compilation at `now_s` if it is not cached."""
        cache = self._ready_s
        t = cache.get(schema)
        if t is None:
            t = cache[schema] = now_s + self.config.compile_s
            self.compilations += 1
            if len(cache) > self.config.cache_entries:
                cache.popitem(last=False)
        else:
            cache.move_to_end(schema)
        return t
