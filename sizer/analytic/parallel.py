"""How a model is split across GPUs: validity, per-GPU shares, bytes communicated per step.

- Tensor parallel (TP) slices attention heads, MLP columns and the vocabulary; KV heads are
  replicated when TP exceeds them (each rank then holds one).
- Pipeline parallel (PP) gives each stage ceil(layers / PP) layers; the first stage also
  holds the embedding, the last the lm_head.
- Expert parallel (EP, vLLM's enable_expert_parallel) puts whole experts on the TP x DP
  ranks instead of slicing each expert by TP.
- Data parallel (DP) ranks each hold a full copy (except EP-sharded experts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizer.analytic.weights import ATTENTION, EXPERT, LM_HEAD, MLP, REPLICATED, ROUTER, SHARED_EXPERT, LinearGroup
from sizer.errors import InputError
from sizer.inputs.model_spec import ModelSpec


@dataclass(frozen=True)
class ParallelConfig:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    expert_parallel: bool = False

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ep(self) -> int:
        """Expert-parallel group size (1 when experts are TP-sliced instead)."""
        return self.tp * self.dp if self.expert_parallel else 1


def validate_split(m: ModelSpec, p: ParallelConfig, file: str | None = None) -> None:
    """Raise InputError naming the deployment field when the split cannot work."""
    field = "deployment.tensor_parallel_size"
    if m.num_attention_heads % p.tp:
        raise InputError(file, field, f"{p.tp} does not divide the {m.num_attention_heads} attention heads of {m.name}")
    if not m.is_mla and m.num_kv_heads % p.tp and p.tp % m.num_kv_heads:
        raise InputError(file, field,
                         f"{p.tp} neither divides nor is a multiple of the {m.num_kv_heads} KV heads of {m.name}")
    sizes = [m.intermediate_size] if not m.is_moe or m.num_dense_layers else []
    if m.is_moe and not p.expert_parallel:
        sizes.append(m.moe_intermediate_size)
    for size in sizes:
        if size % p.tp:
            raise InputError(file, field, f"{p.tp} does not divide the intermediate size {size} of {m.name}")
    if p.pp > m.num_layers:
        raise InputError(file, "deployment.pipeline_parallel_size",
                         f"{p.pp} stages for {m.num_layers} layers; expected at most one stage per layer")
    if p.expert_parallel:
        if not m.is_moe:
            raise InputError(file, "deployment.enable_expert_parallel", f"{m.name} has no experts")
        if m.num_experts % p.ep:
            raise InputError(file, "deployment.enable_expert_parallel",
                             f"EP size {p.ep} (TP x DP) does not divide the {m.num_experts} experts")


def layers_per_stage(m: ModelSpec, p: ParallelConfig) -> int:
    return math.ceil(m.num_layers / p.pp)


def shard_fraction(g: LinearGroup, m: ModelSpec, p: ParallelConfig) -> float:
    """Share of group `g`'s parameters one GPU of the busiest pipeline stage holds."""
    stage = 1.0 if g.kind == LM_HEAD else layers_per_stage(m, p) / m.num_layers
    if g.kind in (ATTENTION, MLP, SHARED_EXPERT):
        if g.kv_heads and p.tp > g.kv_heads:
            return stage / g.kv_heads       # one replicated KV head per rank
        return stage / p.tp
    if g.kind == EXPERT:
        return stage / (p.ep if p.expert_parallel else p.tp)
    if g.kind == LM_HEAD:
        return 1.0 / p.tp
    if g.kind in (ROUTER, REPLICATED):
        return stage
    raise ValueError(g.kind)


def kv_heads_per_gpu(m: ModelSpec, p: ParallelConfig) -> int:
    return max(1, m.num_kv_heads // p.tp)


@dataclass(frozen=True)
class CommPerStep:
    """Bytes one GPU sends per engine step, per token computed, by collective."""
    tp_allreduce_bytes_per_token: float     # 2 all-reduces per layer of the hidden state
    pp_send_bytes_per_token: float          # hidden state between consecutive stages
    ep_alltoall_bytes_per_token: float      # dispatch + combine of the routed tokens
    allreduces_per_step: int


def comm_per_step(m: ModelSpec, p: ParallelConfig, activation_bytes: int = 2) -> CommPerStep:
    """Ring all-reduce moves 2 (N-1)/N of the message per GPU; all-to-all (N-1)/N of it."""
    h = m.hidden_size
    layers = layers_per_stage(m, p)
    tp = 2 * layers * h * activation_bytes * 2 * (p.tp - 1) / p.tp if p.tp > 1 else 0.0
    pp = h * activation_bytes if p.pp > 1 else 0.0
    ep = 0.0
    if p.expert_parallel and p.ep > 1:
        moe_layers = math.ceil(m.num_moe_layers / p.pp)
        ep = 2 * moe_layers * m.num_experts_per_tok * h * activation_bytes * (p.ep - 1) / p.ep
    return CommPerStep(tp, pp, ep, 2 * layers if p.tp > 1 else 0)
