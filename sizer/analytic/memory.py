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
from collections.abc import Callable
from dataclasses import dataclass, replace

from sizer.analytic.formats import WeightFormat, embedding_bytes_per_value, group_bytes, vector_bytes
from sizer.analytic.parallel import ParallelConfig, kv_heads_per_gpu, layers_per_stage, shard_fraction
from sizer.analytic.weights import LM_HEAD, linear_groups, parameter_count
from sizer.inputs.layers import (
    ATTENTION,
    CHUNKED,
    FFN,
    MLP,
    REPLICATED,
    ROUTER,
    SHARED_EXPERT,
    VISION,
    Attention,
    DenseFFN,
    LatentAttention,
    MoEFFN,
)
from sizer.inputs.model_spec import ModelSpec

GiB = 2**30
GB = 10**9

# Assumptions, printed by the plan (a calibrated profile would measure them):
CUDA_CONTEXT_BYTES = 1 * GiB          # CUDA context, cuBLAS workspace, CUDA graphs, per GPU
NCCL_BUFFER_BYTES = GiB // 2          # extra per GPU when it talks to others (TP or PP > 1, DEP)
KV_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp32": 4,
                  # llama.cpp cache types (ggml blocks of 32 values: q8_0 = 32 int8 + one fp16 scale = 34 bytes,
                  # q4_0 = 16 bytes of nibbles + one fp16 scale = 18 bytes, q4_1 + an fp16 min = 20, q5_0 = q4_0 +
                  # 4 bytes of fifth bits = 22, q5_1 = 24, iq4_nl = 16 bytes of 4-bit indices + fp16 scale = 18;
                  # ggml-common.h block_q8_0, block_q4_0, block_q4_1, block_q5_0, block_q5_1, block_iq4_nl)
                  "f16": 2, "f32": 4, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32, "q5_0": 22 / 32,
                  "q5_1": 24 / 32, "iq4_nl": 18 / 32}


def kv_value_bytes(kv_dtype: str) -> float:
    """Bytes per cached value; "K/V" (llama.cpp's --cache-type-k and -v differing) averages the two halves."""
    k, _, v = kv_dtype.partition("/")
    return (KV_DTYPE_BYTES[k] + KV_DTYPE_BYTES[v or k]) / 2


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
        values, extra, in_format = group_bytes(g, fmt, group_size, m)
        converted += in_format
        scales += extra
        unconverted += values - in_format
        nbytes = values + extra
        if g.kind == LM_HEAD:
            lm_head_gpu += nbytes * share
        else:
            layers_gpu += nbytes * share
    embed_bytes = counts.embedding * embedding_bytes_per_value(fmt, m)
    other_bytes = vector_bytes(fmt, m, counts.norms_and_biases)
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
class KVGroup:
    """Layers that cache the same values per token and keep the same span of tokens."""
    label: str                        # the mixer kind ("full attention", "sliding-window attention (window 4096)")
    layers: int
    bytes_per_token: float            # these layers together, whole model
    bytes_per_token_per_gpu: float    # one GPU of the busiest stage, after the TP split
    window_tokens: int | None         # sliding window or local-attention chunk; None: every token is attended
    flops_per_pair_per_layer: int     # attention FLOPs per query-key pair attended in one layer, all heads
    # DeepSeek sparse attention (DSA): each query attends to at most `attended_tokens` cached tokens, chosen by an
    # indexer that scores every cached token against its own key cache (included in bytes_per_token above)
    attended_tokens: int | None = None
    index_bytes_per_token_per_gpu: float = 0.0
    index_flops_per_pair_per_layer: int = 0
    keeps_every_token: bool = False   # the engine caches every token of a windowed layer (it attends within the window)
    # layer slots the engine's allocator gives these layers, padding included (vLLM's hybrid KV cache groups every
    # kind of layer in groups of one size: `hybrid_group_slots`); 0: as many as they are
    allocated_layers: int = 0

    @property
    def padding(self) -> float:
        """The allocator's layer slots over these layers (1: no padding)."""
        return (self.allocated_layers or self.layers) / self.layers

    @property
    def allocated_bytes_per_token_per_gpu(self) -> float:
        """What these layers take of the KV pool a token, on one GPU: their bytes, with the allocator's padding."""
        return self.bytes_per_token_per_gpu * self.padding

    @property
    def kept_window_tokens(self) -> int | None:
        """The tokens of a sequence these layers keep in the cache: their window, or None (every token)."""
        return None if self.keeps_every_token else self.window_tokens


