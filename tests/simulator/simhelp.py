"""Helpers for the simulator tests: a linear step-time model whose numbers the tests derive by
hand, small configurations, and the trace slices' folder."""

from __future__ import annotations

from pathlib import Path

from simulator.engine_loop import BARE
from simulator.replica import ReplicaConfig
from simulator.run import SimulationConfig
from simulator.scheduler import SchedulerConfig
from simulator.step_batch import StepBatch

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


class LinearStepModel:
    """step = base + per_token x new tokens + per_context x context tokens (seconds)."""

    name = "linear"

    def __init__(self, base_s: float = 5e-3, per_token_s: float = 5e-5, per_context_s: float = 1e-7):
        self.base_s, self.per_token_s, self.per_context_s = base_s, per_token_s, per_context_s

    def step_time(self, batch: StepBatch) -> float:
        return self.base_s + self.per_token_s * batch.new_tokens + self.per_context_s * batch.context_tokens


# The tests' own settings for what they leave out (the simulator has no defaults; sizer resolves them).
SCHEDULER = dict(enable_chunked_prefill=True, preemption_mode="recompute", speculative=None, max_model_len=None,
                 prefill_only=False, reserve_full_kv=False)
REPLICA = dict(enable_prefix_caching=True, tenant_isolation=False, swap=None, engine_loop=BARE)
SIMULATION = dict(num_replicas=1, router="round_robin", prefix_balance_slack=8, disaggregation=None)


def scheduler_config(max_num_seqs: int, max_num_batched_tokens: int, **kw) -> SchedulerConfig:
    return SchedulerConfig(max_num_seqs, max_num_batched_tokens, **{**SCHEDULER, **kw})


def sim_config(num_blocks: int = 4000, block_size: int = 16, max_num_seqs: int = 64,
               max_num_batched_tokens: int = 512, **kw) -> SimulationConfig:
    sched_kw = {k: kw.pop(k) for k in list(kw) if k in SchedulerConfig.__dataclass_fields__}
    rep_kw = {k: kw.pop(k) for k in list(kw) if k in ReplicaConfig.__dataclass_fields__}
    sched = scheduler_config(max_num_seqs, max_num_batched_tokens, **sched_kw)
    replica = ReplicaConfig(sched, num_blocks, block_size, **{**REPLICA, **rep_kw})
    return SimulationConfig(replica, **{**SIMULATION, **kw})
