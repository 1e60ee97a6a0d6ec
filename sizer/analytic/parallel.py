"""How a model is split across GPUs: validity, per-GPU shares, bytes communicated per step.

- Tensor parallel (TP) slices attention heads, MLP columns and the vocabulary; KV heads are
  replicated when TP exceeds them (each rank then holds one).
- Pipeline parallel (PP) gives each stage ceil(layers / PP) layers; the first stage also
  holds the embedding, the last the lm_head.
- Expert parallel (EP, vLLM's enable_expert_parallel) puts whole experts on the TP x DP
  ranks instead of slicing each expert by TP.
- Data parallel (DP) ranks each hold a full copy (except EP-sharded experts) and run their own
  sequences. With EP across the DP ranks (vLLM's --data-parallel-size with --enable-expert-parallel,
  SGLang's --enable-dp-attention, TensorRT-LLM's enable_attention_dp: "DEP") attention and the dense
  layers run data-parallel while every MoE layer spans the ranks: tokens go to their experts' GPUs
  and back (all-to-all dispatch and combine), and all ranks step together. A replica's DP ranks are
  simulated as one engine of their combined limits and KV pool whose step is the busiest rank's
  (`rank_batch`: sequences spread evenly) plus, with EP across them, the MoE layers of every rank's
  tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.step_batch import StepBatch, split_attention
from sizer.analytic.weights import LinearGroup
from sizer.errors import InputError
from sizer.inputs.layers import (
    ATTENTION,
    EXPERT,
    LM_HEAD,
    MLP,
    RECURRENT,
    REPLICATED,
    ROUTER,
    SHARED_EXPERT,
    VISION,
    Attention,
    DenseFFN,
    GatedDeltaNet,
    LatentAttention,
    Mamba2,
    MoEFFN,
)
from sizer.inputs.model_spec import ModelSpec


@dataclass(frozen=True)
class ParallelConfig:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    # the data-parallel ranks' balance of a step's prompts: the mean over the busiest rank's share (1.0: spread as
    # evenly as they go; below 1 where each rank schedules its own prompts and the step waits for the busiest)
    context_balance: float = 1.0

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ep(self) -> int:
        """Expert-parallel group size (1 when experts are TP-sliced instead)."""
        return self.tp * self.dp if self.expert_parallel else 1

    @property
    def experts_span_dp(self) -> bool:
        """Attention data-parallel, experts spread over the DP ranks (DEP): MoE layers see every rank's tokens."""
        return self.expert_parallel and self.dp > 1