@dataclass(frozen=True)
class KVLayout:
    dtype: str
    bytes_per_value: float            # K and V averaged when their types differ
    bytes_per_token: float            # whole model, every layer that caches KV (windowed ones as if full)
    bytes_per_token_per_gpu: float    # one GPU of the busiest stage, after the TP split
    groups: tuple[KVGroup, ...]
    state_layers: int                 # Mamba-2 / linear-attention layers: a fixed state per sequence
    state_bytes_per_seq: int          # whole model
    state_bytes_per_seq_per_gpu: float
    formula: str
    # the engine takes a running sequence's recurrent state from the KV blocks' pool (vLLM's hybrid KV cache);
    # others (llama.cpp's per-sequence cells, SGLang's and TensorRT-LLM's own Mamba pools) have it set aside
    pooled_state: bool = False
    # vLLM's hybrid KV cache gives every kind of layer one page size (`hybrid_pages`): the KV block it takes (0: the
    # engine's own) and a sequence's recurrent state as the pool holds it, padded to those pages (0: its own bytes)
    block_tokens: int = 0
    padded_state_bytes_per_seq_per_gpu: float = 0.0

    @property
    def pool_state_bytes_per_seq_per_gpu(self) -> float:
        """A sequence's recurrent state on one GPU as its memory holds it: padded to the pool's pages, or its bytes."""
        return self.padded_state_bytes_per_seq_per_gpu or self.state_bytes_per_seq_per_gpu

    @property
    def pool_state_bytes_per_seq(self) -> float:
        """The same for the whole model: its state's bytes, padded as one GPU's pages pad them."""
        if not self.padded_state_bytes_per_seq_per_gpu:
            return float(self.state_bytes_per_seq)
        return self.state_bytes_per_seq * self.padded_state_bytes_per_seq_per_gpu / self.state_bytes_per_seq_per_gpu

    @property
    def pool_bytes_per_token_per_gpu(self) -> float:
        """What one token of a KV block holds on one GPU: every layer's KV; or, when some layers keep only a window
        and others everything, the latter's: the windowed layers hold their own blocks (`window_groups`)."""
        if not self.window_groups:
            return self.bytes_per_token_per_gpu
        return self.full_bytes_per_token

    @property
    def full_bytes_per_token(self) -> float:
        """Bytes per token on one GPU of the layers that keep every token, summed group by group."""
        return sum(g.allocated_bytes_per_token_per_gpu for g in self.groups if not g.kept_window_tokens)

    @property
    def window_groups(self) -> tuple[tuple[float, int], ...]:
        """Per windowed group: (its bytes per token over a pool block's, its window), and for a hybrid model's
        recurrent state (its bytes a sequence over a pool token's, window 0: that many tokens' worth of pool blocks
        a sequence, whatever its length), as the simulator's KV pool takes them
        (simulator.config.ReplicaConfig.kv_windows); () unless some layers also keep every token."""
        full = self.full_bytes_per_token
        if not full:
            return ()
        windows = tuple((g.allocated_bytes_per_token_per_gpu / full, g.kept_window_tokens) for g in self.groups
                        if g.kept_window_tokens)
        return windows + (((self.pool_state_bytes_per_seq_per_gpu / full, 0),) if self.state_in_pool else ())

    @property
    def state_in_pool(self) -> bool:
        """A hybrid model's recurrent state comes from the KV blocks' pool, a fixed share a running sequence (vLLM's
        hybrid KV cache: each Mamba / linear-attention group takes a block a request from the one block pool); a
        model of recurrent layers alone, or another engine, has it set aside for the sequences it runs
        (`memory_budget`)."""
        return bool(self.pooled_state and self.state_bytes_per_seq_per_gpu and self.full_bytes_per_token)

    @property
    def windowed_bytes_per_token(self) -> tuple[tuple[float, int], ...]:
        """(bytes per token on one GPU, window) of each windowed group: what kept_bytes caps at the window."""
        return tuple((g.bytes_per_token_per_gpu, g.kept_window_tokens) for g in self.groups if g.kept_window_tokens)

    @property
    def unwindowed_bytes_per_token(self) -> float:
        """Bytes per token on one GPU of the layers that keep every token."""
        windowed = self.windowed_bytes_per_token
        return self.bytes_per_token_per_gpu - sum(b for b, _ in windowed) if windowed else self.bytes_per_token_per_gpu

    def kept_bytes(self, tokens: float, window_cells: Callable[[int], float] | None = None) -> float:
        """KV bytes on one GPU of the busiest stage for `tokens` cached tokens, whole (not in blocks, no recurrent
        state): a layer that keeps every token holds all of them, a windowed layer min(tokens, its window), or the
        cells `window_cells(window)` an engine sets aside for its windowed layers (llama.cpp's SWA cache)."""
        total = tokens * self.bytes_per_token_per_gpu       # every layer as if it kept every token, less the windows
        for g in self.groups:
            if g.kept_window_tokens:
                cells = window_cells(g.kept_window_tokens) if window_cells else min(tokens, g.kept_window_tokens)
                total -= g.bytes_per_token_per_gpu * (tokens - cells)
        return total

    def longest_tokens(self, nbytes: float) -> int | None:
        """The most tokens one sequence keeps in `nbytes` on one GPU (kept_bytes' inverse: windowed layers stop
        growing at their window); None when every layer is windowed and their windows fit (no length limit)."""
        full = self.full_bytes_per_token
        widest = max((g.kept_window_tokens or 0 for g in self.groups), default=0)
        if not full and self.kept_bytes(widest) <= nbytes:
            return None
        return largest_fitting(nbytes, self.kept_bytes, int(nbytes / full) + 1 if full else widest)

    def sequence_bytes(self, tokens: int, block_size: int, per_gpu: bool = True) -> float:
        """KV and recurrent state one sequence of `tokens` holds, KV in whole blocks; windowed layers keep
        at most their window (plus the block it straddles).

        `per_gpu`: on one GPU of the busiest stage after the split; else for the whole model.
        """
        total = self.pool_state_bytes_per_seq_per_gpu if per_gpu else self.pool_state_bytes_per_seq
        for g in self.groups:
            kept = min(tokens, g.kept_window_tokens or tokens)
            blocks = math.ceil(kept / block_size) + (1 if kept < tokens else 0)
            total += (g.bytes_per_token_per_gpu if per_gpu else g.bytes_per_token) * g.padding * block_size * blocks
        return total


