"""GPU memory, per GPU after the parallel split: weights, KV cache, activations, headroom.

Formulas (the seeds' sizing section):
    weight memory      = parameters x bytes per parameter (+ scales, + unconverted modules)
    KV cache per token = 2 x layers x KV heads x head dim x bytes per value   (MLA: latent x layers x bytes)
    total KV cache     = KV per token x context length x concurrent sequences
The engine may use `gpu_memory_utilization` of the GPU; what weights, the activation peak
and the CUDA context leave of that is the KV cache, in whole blocks of `block_size` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizer.analytic.parallel import ParallelConfig, kv_heads_per_gpu, layers_per_stage, shard_fraction
from sizer.analytic.weights import (
    LM_HEAD,
    WeightFormat,
    group_bytes,
    linear_groups,
    parameter_count,
    plain_bytes_per_value,
)
from sizer.inputs.model_spec import ModelSpec

GiB = 2**30
GB = 10**9

# Assumptions, printed by the plan (a calibrated profile would measure them):
CUDA_CONTEXT_BYTES = 1 * GiB          # CUDA context, cuBLAS workspace, CUDA graphs, per GPU
NCCL_BUFFER_BYTES = GiB // 2          # extra per GPU when it talks to others (TP or PP > 1)
KV_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp32": 4}


@dataclass(frozen=True)
class WeightMemory:
    format: str
    format_description: str
    parameters: int
    parameters_active: int
    ideal_bytes: float              # parameters x bits / 8: no scales, nothing left unconverted
    total_bytes: float              # one full copy, scales and unconverted modules included
    converted_value_bytes: float
    scale_bytes: float
    unconverted_bytes: float
    per_gpu_bytes: float            # busiest GPU of one replica
    parameters_source: str          # "architecture" or "stated"


def weight_memory(m: ModelSpec, fmt: WeightFormat, p: ParallelConfig, group_size: int = 128,
                  stated_parameters: float | None = None) -> WeightMemory:
    """Bytes of weights in `fmt`, counted matrix by matrix; embeddings and norms stay in the model dtype.

    With `stated_parameters` (a hypothetical model known only by its size) every byte figure
    is scaled by stated / derived, so the ideal figure is exactly stated x bits / 8.
    """
    counts = parameter_count(m)
    converted = scales = unconverted = layers_gpu = lm_head_gpu = 0.0
    for g in linear_groups(m):
        share = shard_fraction(g, m, p)
        values, extra, is_quantised = group_bytes(g, fmt, group_size, m)
        if is_quantised:
            converted += values
            scales += extra
        else:
            unconverted += values
        nbytes = values + extra
        if g.kind == LM_HEAD:
            lm_head_gpu += nbytes * share
        else:
            layers_gpu += nbytes * share
    embed_bytes = counts.embedding * plain_bytes_per_value(fmt)
    other_bytes = counts.norms_and_biases * plain_bytes_per_value(fmt)
    unconverted += embed_bytes + other_bytes
    stage = layers_per_stage(m, p) / m.num_layers
    # One stage holds the embedding, the last the lm_head: with PP the busiest holds the larger one.
    ends = embed_bytes / p.tp + lm_head_gpu if p.pp == 1 else max(embed_bytes / p.tp, lm_head_gpu)
    per_gpu = layers_gpu + ends + other_bytes * stage
    total = converted + scales + unconverted
    ideal = counts.total * fmt.bits / 8
    params, active, source = counts.total, counts.active, "architecture"
    if stated_parameters:
        ratio = stated_parameters / counts.total
        converted, scales, unconverted, total, per_gpu = (
            x * ratio for x in (converted, scales, unconverted, total, per_gpu))
        ideal = stated_parameters * fmt.bits / 8
        params, active, source = int(stated_parameters), int(active * ratio), "stated"
    return WeightMemory(fmt.name, fmt.description, params, active, ideal, total, converted, scales, unconverted,
                        per_gpu, source)


@dataclass(frozen=True)
class KVLayout:
    dtype: str
    bytes_per_value: int
    bytes_per_token: int              # whole model, every layer (sliding layers as if full)
    bytes_per_token_per_gpu: float    # one GPU of the busiest stage, after the TP split
    full_layers: int
    sliding_layers: int
    sliding_window: int | None
    formula: str

    def sequence_bytes(self, tokens: int, block_size: int, per_gpu: bool = True) -> float:
        """KV one sequence of `tokens` holds, in whole blocks; sliding layers keep at most a window.

        `per_gpu`: on one GPU of the busiest stage after the split; else for the whole model.
        """
        layers = self.full_layers + self.sliding_layers
        per_layer = (self.bytes_per_token_per_gpu if per_gpu else self.bytes_per_token) / layers
        full_blocks = math.ceil(tokens / block_size)
        window_tokens = min(tokens, self.sliding_window or tokens)
        sliding_blocks = math.ceil(window_tokens / block_size) + (1 if window_tokens < tokens else 0)
        return per_layer * block_size * (self.full_layers * full_blocks + self.sliding_layers * sliding_blocks)


def kv_layout(m: ModelSpec, kv_dtype: str, p: ParallelConfig) -> KVLayout:
    nbytes = KV_DTYPE_BYTES[kv_dtype]
    stage_layers = layers_per_stage(m, p)
    if m.is_mla:
        latent = m.kv_lora_rank + m.qk_rope_head_dim
        per_token = latent * m.num_layers * nbytes
        per_gpu = latent * stage_layers * nbytes          # the latent is replicated on every TP rank
        formula = (f"(kv_lora_rank {m.kv_lora_rank} + qk_rope_head_dim {m.qk_rope_head_dim}) "
                   f"x {m.num_layers} layers x {nbytes} B")
    else:
        per_token = 2 * m.num_layers * m.num_kv_heads * m.head_dim * nbytes
        per_gpu = 2 * stage_layers * kv_heads_per_gpu(m, p) * m.head_dim * nbytes
        formula = f"2 x {m.num_layers} layers x {m.num_kv_heads} KV heads x {m.head_dim} head dim x {nbytes} B"
    sliding = m.num_sliding_layers
    return KVLayout(kv_dtype, nbytes, per_token, per_gpu, m.num_layers - sliding, sliding, m.sliding_window, formula)


def activation_peak_bytes(m: ModelSpec, p: ParallelConfig, max_num_batched_tokens: int, max_num_seqs: int,
                          activation_bytes: int = 2) -> float:
    """Estimate of the forward pass's peak at the full token budget (what vLLM profiles).

    Per token: residual, normed input and attention output (3 h), q/k/v (/TP), the MLP's
    gate+up intermediate (/TP; top-k experts for MoE); plus fp32 logits for one token per
    sequence over the vocabulary slice.
    """
    h = m.hidden_size
    qkv = (m.num_attention_heads + 2 * m.num_kv_heads) * m.head_dim / p.tp
    inter = (m.num_experts_per_tok * m.moe_intermediate_size if m.is_moe else m.intermediate_size) / p.tp
    per_token = (3 * h + qkv + 2 * inter) * activation_bytes
    logits = min(max_num_seqs, max_num_batched_tokens) * (m.vocab_size / p.tp) * 4
    return max_num_batched_tokens * per_token + logits


@dataclass(frozen=True)
class MemoryBudget:
    """One GPU of one replica (the busiest pipeline stage)."""
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    usable_bytes: float
    weights_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    kv_cache_bytes: float
    kv_blocks: int
    kv_tokens: int
    block_size: int
    max_model_len: int
    sequence_bytes_at_max_model_len: float
    max_seqs_at_max_model_len: int
    fits: bool
    reasons: tuple[str, ...]


def memory_budget(m: ModelSpec, gpu_memory_bytes: int, weights: WeightMemory, kv: KVLayout, p: ParallelConfig,
                  gpu_memory_utilization: float, block_size: int, max_model_len: int,
                  max_num_batched_tokens: int, max_num_seqs: int) -> MemoryBudget:
    usable = gpu_memory_bytes * gpu_memory_utilization
    activations = activation_peak_bytes(m, p, max_num_batched_tokens, max_num_seqs)
    non_torch = CUDA_CONTEXT_BYTES + (NCCL_BUFFER_BYTES if p.tp * p.pp > 1 else 0)
    kv_bytes = usable - weights.per_gpu_bytes - activations - non_torch
    block_bytes = kv.bytes_per_token_per_gpu * block_size
    blocks = max(0, int(kv_bytes // block_bytes)) if kv_bytes > 0 else 0
    seq_bytes = kv.sequence_bytes(max_model_len, block_size)
    max_seqs = int(max(0.0, kv_bytes) // seq_bytes)
    reasons = []
    if weights.per_gpu_bytes > usable:
        reasons.append(f"weights need {weights.per_gpu_bytes / GiB:.2f} GiB per GPU, more than the "
                       f"{usable / GiB:.2f} GiB usable at gpu_memory_utilization {gpu_memory_utilization}")
    elif kv_bytes <= 0:
        reasons.append(f"weights, activations and CUDA context leave no room for KV cache "
                       f"({kv_bytes / GiB:.2f} GiB left of {usable / GiB:.2f} GiB usable)")
    elif max_seqs < 1:
        reasons.append(f"KV cache of {kv_bytes / GiB:.2f} GiB per GPU cannot hold one sequence of "
                       f"max_model_len {max_model_len} ({seq_bytes / GiB:.2f} GiB)")
    return MemoryBudget(gpu_memory_bytes, gpu_memory_utilization, usable, weights.per_gpu_bytes, activations, non_torch,
                        max(0.0, kv_bytes), blocks, blocks * block_size, block_size, max_model_len, seq_bytes, max_seqs,
                        not reasons, tuple(reasons))


