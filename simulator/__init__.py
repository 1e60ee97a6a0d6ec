"""The simulator's public API: what sizer and the engine use of it, importable as `from simulator import NAME`.

Each name loads its module on first use (PEP 562 `__getattr__`), so `import simulator` and `import
simulator.config` (which a plain `sizer plan` runs: it builds a replica's configuration) load neither
numpy nor simpy; `simulator.simulate` loads the event loop when a run asks for it. `__all__` lists every
name; tests/simulator/test_public_api.py holds that every name sizer and the engine import from a
simulator module is listed here.
"""

from __future__ import annotations

import importlib
from typing import Any

# module -> the names it exports, by what they are for
_EXPORTS: dict[str, tuple[str, ...]] = {
    # configuration of a replica, a disaggregated cluster and their parts
    "config": ("DisaggregationConfig", "ReplicaConfig", "SwapLink"),
    "scheduler": ("Scheduler", "SchedulerConfig", "reason_kind"),
    "speculative": ("SpeculativeConfig", "expected_tokens_per_step", "with_drafting"),
    "lora": ("LoraConfig",),
    "grammar": ("GrammarConfig",),
    "engine_loop": ("BARE", "EngineLoop"),
    # the step contract: a scheduled batch and what prices it
    "step_batch": ("StepBatch", "StepTimeModel", "attention_pairs", "split_attention", "windowed_pairs"),
    # the pieces the real engine runs on the same scheduler
    "kv_cache": ("KVCacheManager",),
    "request": ("Request",),
    # workloads and traces
    "workload": ("AdapterPopularity", "Arrivals", "ClosedLoop", "Lengths", "PromptSet", "SchemaUse", "SharedPrefix",
                 "Stage", "Workload", "WorkloadSpec", "WorkloadSummary", "generate", "staged_arrival_s", "with_tags"),
    "traces": ("read_csv_trace", "read_mooncake"),
    # a run, its records and their summary
    "run": ("SimulationConfig", "simulate"),
    "cluster": ("ROUTERS",),
    "records": ("REQUEST_CHUNK_ROWS", "SimulationResult", "request_tables"),
    "metrics": ("SLO", "Latency", "MetricsSummary", "itl_as_numpy", "slo_attainment", "summarise",
                "weighted_percentiles"),
    # pools behind a gateway
    "gateway": ("FALLBACK", "OUTCOMES", "REJECTED", "ExternalSpec", "GatewayConfig", "GatewayRecords", "GatewayResult",
                "PoolSpec", "RequestClass", "Route", "coded", "simulate_gateway"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"simulator.{module}"), name)
    globals()[name] = value         # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