def largest_fitting(nbytes: float, bytes_of: Callable[[int], float], hi: int) -> int:
    """The largest n in [0, hi] with bytes_of(n) <= nbytes (bytes_of rising in n; 0 when none fits)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if bytes_of(mid) <= nbytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


FP8_DS_MLA_GROUP = 128       # fp8_ds_mla: latent values per fp32 scale


def fp8_ds_mla_bytes(mixer: LatentAttention) -> int:
    """One token of one layer in vLLM's fp8_ds_mla cache (DSA models with an fp8 KV cache): the latent's FP8
    values, an fp32 scale per 128 of them, the RoPE dims in 16 bits (vllm/v1/kv_cache_interface.py MLAAttentionSpec:
    656 B for DeepSeek-V3.2)."""
    return mixer.kv_lora_rank + -(-mixer.kv_lora_rank // FP8_DS_MLA_GROUP) * 4 + mixer.qk_rope_head_dim * 2


def hybrid_group_slots(layers: list[int]) -> list[int]:
    """The layer slots vLLM's hybrid KV cache gives each kind of layer when every kind has the same page size
    (vllm/v1/core/kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size): groups of one size, the fewest
    layers of a kind (the most, where that is under 1.5 x the fewest), each kind padded up to whole groups; a
    block holds a page of every slot of a group. Gemma-3-27B's 52 sliding and 10 full layers: groups of 10, the
    sliding layers in 6 (60 slots, 8 of them padding)."""
    size = min(layers)
    if max(layers) < 1.5 * size:
        size = max(layers)
    return [-(-n // size) * size for n in layers]


# vLLM's attention backends' smallest kernel page, tokens (FlashAttention's get_supported_kernel_block_sizes:
# MultipleOf(16); FlashInfer's [16, 32, 64]; Triton's MultipleOf(16))
KERNEL_BLOCK_ALIGNMENT = 16


def hybrid_block_tokens(state_page_bytes: float, token_page_bytes: float, block_size: int) -> int:
    """The KV block vLLM takes for a hybrid (attention + Mamba / linear-attention) model: the fewest tokens, a
    multiple of max(16, block_size), whose page in one attention layer holds one layer's recurrent state, or
    `block_size` when that is more (vllm/platforms/interface.py `_align_hybrid_block_size`, mamba_cache_mode none
    and align; the state is then padded to that page). Qwen3-Next at TP 2 in bf16: 548,864 B of state over 1,024 B
    a token, 16 x ceil(548,864 / 16,384) = 544 tokens."""
    align = max(KERNEL_BLOCK_ALIGNMENT, block_size)
    return max(block_size, align * math.ceil(state_page_bytes / (align * token_page_bytes) - 1e-9))


def kv_layout(m: ModelSpec, kv_dtype: str, p: ParallelConfig, keeps_chunks: bool = False,
              hybrid_groups: bool = False, block_size: int = KERNEL_BLOCK_ALIGNMENT) -> KVLayout:
    """KV bytes per token by group of layers, and the Mamba-2 / linear-attention state per sequence
    (ModelSpec.state_bytes_per_seq: convolution window in the model's dtype, recurrent state in the
    config's mamba_ssm_cache_dtype when it states one). `keeps_chunks`: the engine caches every token of
    chunked-local layers (Llama-4's), attending within the chunk (`KEEPS_CHUNKED_KV` in sizer/sizing/presets.py).
    `hybrid_groups`: vLLM's hybrid KV cache (kinds of layer padded to whole groups, a hybrid model's recurrent
    state taken from the KV pool in pages of one attention layer's block, `block_size` tokens or the more that
    `hybrid_block_tokens` needs), else another engine's allocator (each layer's own bytes, the state set aside)."""
    nbytes = kv_value_bytes(kv_dtype)
    stage = layers_per_stage(m, p) / m.num_layers
    groups: dict[object, list] = {}
    for layer in m.layers:
        mixer = layer.mixer
        if mixer.kv_values_per_token:
            groups.setdefault(mixer, []).append(layer)
    kv_groups, terms = [], []
    for mixer, layers in groups.items():
        n = len(layers)
        per_token = mixer.kv_values_per_token * n * nbytes
        index = 0.0
        if isinstance(mixer, LatentAttention):   # the latent (and DSA's index keys) are replicated on every TP rank
            index = mixer.index_key_bytes_per_token * n
            if mixer.attended_tokens and kv_dtype.startswith("fp8"):
                # vLLM's DeepseekV32ForCausalLM.verify_and_update_config turns an fp8 cache of a DSA model into
                # fp8_ds_mla (FlashMLA sparse's layout): the latent in FP8 with an fp32 scale per 128 values, the
                # RoPE dims in 16 bits (656 B a layer for DeepSeek-V3.2's 512 + 64)
                per_token = fp8_ds_mla_bytes(mixer) * n
                terms.append(f"fp8_ds_mla (kv_lora_rank {mixer.kv_lora_rank} x 1 B + "
                             f"{-(-mixer.kv_lora_rank // FP8_DS_MLA_GROUP)} fp32 scales + qk_rope_head_dim "
                             f"{mixer.qk_rope_head_dim} x 2 B) x {n} layers")
            else:
                terms.append(f"(kv_lora_rank {mixer.kv_lora_rank} + qk_rope_head_dim {mixer.qk_rope_head_dim}) "
                             f"x {n} layers x {nbytes:g} B")
            per_token += index
            per_gpu = per_token * stage
            if index:
                terms[-1] += f" + indexer key {mixer.index_key_bytes_per_token} B (FP8 + scale) x {n} layers"
        else:
            per_gpu = 2 * kv_heads_per_gpu(mixer.num_kv_heads, p) * mixer.head_dim * n * nbytes * stage
            terms.append(f"2 x {n} layers x {mixer.num_kv_heads} KV heads x {mixer.head_dim} head dim x {nbytes:g} B"
                         + (f" ({mixer.label})" if len(groups) > 1 or mixer.window_tokens else ""))
        dsa = isinstance(mixer, LatentAttention) and mixer.attended_tokens
        kv_groups.append(KVGroup(mixer.label, n, per_token, per_gpu, mixer.window_tokens, mixer.flops_per_pair,
                                 mixer.attended_tokens if dsa else None, index * stage,
                                 mixer.index_flops_per_pair if dsa else 0,
                                 keeps_chunks and isinstance(mixer, Attention) and mixer.span == CHUNKED))
    stateful = [layer.mixer for layer in m.layers if layer.mixer.recurrent_state_values_per_seq]
    state = sum(m.state_bytes_per_seq(mixer) for mixer in stateful)
    pages = {g.bytes_per_token_per_gpu / g.layers for g in kv_groups}
    padding, block_tokens, padded_state = "", 0, 0.0
    if hybrid_groups and kv_groups and len(pages) == 1 and (stateful or len(kv_groups) > 1):
        kinds = [g.layers for g in kv_groups]
        if stateful:
            token_page = next(iter(pages)) / stage                      # one attention layer, one token, one GPU
            block_tokens = hybrid_block_tokens(max(m.state_bytes_per_seq(x) for x in stateful) / p.tp, token_page,
                                               block_size)
            kinds.append(len(stateful))
        slots = hybrid_group_slots(kinds)
        if stateful:
            padded_state = slots.pop() * stage * block_tokens * token_page
        kv_groups = [replace(g, allocated_layers=n) for g, n in zip(kv_groups, slots, strict=True)]
        padded = [g for g in kv_groups if g.allocated_layers != g.layers]
        if padded:
            padding = ("; in the pool, vLLM's hybrid KV cache pads each kind of layer to whole groups: "
                       + ", ".join(f"{g.allocated_layers} slots for the {g.layers} {g.label} layers" for g in padded))
    return KVLayout(kv_dtype, nbytes, sum(g.bytes_per_token for g in kv_groups),
                    sum(g.bytes_per_token_per_gpu for g in kv_groups), tuple(kv_groups), len(stateful), state,
                    state * stage / p.tp, (" + ".join(terms) or "no layer caches KV") + padding,
                    pooled_state=hybrid_groups, block_tokens=block_tokens,
                    padded_state_bytes_per_seq_per_gpu=padded_state)



def activation_peak_bytes(m: ModelSpec, p: ParallelConfig, max_num_batched_tokens: int, max_num_seqs: int,
                          activation_bytes: int = 2) -> float:
    """Estimate of the forward pass's peak at the full token budget (what vLLM profiles).

    Per token: residual, normed input and attention output (3 h), the widest mixer's input
    projections (q/k/v, or Mamba's in_proj; /TP), the widest MLP's gate+up intermediate (/TP;
    top-k experts and the shared expert for MoE); plus fp32 logits for one token per sequence
    over the vocabulary slice.
    """
    h = m.hidden_size
    mixers = {layer.mixer for layer in m.layers}
    ffns = {layer.ffn for layer in m.layers}
    qkv = max(sum(lin.out_features for lin in mixer.linears(h)[:-1]) for mixer in mixers) / p.tp
    inter = max(_ffn_width(ffn) for ffn in ffns) / p.tp
    per_token = (3 * h + qkv + 2 * inter) * activation_bytes
    logits = min(max_num_seqs, max_num_batched_tokens) * (m.vocab_size / p.tp) * 4
    return max_num_batched_tokens * per_token + logits


def fused_moe_workspace_bytes(m: ModelSpec, p: ParallelConfig, max_num_tokens: int, input_bytes: int) -> float:
    """TensorRT-LLM's CUTLASS fused-MoE workspace at its largest, which the profiling forward pass at
    max_num_tokens reaches and the KV cache then does without (its KvCacheCreator sizes the cache from the
    memory that pass leaves).

    The MoE op sees every rank's tokens under attention DP (each rank profiles max_num_tokens of its own and
    the MoE layer gathers them: rows = max_num_tokens x DP ranks), else the rank's; it permutes every row's
    top-k copies (k x rows expanded rows) and keeps two overlapped buffers of them (CutlassMoeFCRunner::
    getWorkspaceDeviceBufferSizes, NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/
    moe_kernels.cu at ac73e3116fb44f06ec9873d68b114a3fc11c19a7; KvCacheCreator in tensorrt_llm/_torch/pyexecutor/
    _util.py): the GEMM inputs, the larger of the second GEMM's 16-bit output (hidden values; the permuted
    input is no wider) and the first's activated result (expert width at `input_bytes`: 1 for FP8
    activations), and the GEMM outputs, the larger of the first GEMM's 16-bit output (2 x expert width where
    gated) and the second's; expert width /TP where experts are TP-sliced. Index and scale buffers (bytes per
    row, not per hidden value) and the gathered hidden states are left out. 0 for a model without experts."""
    moes = [layer.ffn for layer in m.layers if isinstance(layer.ffn, MoEFFN)]
    if not moes:
        return 0.0
    rows = max_num_tokens * (p.dp if p.experts_span_dp else 1)

    def workspace(ffn: MoEFFN) -> float:
        hidden = ffn.latent or m.hidden_size
        width = ffn.expert_width / (1 if p.expert_parallel else p.tp)
        inputs = max(hidden * 2, width * input_bytes)                    # fc2's output, fc1's activated result
        outputs = max(width * (2 if ffn.gated else 1) * 2, hidden * 2)   # fc1's (gated) output, fc2's
        return ffn.top_k * rows * (inputs + outputs)
    return max(workspace(ffn) for ffn in moes)


def gathered_moe_bytes(m: ModelSpec, p: ParallelConfig, max_num_tokens: int, input_bytes: int) -> float:
    """Under attention DP with the experts spread over the ranks, the rows TensorRT-LLM's fused-MoE op holds beside
    its workspace (`fused_moe_workspace_bytes`): every rank's max_num_tokens rows allgathered to each GPU (the
    hidden values at `input_bytes`, as the workspace reads them: FP8 per-tensor checkpoints quantize before the
    gather, block-FP8 ones would gather 16-bit values, not told apart here; and each top-k choice's int32 expert
    id and fp32 scale) and the op's 16-bit output for every gathered row, which is
    reduce-scattered back only after it (CutlassFusedMoE.forward_chunk: `allgather([x, x_sf, token_selected_slots,
    token_final_scales])`, `torch.ops.trtllm.fused_moe`, then `reducescatter_or_allreduce`; NVIDIA/TensorRT-LLM
    tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py). A rank's own rows without attention DP are
    `activation_peak_bytes`' hidden terms; 0 there and for a model without experts."""
    moes = [layer.ffn for layer in m.layers if isinstance(layer.ffn, MoEFFN)]
    if not moes or not p.experts_span_dp:
        return 0.0
    rows = max_num_tokens * p.dp
    return max(rows * ((ffn.latent or m.hidden_size) * (input_bytes + 2) + ffn.top_k * (4 + 4)) for ffn in moes)