def rank_batch(batch: StepBatch, ranks: int, context_balance: float = 1.0) -> StepBatch:
    """The busiest of `ranks` data-parallel ranks' share of a step: decodes spread as evenly as they go (ceil),
    prefill chunks as evenly at `context_balance` 1.0, else the busiest rank takes the mean / `context_balance` of
    them (ceil, at most all); each keeps its tokens, context and query-key pairs (split_attention's split)."""
    if ranks == 1:
        return batch
    decode, decode_ctx, prefill, n, c = split_attention(batch)
    d = -(-decode // ranks)
    p = -(-prefill // ranks) if context_balance == 1.0 else min(prefill, math.ceil(prefill / (ranks * context_balance)))
    decode_tokens = (batch.new_tokens - prefill * n) / decode if decode else 0.0   # > 1 when verifying drafts
    tokens = d * decode_tokens + p * n
    share = tokens / batch.new_tokens
    return StepBatch(d + p, max(1, round(tokens)), round(d * decode_ctx + p * c),
                     round(d * (decode_ctx + decode_tokens) + p * (n * c + n * (n + 1) / 2)), p, round(p * n),
                     round(batch.draft_tokens * share), round(batch.lora_tokens * share),
                     min(batch.lora_adapters, math.ceil(batch.lora_adapters * share)))


def _split_sizes(m: ModelSpec, p: ParallelConfig) -> list[tuple[str, int]]:
    """(what, count) pairs tensor parallelism must divide: heads of each mixer kind, MLP and expert widths."""
    sizes: list[tuple[str, int]] = []
    for mixer in {layer.mixer for layer in m.layers}:
        if isinstance(mixer, (Attention, LatentAttention)):
            sizes.append(("attention heads", mixer.num_heads))
        elif isinstance(mixer, Mamba2):
            sizes += [("Mamba-2 heads", mixer.num_heads), ("Mamba-2 groups", mixer.n_groups)]
        elif isinstance(mixer, GatedDeltaNet):
            sizes += [("linear-attention key heads", mixer.num_key_heads),
                      ("linear-attention value heads", mixer.num_value_heads)]
    for ffn in {layer.ffn for layer in m.layers}:
        if isinstance(ffn, DenseFFN):
            sizes.append(("intermediate size", ffn.width))
        elif isinstance(ffn, MoEFFN) and not p.expert_parallel:
            sizes.append(("intermediate size", ffn.expert_width))
    return sorted(set(sizes))


def validate_split(m: ModelSpec, p: ParallelConfig, file: str | None = None) -> None:
    """Raise InputError naming the deployment field when the split cannot work."""
    field = "deployment.tensor_parallel_size"
    for what, size in _split_sizes(m, p):
        if size % p.tp:
            counted = f"the {what} {size}" if what == "intermediate size" else f"the {size} {what}"
            raise InputError(file, field, f"{p.tp} does not divide {counted} of {m.name}")
    for kv in sorted({a.num_kv_heads for a in m.mixers(Attention)}):
        if kv % p.tp and p.tp % kv:
            raise InputError(file, field, f"{p.tp} neither divides nor is a multiple of the {kv} KV heads of {m.name}")
    if p.pp > m.num_layers:
        raise InputError(file, "deployment.pipeline_parallel_size",
                         f"{p.pp} stages for {m.num_layers} layers; expected at most one stage per layer")
    if p.expert_parallel:
        moe = m.moe
        if moe is None:
            raise InputError(file, "deployment.enable_expert_parallel", f"{m.name} has no experts")
        if moe.num_experts % p.ep:
            raise InputError(file, "deployment.enable_expert_parallel",
                             f"EP size {p.ep} (TP x DP) does not divide the {moe.num_experts} experts")


def layers_per_stage(m: ModelSpec, p: ParallelConfig) -> int:
    return math.ceil(m.num_layers / p.pp)


def shard_fraction(g: LinearGroup, m: ModelSpec, p: ParallelConfig) -> float:
    """Share of group `g`'s parameters one GPU of the busiest pipeline stage holds."""
    if g.kind in (LM_HEAD, VISION):    # the last stage's lm_head, the first stage's vision encoder
        return 1.0 / p.tp
    stage = layers_per_stage(m, p) / m.num_layers
    if g.kind in (ATTENTION, MLP, SHARED_EXPERT, RECURRENT):
        return stage / tp_ways(g.kv_heads, p.tp)
    if g.kind == EXPERT:
        return stage / (p.ep if p.expert_parallel else p.tp)
    if g.kind in (ROUTER, REPLICATED):
        return stage
    raise ValueError(g.kind)


def tp_ways(kv_heads: int | None, tp: int) -> int:
    """How many ways TP splits a linear layer: `tp`, but a K or V projection of fewer KV heads than `tp` only as many
    ways as it has heads (one replicated KV head per rank); `kv_heads` None or 0: not a K or V projection."""
    return min(tp, kv_heads) if kv_heads else tp


def kv_heads_per_gpu(num_kv_heads: int, p: ParallelConfig) -> int:
    """KV heads one TP rank holds (one replicated head when TP exceeds them)."""
    return max(1, num_kv_heads // p.tp)


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
    if p.experts_span_dp:
        # dispatch and combine as the engines run them by default: every rank's tokens gathered to every GPU and
        # the experts' outputs reduce-scattered back (TensorRT-LLM on Hopper: NCCL all-gather and reduce-scatter;
        # vLLM's all2all_backend allgather_reducescatter; SGLang's DP attention without --moe-a2a-backend deepep),
        # (DP - 1) rank shares of the hidden state each way: the gather runs over the data-parallel group (vLLM's
        # get_dp_group().all_gatherv), and with TP inside the ranks a rank's tokens are already on each of its GPUs
        # (after the TP all-reduce), so TP x DP GPUs receive no more than DP ranks' shares
        moe_layers = math.ceil(m.num_moe_layers / p.pp)
        ep = 2 * moe_layers * (p.dp - 1) * h * activation_bytes
    return CommPerStep(tp, pp, ep, 2 * layers if p.tp > 1 else 0)