def trtllm_moe_peak_bytes(m: ModelSpec, p: ParallelConfig, max_num_tokens: int, compute: str) -> float:
    """TensorRT-LLM's fused-MoE op beyond `activation_peak_bytes` at `max_num_tokens` a rank: its CUTLASS workspace
    and, under attention DP, the gathered rows and their output; its inputs 1 byte a value under FP8 compute, else
    2 (FP4 inputs are counted at 16 bits: no measurement of NVFP4's buffers here)."""
    input_bytes = 1 if compute == "fp8" else 2
    return (fused_moe_workspace_bytes(m, p, max_num_tokens, input_bytes)
            + gathered_moe_bytes(m, p, max_num_tokens, input_bytes))


def engine_moe_peak_bytes(m: ModelSpec, p: ParallelConfig, engine: str, max_num_tokens: int, compute: str) -> float:
    """The fused-MoE memory an engine's profiling pass reaches beside `activation_peak_bytes`: TensorRT-LLM's
    (`trtllm_moe_peak_bytes`, activations in `compute`); 0 for the others, whose MoE buffers that estimate's
    top-k intermediate stands for."""
    if engine != "tensorrt-llm":
        return 0.0
    return trtllm_moe_peak_bytes(m, p, max_num_tokens, compute)


# TensorRT-LLM's KvCacheCreator profiles with the dummy prompts of `_create_dummy_context_requests` (max_num_tokens
# tokens in prompts of at most max_seq_len - 1, times the ranks under attention DP) in a KV cache of their blocks, each
# prompt's tokens plus one generated and one for the overlap scheduler (`_get_token_num_for_estimation`)
ESTIMATION_EXTRA_TOKENS = 2


def estimation_kv_blocks(max_num_tokens: int, max_model_len: int, block_size: int, ranks: int) -> int:
    """Blocks of the KV cache TensorRT-LLM's KvCacheCreator builds for its profiling pass, on one rank: the blocks of
    every dummy prompt (max_num_tokens in prompts of max_model_len - 1 tokens and the rest, each with
    ESTIMATION_EXTRA_TOKENS), every rank's under attention DP (`_create_dummy_context_requests` repeats them per rank
    and `_get_token_num_for_estimation` sums them all; tensorrt_llm/_torch/pyexecutor/_util.py). A prompt has at least
    one token, at a max_model_len of 1 too."""
    longest = max(1, min(max_num_tokens, max_model_len - 1))
    full, rest = divmod(max_num_tokens, longest)
    blocks = full * math.ceil((longest + ESTIMATION_EXTRA_TOKENS) / block_size)
    if rest:
        blocks += math.ceil((rest + ESTIMATION_EXTRA_TOKENS) / block_size)
    return blocks * ranks


def trtllm_graph_pool_bytes(m: ModelSpec, p: ParallelConfig, largest: int, max_num_tokens: int, max_model_len: int,
                            block_size: int, compute: str) -> float:
    """The CUDA-graph memory pool TensorRT-LLM's profiling peak holds: its executor warms up (captures its decode
    graphs, largest first, into one shared pool: `PyTorchModelEngine.warmup`) before KvCacheCreator's
    `estimate_max_tokens` measures the peak, and a live graph keeps its pool, outside torch's allocated bytes, so
    the peak counts it (`extra_cost`). The pool is the largest graph's forward: `activation_peak_bytes` and the
    fused-MoE op's memory (`trtllm_moe_peak_bytes`) at that batch (`largest`, a rank's sequences; 0: no graphs) on
    every rank. Captured only
    when the profiling KV cache (`estimation_kv_blocks`) holds the batch a block each (`get_cuda_graph_warmup_request`;
    warmup stops at the first size that does not fit, and the final executor then captures them from the memory the
    KV cache leaves)."""
    ranks = p.dp if p.experts_span_dp else 1
    if not largest or estimation_kv_blocks(max_num_tokens, max_model_len, block_size, ranks) < largest:
        return 0
    return (activation_peak_bytes(m, p, largest, largest)
            + trtllm_moe_peak_bytes(m, p, largest, compute))


def _ffn_width(ffn: FFN) -> int:
    if isinstance(ffn, MoEFFN):
        return ffn.top_k * ffn.expert_width + ffn.shared_width
    return ffn.width if isinstance(ffn, DenseFFN) else 0


@dataclass(frozen=True)
class MemoryBudget:
    """One GPU of one replica (the busiest pipeline stage)."""
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    usable_bytes: float
    weights_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    state_bytes: float                 # Mamba-2 / linear-attention state set aside for `state_seqs` sequences
    state_seqs: int                    # sequences that state is set aside for: the scheduler's cap on running ones
    kv_cache_bytes: float
    kv_blocks: int
    kv_tokens: int
    block_size: int
    max_model_len: int
    sequence_bytes_at_max_model_len: float
    max_seqs_at_max_model_len: int     # sequences of max_model_len that KV cache and state memory hold
    fits: bool
    reasons: tuple[str, ...]
    lora_bytes: float = 0.0            # LoRA adapter slots (vLLM preallocates max_loras at max_lora_rank)
    draft_weights_bytes: float = 0.0   # a speculative proposer's weights (this GPU's shard)
    draft_what: str = ""               # what they are: "draft model", "MTP layers" (DraftLoad.what)
    pool_bytes_per_token: float = 0.0  # what one token of a KV block holds on this GPU (a draft's layers included)

    @property
    def room_for_kv_bytes(self) -> float:
        """What the usable memory leaves for KV after weights, activations, the context, recurrent state and
        LoRA adapter slots."""
        return (self.usable_bytes - self.weights_bytes - self.draft_weights_bytes - self.activation_bytes
                - self.non_torch_bytes - self.state_bytes - self.lora_bytes)

    def sequences_held(self, sequence_bytes: float) -> int:
        """Sequences of `sequence_bytes` each (`KVLayout.sequence_bytes`: KV in whole blocks and recurrent state)
        the KV cache and the state set aside for them hold."""
        return held(self.kv_cache_bytes + self.state_bytes, sequence_bytes)


def held(pool_bytes: float, each_bytes: float) -> int:
    """KV capacity, the one formula: how many whole items of `each_bytes` (a sequence, a slot's context, a token's
    KV) a pool of `pool_bytes` holds; none when the pool is empty or overdrawn."""
    return int(max(0.0, pool_bytes) // each_bytes)


@dataclass(frozen=True)
class DraftLoad:
    """What a speculative proposer loads beside the target: its weights and the KV of its attention layers."""
    what: str                          # "draft model", "MTP layers", "eagle3 head": as the plan names them
    weights: WeightMemory
    kv: KVLayout


def memory_budget(m: ModelSpec, gpu_memory_bytes: int, weights: WeightMemory, kv: KVLayout, p: ParallelConfig,
                  gpu_memory_utilization: float, block_size: int, max_model_len: int,
                  max_num_batched_tokens: int, max_num_seqs: int, lora_bytes: float = 0.0,
                  moe_peak_bytes: float = 0.0, share_of_free: bool = False,
                  graph_pool_bytes: float = 0, draft: DraftLoad | None = None,
                  all_outputs: bool = False) -> MemoryBudget:
    """`moe_peak_bytes`: an engine's fused-MoE memory at the token budget (`engine_moe_peak_bytes`: TensorRT-LLM's
    workspace and gathered rows), part of the activation peak. `graph_pool_bytes`: CUDA graphs' memory the
    engine's profiling counts (`trtllm_graph_pool_bytes`), beside the context's. `share_of_free`:
    `gpu_memory_utilization` is the KV cache's share of what the weights, the activation peak and the context
    leave of the whole GPU (TensorRT-LLM's kv_cache_free_gpu_mem_fraction: its KvCacheCreator takes fraction x
    (total - the profiling pass's peak)), not the share of the whole GPU the engine may use (vLLM's, SGLang's).
    `draft`: a speculative proposer's weights and KV layout (a draft model, MTP layers): its weights load beside
    the target's, and its attention layers take their KV from the same blocks (vLLM's drafter registers them in
    the one KV cache). `all_outputs`: the engine reserves its worst-case graph with every one of the
    `max_num_batched_tokens` tokens an output, so as many rows of logits (llama.cpp and Ollama: src/llama-context.cpp
    reserves graph_reserve(n_tokens, n_seqs, n_tokens) at n_tokens = min(n_ctx, n_ubatch) outputs)."""
    activations = (activation_peak_bytes(m, p, max_num_batched_tokens,
                                         max_num_batched_tokens if all_outputs else max_num_seqs) + moe_peak_bytes)
    draft_bytes = draft.weights.per_gpu_bytes if draft else 0.0
    # attention-DP ranks whose experts span them gather every rank's tokens at each MoE layer: they talk too
    non_torch = (CUDA_CONTEXT_BYTES + (NCCL_BUFFER_BYTES if p.tp * p.pp > 1 or p.experts_span_dp else 0)
                 + graph_pool_bytes)
    usable = gpu_memory_bytes * gpu_memory_utilization
    if share_of_free:
        rest = weights.per_gpu_bytes + draft_bytes + activations + non_torch + lora_bytes
        usable = rest + gpu_memory_utilization * max(0.0, gpu_memory_bytes - rest) if rest <= gpu_memory_bytes \
            else gpu_memory_bytes
    # vLLM's hybrid cache gives each running sequence its Mamba / linear-attention state from the same pool
    # as the KV blocks: where attention layers make that pool (`KVLayout.state_in_pool`), each sequence takes its
    # state's blocks from it as the simulator runs (kv_windows). A model of recurrent layers alone has no KV
    # blocks: its state is set aside for as many sequences as fit at max_model_len (at most max_num_seqs), and
    # the scheduler runs no more.
    available = usable - weights.per_gpu_bytes - draft_bytes - activations - non_torch - lora_bytes
    seq_bytes = kv.sequence_bytes(max_model_len, block_size) + (draft.kv.sequence_bytes(max_model_len, block_size)
                                                                if draft else 0.0)
    state_seqs = max_num_seqs
    if kv.state_bytes_per_seq_per_gpu and not kv.state_in_pool:
        state_seqs = max(0, min(max_num_seqs, int(available // seq_bytes))) if available > 0 else 0
    state = 0.0 if kv.state_in_pool else kv.state_bytes_per_seq_per_gpu * state_seqs
    kv_bytes = available - state
    # windowed layers: blocks of the others; a draft's layers hold their KV in the same blocks
    per_token = kv.pool_bytes_per_token_per_gpu + (draft.kv.pool_bytes_per_token_per_gpu if draft else 0)
    block_bytes = per_token * block_size
    if not block_bytes:   # no layer caches KV: blocks only count tokens, enough for every sequence's context
        blocks = max_num_seqs * math.ceil(max_model_len / block_size) if kv_bytes > 0 else 0
    else:
        blocks = max(0, int(kv_bytes // block_bytes)) if kv_bytes > 0 else 0
    max_seqs = held(kv_bytes + state, seq_bytes) if seq_bytes else max_num_seqs
    reasons = []
    if weights.per_gpu_bytes + draft_bytes > usable:
        drafted = f" (the {draft.what}, {draft_bytes / GiB:.2f} GiB, included)" if draft_bytes else ""
        reasons.append(f"weights need {(weights.per_gpu_bytes + draft_bytes) / GiB:.2f} GiB per GPU{drafted}, more "
                       f"than the {usable / GiB:.2f} GiB usable at gpu_memory_utilization {gpu_memory_utilization}")
    elif kv_bytes <= 0:
        reasons.append(f"weights{', the ' + draft.what if draft_bytes else ''}, activations, CUDA context"
                       f"{' and LoRA slots' if lora_bytes else ''} leave no room "
                       f"for KV cache "
                       f"({kv_bytes / GiB:.2f} GiB left of {usable / GiB:.2f} GiB usable)")
    elif max_seqs < 1 or state_seqs < 1:
        reasons.append(f"KV cache of {(kv_bytes + state) / GiB:.2f} GiB per GPU cannot hold one sequence of "
                       f"max_model_len {max_model_len} ({seq_bytes / GiB:.2f} GiB"
                       + (", recurrent state included)" if state_seqs < max_num_seqs else ")"))
    return MemoryBudget(gpu_memory_bytes, gpu_memory_utilization, usable, weights.per_gpu_bytes, activations,
                        non_torch, state, state_seqs, max(0.0, kv_bytes), blocks, blocks * block_size, block_size,
                        max_model_len, seq_bytes, max_seqs, not reasons, tuple(reasons), lora_bytes, draft_bytes,
                        draft.what if draft else "", per_token)




# LoRA: vLLM wraps every linear layer of the decoder (vllm/lora/layers: column-parallel, merged
# column-parallel, QKV, row-parallel and replicated wrappers); its merged modules carry one adapter
# slice per part. Column-parallel layers keep A (in x r) whole and B (r x out) split by TP; row-parallel
# ones split A and keep B whole (fully_sharded_loras off, vLLM's default).
LORA_SLICES = {"gate_up_proj": ("gate_proj", "up_proj"), "qkv_proj": ("q_proj", "k_proj", "v_proj")}
LORA_ROW_PARALLEL = ("o_proj", "down_proj", "out_proj", "dense")
LORA_ROLES = (ATTENTION, MLP, SHARED_EXPERT, REPLICATED)    # experts, routers, towers and lm_head take none


@dataclass(frozen=True)
class LoraMemory:
    """Adapter weights per GPU: one slot per adapter the GPU holds at once (vLLM's max_loras)."""
    rank: int
    bytes_per_value: int
    modules: tuple[str, ...]          # the targeted modules found in the model
    params_per_slot: float            # one adapter at `rank`, on one GPU of the busiest stage
    bytes_per_slot: float
    slots: int
    bytes: float                      # all slots: taken from the KV cache
    skipped: tuple[str, ...]          # linear roles the adapters do not reach (MoE experts, Mamba projections)


def lora_memory(m: ModelSpec, p: ParallelConfig, rank: int, slots: int, bytes_per_value: int,
                targets: tuple[str, ...] | None = None) -> LoraMemory:
    """Per GPU: slots x sum over targeted linears of rank x (A's input + B's output on this GPU) x bytes.

    Column-parallel: rank x (in + out / TP); row-parallel: rank x (in / TP + out); a merged module
    (gate_up_proj, qkv_proj) counts each part's own A. Layers are those of the busiest pipeline stage.
    """
    params, found, skipped = 0.0, [], set()
    for g in linear_groups(m):
        if g.kind not in LORA_ROLES:
            if g.kind not in (LM_HEAD, VISION, ROUTER):
                skipped.add(g.kind)
            continue
        name = g.name.rsplit(".", 1)[-1]
        parts = LORA_SLICES.get(name, (name,))
        chosen = [x for x in parts if targets is None or x in targets]
        if not chosen:
            continue
        found += chosen
        stage_share = shard_fraction(g, m, p)                    # this GPU's share of the group's values
        stage = layers_per_stage(m, p) / m.num_layers
        split = stage_share / stage                              # 1 / TP (or per replicated KV head)
        out_each = g.out_features / len(parts)
        per_layer = 0.0
        for _ in chosen:
            if name in LORA_ROW_PARALLEL:
                per_layer += rank * (g.in_features * split + out_each)
            else:
                per_layer += rank * (g.in_features + out_each * split)
        params += per_layer * g.count * stage
    return LoraMemory(rank, bytes_per_value, tuple(dict.fromkeys(found)), params, params * bytes_per_value, slots,
                      params * bytes_per_value * slots, tuple(sorted(skipped)))


# llama.cpp keeps sliding-window layers in a cache of their own (ggml-org/llama.cpp src/llama-kv-cache-iswa.cpp at
# 2aef9767d982beb7ab61b3ae359366f627eb74dd): per KV stream GGML_PAD(min(the stream's cells, n_swa x the sequences
# the stream holds + n_ubatch), 256) cells, the whole context only under --swa-full (common/common.h: swa_full =
# false by default). A stream per slot (-np), or one for all slots with --kv-unified.
SWA_CACHE_PAD_CELLS = 256


def llamacpp_swa_cells(window: int, stream_cells: int, stream_seqs: int, ubatch: int) -> int:
    """Cells of llama.cpp's SWA cache in one KV stream of `stream_cells` holding `stream_seqs` sequences."""
    return math.ceil(min(stream_cells, window * stream_seqs + ubatch) / SWA_CACHE_PAD_CELLS) * SWA_CACHE_PAD_CELLS


def llamacpp_cache_bytes(kv: KVLayout, stream_cells: int, streams: int, stream_seqs: int, ubatch: int) -> float:
    """The KV llama.cpp allocates on one GPU: `streams` streams of `stream_cells` cells, each holding `stream_seqs`
    sequences; layers that keep every token take every cell, windowed layers their SWA cache (llamacpp_swa_cells)."""
    return kv.kept_bytes(streams * stream_cells,
                         lambda w: streams * llamacpp_swa_cells(w, stream_cells, stream_seqs, ubatch))
