"""The kernel-table step-time model: a step's time as the sum of measured operator latencies.

For one step on one GPU of the busiest pipeline stage (times the stages, as the roofline):

  GEMMs        every dense matrix of every layer, fused as vLLM fuses them (q, k and v into one
               QKV GEMM; gate and up already are), one TP shard each: gemm(m = new tokens, n, k)
  attention    per group of layers with the same heads, KV heads and head dim (per GPU):
               decode  generation_attention(decode seqs, context per seq + 1); past the longest context
                       measured for that batch, the last measured segment continued, but never faster than
                       reading the added KV at the GPU's memory bandwidth (`KvReadFloor`; softmax attention:
                       MLA's decode rows continue their last segment without it)
               prefill context_attention(prefill seqs, s) per query-key pair of a causal prefill of
                       s = chunk + cached tokens, times the chunk's own pairs (n c + n (n + 1) / 2); past the
                       longest measured prompt, at that prompt's cost per pair
  all-reduce   2 per layer when TP > 1, of new tokens x hidden x 2 bytes (bf16): allreduce(bytes, TP), + what
               each waits for the last of its TP GPUs in a forward (roofline.collective_wait_s)
  MoE          per MoE layer: moe(tokens; hidden, expert width, top-k, experts, TP or EP split; the expert format):
               experts sliced by TP the rows measured with the family's power-law routing (moe_skewed), else the
               balanced rows as random routing reads them, else those of the experts spread whole over as many
               GPUs (the same bytes and FLOPs a GPU at the same tokens); under EP the balanced rows at the imbalance
               (roofline.EP_LOAD_IMBALANCE, by the family's routing skew) times the tokens; with data-parallel
               ranks every other operator prices the busiest rank's share of the step and, with EP across the
               ranks, the MoE layers every rank's tokens (the table's tokens: the whole EP group's)
  MLA          per dense multi-head latent attention layer, the whole block from the module tables (its q/kv
               down- and up-projections, their norms, rotary, attention and o_proj: those matrices are then
               left out of the GEMMs above, the all-reduce after o_proj is not):
               decode  mla_generation(decode seqs, context per seq + 1)
               prefill mla_context(prefill seqs, n) for a chunk of n on nothing cached; on c cached tokens
                       mla_context(s = n + c) - mla_context(c), the last n tokens of a causal prefill of s
                       (their projections and their n c + n (n + 1) / 2 pairs), at least mla_context(n)
  GDN          per gated delta net layer, its convolution and delta-rule kernels (its projections are GEMMs
               above): decode gdn_generation(decode seqs); prefill gdn_context(prefill seqs, chunk tokens n)
               (the recurrent state carries the prefix: the cached tokens cost nothing)
  lm_head      gemm(m = logits rows, n = vocab / TP, k = hidden), once per step: a row a sequence and one a draft
               token verified (StepBatch.logits_rows)
  element-wise per layer: a fused residual add + RMSNorm per norm (reads 2 x hidden, writes 2 x hidden
               per token), for softmax attention the rotary embedding (reads and writes q and k) and the
               KV-cache write (reads k and v, writes them to the cache: vLLM's rotary_embedding and
               reshape_and_cache kernels), for an MLA layer whose block no module table prices (the
               attention kernel's rows: SGLang) its own: the RMSNorms of the q and kv latents (read and write
               them), the rotary embedding of the rope parts of q and k, and the cache write of the latent
               and the rope key, and the gated activation of a dense MLP (reads 2 x width / TP,
               writes width / TP), 2 bytes a value: bytes / (bandwidth x fraction) + a fixed latency each
               (tables.yaml); TensorRT-LLM runs the rotary embedding and the cache write inside its attention op
               (its rows hold them) and, under TP, each norm inside an all-reduce (ROPE_AND_CACHE_IN_ATTENTION,
               NORMS_IN_ALLREDUCE)
  step         a fixed time per step beside the kernels (input preparation, sampler): fitted with the tables for vLLM
               (roofline.TABLES_STEP_OVERHEAD_S), else the roofline's; the engine loop adds its own around the step

Tables are interpolated linearly in every numeric key (m, n, k; batch, tokens; bytes) between
measured points and extended along the last segment beyond them (a GEMM's m past the largest
measured, a vocabulary past the largest n), never below the value at the last measured point (`at_least`: a
table whose latency falls as a key grows is not extended below its edge, nor to zero or less); categorical keys
(dtype, KV heads, head dim, KV dtype, GPUs) must match, and an attention's query heads too, except between two
measured ones of its KV heads (interpolated linearly: `heads_rows`). What the tables lack is priced by the
roofline and named in `roofline_parts`: GEMM shapes the measured grid does not bracket, and every GEMM whose weights
are stored in a format the tables do not hold (AWQ/GPTQ 4-bit, FP8 run weight-only), one shape
at a time; MoE experts; the KV groups of other mixers (sparse MLA: DeepSeek-V3.2's indexer) or of
head shapes neither measured nor between measured ones (Llama-2's 32 KV heads: decode is measured up to
8); the recurrent state of Mamba-2 layers and of gated delta net shapes not measured;
the expert all-to-all and pipeline transfers; an all-reduce across a GPU count not measured; LoRA adapters'
low-rank GEMMs (`RooflineStepTimeModel.lora_s`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from simulator.step_batch import StepBatch, split_attention, windowed_pairs
from sizer.analytic.formats import ROW_PARALLEL, WeightFormat, stored_shares
from sizer.analytic.memory import kv_value_bytes
from sizer.analytic.parallel import ParallelConfig, kv_heads_per_gpu, layers_per_stage, shard_fraction
from sizer.analytic.weights import linear_groups
from sizer.inputs.config_keys import DTYPE_BYTES
from sizer.inputs.layers import EXPERT, LM_HEAD, VISION, Attention, DenseFFN, GatedDeltaNet, LatentAttention
from sizer.inputs.model_spec import ModelSpec
from sizer.timing.kernel_tables import KernelTables
from sizer.timing.profile_parts import Overhead
from sizer.timing.roofline import (
    MARLIN_MOE_DTYPE,
    MOE_DTYPES,
    RooflineStepTimeModel,
    balanced_routing_share,
    collective_wait_s,
    grouped_gemm_efficiency,
    moe_dtype,
    random_routing_share,
    routing_alpha,
    skewed_routing,
)
from sizer.words import count

ACTIVATION_BYTES = 2                                  # the hidden state all-reduced, bf16
# sizer's compute format -> table dtype (float32: the bundled engine on a CPU, sizer/timing/profile_kernels.py)
GEMM_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "fp32": "float32"}
FLOAT_FORMATS = ("bf16", "fp16", "fp32")
KV_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp32": "float32"}
# GEMM table dtype -> the MLA module tables' linear-layer dtype: vLLM's MLA block was measured with bf16 linears and
# with block-scaled FP8 ones (DeepSeek's checkpoints' format), the FP8 that sizer's fp8 weights of an MLA model run
MLA_DTYPES = {"bfloat16": "bfloat16", "fp8": "fp8_block"}
MLA_MODULES = "self_attn."       # the matrices of an MLA layer its module table prices (LatentAttention.linears)


def random_routing(rows: Mapping[int, float], top_k: int, experts: int) -> dict[int, float]:
    """MoE rows measured with balanced routing (each row's tokens' top-k choices spread evenly, so every expert is
    read once tokens x top-k reaches the experts) as random routing reads the experts: what a row takes beyond its
    fewest tokens' latency (the fixed costs and the first token's experts) scales with the share of experts random
    routing touches over the share the balanced row read. gpt-oss's 128 experts, top-4, at 32 tokens: the balanced
    row reads all 128, random routing 81 (1 - (1 - 4/128)^32 = 63%); at 256 tokens and more both read all."""
    first = min(rows)
    base = rows[first]
    return {t: base + (latency - base) * random_routing_share(t, top_k, experts)
            / balanced_routing_share(t, top_k, experts) if t > first else latency for t, latency in rows.items()}


def marlin_capped(rows: Mapping[int, float], flops_per_token: float, top_k: int, experts: int,
                  marlin: Mapping[int, float], marlin_flops_per_token: float, marlin_top_k: int,
                  marlin_experts: int) -> dict[int, float]:
    """W4A16 MXFP4 MoE rows (OpenAI triton_kernels: `rows`, `flops_per_token` of this GPU, balanced) as vLLM's Marlin
    MoE runs the shape, where its own rows did not measure it but measured another shape at the same split on the
    same GPU (`marlin`, with its FLOPs a token, top-k and experts): no faster than the W4A16 row, and no faster
    than Marlin's rows at the same tokens per expert (tokens x top-k / experts) do the FLOPs. At equal tokens per
    expert two shapes read the same weight bytes per FLOP (an expert's bytes over the FLOPs of its tokens), so
    Marlin's FLOPs per second there carry over in both regimes: where it streams the experts (about as fast as
    triton_kernels: 2.7 against 2.54 TB/s on the H200, vLLM 0.24.0, 64-384 tokens; InferenceMAX's gpt-oss decode,
    run with Marlin, matches the triton_kernels rows: docs/fidelity.md) and where compute-bound (221-232 TFLOPS at
    12,288-16,384 tokens of 896 experts of 3,584 x 3,072, top 16, on the H200 against triton_kernels' 545-567 on
    gpt-oss's). Between measured points log-linear in tokens per expert, flat beyond them (grouped_gemm_efficiency's
    interpolation, here of FLOPs per second)."""
    rates = dict(sorted((t * marlin_top_k / marlin_experts, t * marlin_flops_per_token / seconds)
                        for t, seconds in marlin.items()))
    return {t: max(latency, t * flops_per_token / grouped_gemm_efficiency(t * top_k / experts, rates))
            for t, latency in rows.items()}


@dataclass(frozen=True)
class SharedMoeRows:
    """Another engine's MoE rows of a kernel the scenario's engine shares (step_model.SHARED_MOE_KERNELS), in the
    expert format the scenario runs."""
    measured_by: str                                  # "SGLang's 0.5.14 tables"
    balanced: Mapping[tuple, dict[int, float]]        # its `moe` rows
    skewed: Mapping[tuple, dict[int, float]]          # its `moe_skewed` rows


class Curve:
    """Piecewise-linear y(x) through measured points; flat below the first, the last segment
    extended above the last (never below the last value)."""

    __slots__ = ("xs", "ys")

    def __init__(self, points: dict[float, float]):
        self.xs = sorted(points)
        self.ys = [points[x] for x in self.xs]

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        i = bisect_right(xs, x)
        if i == 0 or len(xs) == 1:
            return ys[0]
        if i == len(xs):
            x0, x1, y0, y1 = xs[-2], xs[-1], ys[-2], ys[-1]
            return max(y1, y1 + (y1 - y0) * (x - x1) / (x1 - x0))
        x0, x1 = xs[i - 1], xs[i]
        return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def bracket(values: list[int], x: float) -> tuple[int, int, float]:
    """(lower, upper, weight of upper) of the linear interpolation at x among sorted `values`
    (the last segment extended above them, the first value below them)."""
    i = bisect_right(values, x)
    if i == 0 or len(values) == 1:
        return values[0], values[0], 0.0
    lo, hi = (values[-2], values[-1]) if i == len(values) else (values[i - 1], values[i])
    return lo, hi, (x - lo) / (hi - lo)


def at_least(curve: Curve, floor: Curve) -> Curve:
    """`curve` raised to `floor` at each of its points, where `floor`'s points are among them: never below `floor`
    anywhere (both are linear between those points, and past the last `curve` keeps at least its last value).
    Beyond a table's measured grid in a key (a weight above 1 on the last point: `bracket`) the last segment
    extended may fall below the last measured value, even below zero (a latency that falls as n grows, extended
    to a larger n); with the value at the grid's edge as its floor the extension keeps Curve's rule, never below
    the last value, in every key (a larger shape is never faster than the largest measured)."""
    return Curve({x: max(y, floor(x)) for x, y in zip(curve.xs, curve.ys, strict=True)})


def curve_sum(curves: list[tuple[float, Curve]]) -> Curve:
    """sum w_i c_i(x) as one curve: exact, since a weighted sum of piecewise-linear curves is
    piecewise linear on the union of their points, and past the union's last point each curve
    continues its own last segment, as the sum continues its last one."""
    xs = sorted({x for _, c in curves for x in c.xs})
    return Curve({x: sum(w * c(x) for w, c in curves) for x in xs})


@dataclass(frozen=True)
class GemmShape:
    n: int                  # output features of one GPU's shard
    k: int                  # input features of one GPU's shard
    per_stage: float        # GEMMs of this shape per step on one GPU of the busiest stage
    converted: float = 0.0  # share of them whose weights the checkpoint stores in its format (formats.stored_shares)
    other: float = 0.0      # share stored in another format of a per-layer map (MIXED_PRECISION); the rest 16-bit


def dense_gemms(m: ModelSpec, p: ParallelConfig, module_layers: frozenset[int] = frozenset(),
                fmt: WeightFormat | None = None) -> list[GemmShape]:
    """Every dense GEMM of a step on one GPU of the busiest stage, fused as vLLM runs them:
    matrices of one block of a layer (self_attn, mlp) that read the same input, are split by
    output (q, k, v) and are stored alike are one GEMM. `module_layers`: layers whose attention block (its
    self_attn matrices) a module table prices whole; their matrices are left out. `fmt`: the checkpoint's weight
    format, for the share of each GEMM stored in it (without it, every matrix counts as 16-bit)."""
    stage = layers_per_stage(m, p) / m.num_layers
    fused: dict[tuple, list] = {}
    for g in linear_groups(m):
        if g.kind in (VISION, EXPERT, LM_HEAD):
            continue
        layers = [i for i in g.layers if i not in module_layers] if g.name.startswith(MLA_MODULES) else g.layers
        if not layers:
            continue
        share = shard_fraction(g, m, p) / stage          # of one matrix, on one GPU
        per_layer = g.count // len(g.layers)
        row = g.name.endswith(ROW_PARALLEL)
        n = g.out_features if row else round(g.out_features * share)
        k = round(g.in_features * share) if row else g.in_features
        stored = stored_shares(g, fmt, m) if fmt is not None else (0.0, 0.0)
        block = g.name.rsplit(".", 1)[0]                 # "self_attn", "mlp": q, k, v fuse; q and gate_up do not
        key = (g.layers, block, k, row, g.name if row or per_layer > 1 else "", stored)
        entry = fused.setdefault(key, [0, k, len(layers) * stage * per_layer, *stored])
        entry[0] += n
    return [GemmShape(*entry) for entry in fused.values()]


@dataclass(frozen=True)
class Elementwise:
    ops_per_stage: float            # element-wise kernels per step on one GPU of the busiest stage
    bytes_per_token: float          # bytes they read and write per new token


# Engines whose attention op applies the rotary embedding and appends to the KV cache itself, so their attention rows
# hold both kernels: TensorRT-LLM's Attention module fuses RoPE into the op wherever the backend supports it (its
# default, tensorrt_llm/_torch/modules/attention.py: "If rope_fusion is not specified, enable if the attention backend
# supports it"; the TRTLLM backend does) and the op writes the cache.
ROPE_AND_CACHE_IN_ATTENTION = frozenset({"tensorrt-llm"})
# Engines that fuse a layer's residual add and RMSNorm into its tensor-parallel all-reduces (one norm into each of the
# two): TensorRT-LLM's decoder layers under TP, AllReduceParams(fusion_op=AllReduceFusionOp.RESIDUAL_RMS_NORM)
# (tensorrt_llm/_torch/models/modeling_gpt_oss.py TransformerBlock.forward_tp, modeling_llama.py); under attention DP a
# rank has no all-reduce and runs its norms alone.
NORMS_IN_ALLREDUCE = frozenset({"tensorrt-llm"})


def elementwise_ops(m: ModelSpec, p: ParallelConfig, module_layers: frozenset[int] = frozenset(),
                    engine: str = "vllm") -> Elementwise:
    """The residual add + norm of each norm, the rotary embedding and KV-cache write of each softmax-attention
    layer, the latents' norms, rotary embedding and cache write of each MLA layer but those in `module_layers`
    (whose module table prices the whole block), and the activation of each gated dense MLP (module docstring);
    without what `engine` fuses into other kernels (ROPE_AND_CACHE_IN_ATTENTION, NORMS_IN_ALLREDUCE)."""
    stage = layers_per_stage(m, p) / m.num_layers
    fused_norms = 2 if engine in NORMS_IN_ALLREDUCE and p.tp > 1 else 0
    ops = values = 0.0
    for i, layer in enumerate(m.layers):
        norms = max(0, layer.norms - fused_norms)
        ops += norms
        values += norms * 4 * m.hidden_size
        if isinstance(layer.mixer, Attention) and engine not in ROPE_AND_CACHE_IN_ATTENTION:
            a = layer.mixer
            q, kv = a.num_heads // p.tp * a.head_dim, kv_heads_per_gpu(a.num_kv_heads, p) * a.head_dim
            ops += 2
            values += 2 * (q + kv) + 4 * kv
        if isinstance(layer.mixer, LatentAttention) and i not in module_layers:
            a = layer.mixer
            rope, latent = a.qk_rope_head_dim, a.kv_lora_rank
            ops += 3 + bool(a.q_lora_rank)
            values += 2 * (a.q_lora_rank + latent) + 2 * (a.num_heads // p.tp + 1) * rope + 2 * (latent + rope)
        if isinstance(layer.ffn, DenseFFN) and layer.ffn.gated:
            ops += 1
            values += 3 * layer.ffn.width / p.tp
    return Elementwise(ops * stage, values * stage * ACTIVATION_BYTES)


@dataclass(frozen=True)
class AttentionShape:
    heads: int              # per GPU
    kv_heads: int           # per GPU
    head_dim: int
    window_tokens: int | None
    label: str              # the mixer kind, as the KV groups name it
    per_stage: float        # layers of this shape on one GPU of the busiest stage


def _layers_by_key(m: ModelSpec, key_of: Callable[[object], tuple | None]) -> dict[tuple, int]:
    """How many layers have each key (`key_of(mixer)`; None: not counted)."""
    counts: dict[tuple, int] = {}
    for layer in m.layers:
        key = key_of(layer.mixer)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return counts


def attention_shapes(m: ModelSpec, p: ParallelConfig) -> list[AttentionShape]:
    """Softmax-attention layers by shape per GPU (other mixers are not in the tables)."""
    stage = layers_per_stage(m, p) / m.num_layers
    counts = _layers_by_key(m, lambda a: (a.num_heads // p.tp, kv_heads_per_gpu(a.num_kv_heads, p), a.head_dim,
                                          a.window_tokens, a.label) if isinstance(a, Attention) else None)
    return [AttentionShape(*key, per_stage=n * stage) for key, n in counts.items()]


@dataclass(frozen=True)
class LatentShape:
    dims: tuple[int, ...]   # the MLA module tables' key: hidden, q/kv LoRA ranks, qk nope/rope and v head dims, heads
    label: str              # the mixer kind, as the KV groups name it
    layers: tuple[int, ...]
    per_stage: float        # layers of this shape on one GPU of the busiest stage


def latent_shapes(m: ModelSpec, p: ParallelConfig) -> list[LatentShape]:
    """Dense multi-head latent attention layers by shape per GPU (the heads split by TP; the latent is not).
    Sparse MLA (an indexer: DeepSeek-V3.2) runs other kernels and is not in the MLA tables."""
    stage = layers_per_stage(m, p) / m.num_layers
    found: dict[tuple, list[int]] = {}
    labels = {}
    for i, layer in enumerate(m.layers):
        a = layer.mixer
        if isinstance(a, LatentAttention) and not a.index_topk:
            dims = (m.hidden_size, a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim,
                    a.v_head_dim, a.num_heads // p.tp)
            found.setdefault(dims, []).append(i)
            labels[dims] = a.label
    return [LatentShape(dims, labels[dims], tuple(idx), len(idx) * stage) for dims, idx in found.items()]


@dataclass(frozen=True)
class DeltaNetShape:
    dims: tuple[int, ...]   # the GDN tables' key: key heads, key head dim, value heads, value head dim per GPU, conv
    per_stage: float


def delta_net_shapes(m: ModelSpec, p: ParallelConfig) -> list[DeltaNetShape]:
    """Gated delta net layers by kernel shape per GPU (key and value heads split by TP, as vLLM splits them)."""
    stage = layers_per_stage(m, p) / m.num_layers
    counts = _layers_by_key(m, lambda g: (g.num_key_heads // p.tp, g.key_head_dim, g.num_value_heads // p.tp,
                                          g.value_head_dim, g.conv_kernel) if isinstance(g, GatedDeltaNet) else None)
    return [DeltaNetShape(dims, n * stage) for dims, n in counts.items()]


def gemm_curve(tables: KernelTables, dtype: str, n: int, k: int) -> Curve | None:
    """Latency by m of an (n, k) GEMM, bilinear in n and k between the measured (n, k) grid (a measured shape
    is its own row: its corners weigh 0); None when a corner of the bracket was not measured."""
    shapes = [key[1:] for key in tables.gemm if key[0] == dtype]
    if not shapes:
        return None
    n0, n1, wn = bracket(sorted({s[0] for s in shapes}), n)
    k0, k1, wk = bracket(sorted({s[1] for s in shapes}), k)
    corners = [((1 - wn) * (1 - wk), (n0, k0)), ((1 - wn) * wk, (n0, k1)), (wn * (1 - wk), (n1, k0)),
               (wn * wk, (n1, k1))]
    if any((dtype, *nk) not in tables.gemm for w, nk in corners if w):
        return None
    curve = curve_sum([(w, Curve(tables.gemm[(dtype, *nk)])) for w, nk in corners if w])
    if wn > 1 or wk > 1:                # past the grid's largest n or k: never below the curve at its edge
        edge = gemm_curve(tables, dtype, min(n, n1), min(k, k1))
        curve = at_least(curve, edge)
    return curve


class BatchCurves:
    """Latency by (batch, length): linear along length on each measured batch, then along batch. The
    curve of each batch size asked for is built once (curve_sum of its two rows: the same values)."""

    def __init__(self, rows: dict[int, dict[int, float]]):
        self.batches = sorted(rows)
        self.rows = {b: Curve(rows[b]) for b in self.batches}
        self._by_batch: dict[float, Curve] = {}

    def at_batch(self, batch: float) -> Curve:
        curve = self._by_batch.get(batch)
        if curve is None:
            b0, b1, w = bracket(self.batches, batch)
            curve = self.rows[b0] if not w else curve_sum([(1 - w, self.rows[b0]), (w, self.rows[b1])])
            if w > 1:                   # past the largest measured batch: never below its row (`at_least`)
                curve = at_least(curve, self.rows[b1])
            self._by_batch[batch] = curve
        return curve

    def longest(self, batch: float) -> int:
        """The longest length measured on both batch rows `batch` is interpolated between (on its own row
        alone when `batch` was measured)."""
        b0, b1, w = bracket(self.batches, batch)
        return self.rows[b0].xs[-1] if not w else min(self.rows[b0].xs[-1], self.rows[b1].xs[-1])

    def __call__(self, batch: float, length: float) -> float:
        return max(0.0, self.at_batch(batch)(length))


def attention_rows(table: Mapping[tuple, dict[int, float]], key: tuple) -> BatchCurves | None:
    rows = {k[-1]: table[k] for k in table if k[:-1] == key}     # the rows looked up only (tables read lazily)
    return BatchCurves(rows) if rows else None


class HeadsBlend:
    """Latency by (batch, length) of a query-head count between two measured ones of the same KV heads: their
    rows weighted linearly in the heads (as aiconfigurator-core interpolates its attention tables over the heads
    within one KV-head slice)."""

    def __init__(self, parts: list[tuple[float, BatchCurves]]):
        self.parts = parts

    def longest(self, batch: float) -> int:
        return min(rows.longest(batch) for _, rows in self.parts)

    def __call__(self, batch: float, length: float) -> float:
        return sum(w * rows(batch, length) for w, rows in self.parts)


class KvReadFloor:
    """Decode attention by (batch, KV length) from measured rows (`BatchCurves` or `HeadsBlend`), past the longest
    length measured for the batch never faster than the memory delivers the KV: from that length on, each further
    token of context costs each sequence at least its KV bytes over the GPU's memory bandwidth. The rows continue
    their last measured segment there, which is the KV read at the rate the kernel streams it where that segment is
    bandwidth-bound (aiconfigurator-core's H200 tables stop at batch x context 131,072-524,288; the last segments
    of Qwen3's batches 8 to 128 read at 4.35-4.47 TB/s of the 4.8); a batch whose last segment ends where its time
    is mostly per-sequence work (Llama-3.1-8B's 1,024 sequences measured to 256 tokens read at 5.9 TB/s) would
    read the KV faster than the memory can (docs/fidelity.md "Decode attention past the tables")."""

    __slots__ = ("rows", "s_per_token", "_edges")

    def __init__(self, rows: BatchCurves | HeadsBlend, s_per_token: float):
        self.rows = rows
        self.s_per_token = s_per_token      # one sequence's KV bytes per token of one layer / memory bandwidth
        self._edges: dict[float, tuple[int, float]] = {}    # batch -> its longest measured length and time there

    def __call__(self, batch: float, length: float) -> float:
        rows = self.rows
        seconds = rows(batch, length)
        edge = self._edges.get(batch)
        if edge is None:
            last = rows.longest(batch)
            edge = self._edges[batch] = (last, rows(batch, last))
        last, at_last = edge
        if length <= last:
            return seconds
        return max(seconds, at_last + (length - last) * batch * self.s_per_token)


def heads_rows(table: dict[tuple, dict[int, float]], key: tuple) -> tuple[BatchCurves | HeadsBlend | None, str]:
    """The rows of `key` (kv dtype, heads, KV heads, head dim), or for query heads not measured, the rows of the
    measured heads either side with the same KV dtype, KV heads and head dim, interpolated linearly in the heads
    (decode reads KV per KV head, its query heads packed into one tile; prefill computes per query head: both
    nearly linear in the heads between neighbours, docs/fidelity.md "Head shapes the tables lack"); never
    extrapolated: None outside the measured heads. The second value names the measured heads it stands between."""
    rows = attention_rows(table, key)
    if rows is not None:
        return rows, ""
    kv, heads, kv_heads, dim = key
    measured = sorted({k[1] for k in table if k[0] == kv and k[2] == kv_heads and k[3] == dim})
    below, above = [h for h in measured if h < heads], [h for h in measured if h > heads]
    if not below or not above:
        return None, ""
    h0, h1 = below[-1], above[0]
    w = (heads - h0) / (h1 - h0)
    blend = HeadsBlend([(1 - w, attention_rows(table, (kv, h0, kv_heads, dim))),
                        (w, attention_rows(table, (kv, h1, kv_heads, dim)))])
    return blend, f"{heads} x {kv_heads} heads between the measured {h0} and {h1}"


class KernelTableStepTimeModel:
    """`step_time(batch)` from measured kernel tables, the roofline for what they lack (module docstring)."""

    def __init__(self, tables: KernelTables, roofline: RooflineStepTimeModel,
                 shared_moe: SharedMoeRows | None = None,
                 step_overhead_s: float | None = None):
        """`shared_moe`: the MoE rows of the same kernel in another engine's tables, for the expert
        shapes and splits these tables lack (step_model.SHARED_MOE_KERNELS); `step_overhead_s`: a step's time beside
        its kernels where fitted with the tables (roofline.TABLES_STEP_OVERHEAD_S; 0 for the bundled engine, whose
        fitted overhead holds its own), else the roofline's assumption."""
        self.tables, self.roofline = tables, roofline
        self.shared_moe = shared_moe
        self.overhead_fitted = step_overhead_s is not None
        self.step_overhead_s = roofline.step_overhead_s if step_overhead_s is None else step_overhead_s
        m, p = roofline.model, roofline.parallel
        self.pp = p.pp
        missing: list[str] = []
        # the tables hold GEMMs whose weights are stored in the format they compute in (16-bit, FP8, float32);
        # weight-only formats (AWQ, GPTQ, FP8 on a GPU without FP8) stream fewer bytes than any of them
        fmt = roofline.weight_format
        native = fmt.name == roofline.compute_format or {fmt.name, roofline.compute_format} <= {"bf16", "fp16"}
        dtype = GEMM_DTYPES.get(roofline.compute_format) if native else None
        # the bundled engine runs a 16- or 32-bit model in its one dtype (float32 on a CPU): tables it measured
        # are looked up in that dtype (sizer/timing/kernel_tables.py BundledEngine)
        engine = tables.header.bundled_engine
        self.ran_in = engine.dtype if engine and native and fmt.name in FLOAT_FORMATS else None
        dtype = self.ran_in or dtype
        kv = self.ran_in if self.ran_in and roofline.kv.dtype in FLOAT_FORMATS else KV_DTYPES.get(roofline.kv.dtype)
        # MLA blocks the module tables hold: their projections are priced there, not as GEMMs below; else the MLA
        # attention kernel's rows (SGLang's, keyed by the kernel's dimensions: MLA_KERNEL_DIMS), the projections
        # priced as GEMMs
        latent, self.latent = self._latent(m, p, self.tables.mla_generation, self.tables.mla_context,
                                           lambda dims: (MLA_DTYPES.get(dtype), kv, *dims))
        module_layers = frozenset(i for shape in latent for i in shape.layers)
        if not latent:
            latent, self.latent = self._latent(m, p, self.tables.mla_kernel_generation,
                                               self.tables.mla_kernel_context, lambda dims: (kv, *dims[2:]))
        self.latent_kernel_only = bool(latent) and not module_layers
        # GEMMs and the all-reduces depend on the step's new tokens only: one curve; shapes the tables
        # do not bracket go to the roofline one by one
        # each GEMM in the dtype its weights are stored in: the checkpoint's format (above), or 16-bit for the
        # matrices it keeps unconverted (attention and routers of most quantised MoE checkpoints: gpt-oss's MXFP4,
        # RedHatAI's FP8 Llama-4); another format of a per-layer map has no rows: the roofline's
        plain = self.ran_in or (dtype if fmt.bits >= 16 else GEMM_DTYPES["bf16"])
        curves, self.roofline_gemms = [], []
        self.plain_gemms = False         # some quantised checkpoint's matrices priced by the 16-bit rows
        for s in dense_gemms(m, p, module_layers, fmt):
            for share, stored_as in ((s.converted, dtype), (1.0 - s.converted - s.other, plain), (s.other, None)):
                if share <= 0.0:
                    continue
                curve = gemm_curve(tables, stored_as, s.n, s.k) if stored_as else None
                if curve is None:
                    self.roofline_gemms.append((s.per_stage * share, s.n, s.k))
                else:
                    curves.append((s.per_stage * share, curve))
                    self.plain_gemms |= stored_as == plain and stored_as != dtype
        if self.roofline_gemms:
            missing.append(f"{len(self.roofline_gemms)} of {len(curves) + len(self.roofline_gemms)} dense GEMM "
                           f"shapes ({fmt.name} weights)")
        # quantised checkpoints keep the lm_head 16-bit (aiconfigurator's logits GEMM is bf16); float32 runs float32
        lm_dtype = "float32" if dtype == "float32" else "bfloat16"
        self.lm_head = gemm_curve(tables, lm_dtype, round(m.vocab_size / p.tp), m.hidden_size)
        if self.lm_head is None:
            missing.append("lm_head")
        calls = roofline.comm.allreduces_per_step
        ar = tables.allreduce.get((p.tp,)) if calls else None
        if calls and ar is None:
            missing.append(f"all-reduce across {p.tp} GPUs")
        elif calls:
            per_token = m.hidden_size * ACTIVATION_BYTES
            ar_curve = Curve({b / per_token: t for b, t in ar.items()})
            curves.append((calls, ar_curve))
        self.per_token = curve_sum(curves) if curves else Curve({1: 0.0})
        self.allreduce_from_tables = bool(calls) and ar is not None
        ew, cost = elementwise_ops(m, p, module_layers, tables.header.engine), tables.header.elementwise
        self.elementwise_fixed_s = ew.ops_per_stage * cost.latency_s
        bandwidth = cost.memory_bandwidth_bytes_per_s * cost.bandwidth_fraction
        self.elementwise_s_per_token = ew.bytes_per_token / bandwidth
        self._attention(m, p, kv, {shape.label for shape in latent}, missing)
        self.experts_from_tables = self.marlin_from_w4a16 = self.experts_shared = self.experts_from_ep_rows = False
        self.experts_skew: float | None = None   # the power law's alpha the expert rows were measured with
        self.ranks, self.load_imbalance = p.dp, roofline.load_imbalance
        self._experts: tuple[float, Curve] | None = None     # priced apart: at other tokens than the rank's
        if m.moe is not None:
            experts = self._moe_curve(m, p)
            if experts is None:
                missing.append("MoE experts")
            elif self.ranks > 1 or self.load_imbalance != 1.0:
                self._experts, self.experts_from_tables = experts, True
            else:
                self.per_token = curve_sum([(1.0, self.per_token), experts])
                self.experts_from_tables = True
        self.delta_net = self._delta_net(m, p)
        if self.roofline.kv.state_layers and not self.delta_net:
            missing.append("the recurrent state (Mamba-2, linear attention)")
        if p.pp > 1 or p.experts_span_dp:
            missing.append("pipeline and expert-parallel transfers")
        if roofline.lora is not None:
            missing.append("LoRA adapters")
        self.roofline_parts = tuple(missing)
        self.sources = self._sources(m, p, len(curves) - bool(self.allreduce_from_tables))
        # the roofline's terms that are linear in tokens or sequences, as coefficients (step_time runs per step); the
        # tables' all-reduces ran with their GPUs started together, so the roofline's wait for the last one stays
        without = not self.allreduce_from_tables
        self._transfer_fixed_s = roofline.transfer_s(0, allreduce=without)
        self._transfer_s_per_token = roofline.transfer_s(1, allreduce=without) - self._transfer_fixed_s
        self._state_s_per_seq = 0.0 if self.delta_net else roofline.state_s(StepBatch(num_seqs=1))
        # step_time's terms folded once (it runs per simulated step)
        self._fixed_s = self.elementwise_fixed_s + self._transfer_fixed_s
        self._s_per_token = self.elementwise_s_per_token + self._transfer_s_per_token
        self._roofline_experts = m.moe is not None and not self.experts_from_tables
        self._lm_head_s = self.lm_head if self.lm_head is not None else roofline.lm_head_s
        self._per_token_memo: dict[int, float] = {}      # self.per_token(tokens) by tokens
        self._lm_head_memo: dict[int, float] = {}        # self._lm_head_s(rows) by logits rows
        self.name = tables.header.description + (f"; roofline for {', '.join(missing)}" if missing else "")

    def _sources(self, m: ModelSpec, p: ParallelConfig, table_gemms: int) -> dict[str, str]:
        """Operator family -> what prices it: these tables, the roofline, or both (how many shapes each)."""
        tables, roof = "kernel tables", "roofline"
        n_roof = len(self.roofline_gemms)
        gemms = (tables if not n_roof else roof if not table_gemms
                 else f"{tables} ({count(table_gemms, 'shape')}), {roof} ({count(n_roof, 'shape')})")
        if self.plain_gemms:
            gemms += " (the matrices the checkpoint keeps 16-bit from the bfloat16 rows)"
        out = {"dense GEMMs": gemms, "lm_head": tables if self.lm_head is not None else roof}
        if self.attention or self.latent or self.roofline_groups:
            out["attention"] = (tables if not self.roofline_groups else roof if not (self.attention or self.latent)
                                else f"{tables}, {roof} for " + ", ".join(self.roofline.kv.groups[i].label
                                                                          for i in self.roofline_groups))
            notes = sorted(self.blended_heads)
            if self.latent_kernel_only:
                notes.append("MLA: the attention kernel's rows, its projections as GEMMs")
            if self.attention:
                bandwidth = self.roofline.hardware.memory_bandwidth_bytes_per_s
                notes.append(f"past the measured lengths: decode along the last measured segment, at least the KV "
                             f"read at {bandwidth / 1e12:.3g} TB/s; prefill at the longest measured prompt's cost "
                             "per query-key pair")
            if notes:
                out["attention"] += f" ({'; '.join(notes)})"
        if self.roofline.comm.allreduces_per_step:
            out["all-reduce"] = (f"{tables}, + {collective_wait_s(p.tp) * 1e6:.1f} us each waiting for the last of "
                                 f"{p.tp} GPUs (docs/fidelity.md)" if self.allreduce_from_tables else roof)
        if m.moe is not None:
            notes = [] if not self.experts_from_tables else [
                *([f"the same kernel as {self.shared_moe.measured_by} measured it"] if self.experts_shared else []),
                *(["Marlin: the W4A16 MXFP4 rows, no faster than Marlin's rows of another expert shape do the FLOPs "
                   "at the same tokens per expert"] if self.marlin_from_w4a16 else []),
                *([f"the tokens routed by a power law, alpha {self.experts_skew}, as measured"]
                  if self.experts_skew is not None else []),
                *([f"sliced over {p.tp} GPUs, priced by the rows of the experts spread whole over {p.tp} (the same "
                   "bytes and FLOPs a GPU, no imbalance)"] if self.experts_from_ep_rows else [])]
            out["MoE experts"] = (tables if self.experts_from_tables else roof) + (
                f" ({'; '.join(notes)})" if notes else "")
        if self.roofline.kv.state_layers:
            out["recurrent state"] = tables if self.delta_net else roof
        if self.roofline.lora is not None:
            out["LoRA adapters"] = roof
        if p.pp > 1 or p.experts_span_dp:
            out["pipeline and expert-parallel transfers"] = roof
        out["element-wise"] = "kernel tables' bandwidth model (tables.yaml)"
        out["step overhead"] = (f"{self.step_overhead_s * 1e3:.2f} ms, fitted with the tables (docs/fidelity.md)"
                                if self.overhead_fitted else roof)
        return out

    def _moe_curve(self, m: ModelSpec, p: ParallelConfig) -> tuple[float, Curve] | None:
        """(MoE layers per stage, latency of one by tokens) when the tables hold the model's expert shape in its
        expert format (`moe_dtype`) with its split (experts sliced by TP, or spread whole over EP). Experts sliced by
        TP: the rows measured with the tokens routed by the family's power law (`moe_skewed`; how many experts a
        step's tokens touch and how unevenly they load them, measured), else the balanced rows as random routing
        reads the experts (`random_routing`); spread whole over EP: the balanced rows, the busiest GPU's share
        applied at the step (roofline.EP_LOAD_IMBALANCE, by the same skew). Each looked up in these tables, else in
        the engine's that shares the kernel (`shared_moe`), else for Marlin in `_marlin_rows`."""
        f = m.moe
        if f.latent:
            return None
        split = (1, p.ep) if p.expert_parallel and p.ep > 1 else (p.tp, 1)
        r = self.roofline
        dtype = self.ran_in or moe_dtype(r.weight_format.name, r.weight_format.scheme.scales, r.expert_activations,
                                         r.moe_kernel)
        shape = (m.hidden_size, f.expert_width, f.top_k, f.num_experts, *split)
        alpha = routing_alpha(m.architecture)
        candidates = [(routing, shape, False) for routing in
                      ((skewed_routing(alpha), None) if split[1] == 1 else (None,))]
        if split[0] > 1:
            # Experts sliced over TP GPUs where the tables measured them only spread whole over as many (EP): at the
            # same tokens each GPU reads the same bytes (all touched experts' 1 / TP slices, or the touched experts
            # it holds whole: 1 / EP of them) and does the same FLOPs, and the slices need no balancing, so the EP
            # group's balanced rows at the step's tokens, as random routing reads them (aiconfigurator-core 0.12.0
            # measured TensorRT-LLM's MXFP4 experts at moe_tp 1 only)
            candidates.append((None, (*shape[:4], 1, split[0]), True))
        for routing, measured, from_ep in candidates:
            key = (routing, dtype, *measured) if routing else (dtype, *measured)
            shared = (self.shared_moe.skewed if routing else self.shared_moe.balanced) if self.shared_moe else {}
            rows = (self.tables.moe_skewed if routing else self.tables.moe).get(key)
            if rows is None and key in shared:          # the engine's that shares the kernel
                rows, self.experts_shared = shared[key], True
            if rows is None and dtype == MARLIN_MOE_DTYPE and not from_ep:
                rows = self._marlin_rows(m, routing, shape)
                self.marlin_from_w4a16 = rows is not None
            if rows is not None:
                self.experts_skew = alpha if routing else None
                self.experts_from_ep_rows = from_ep
                layers = m.num_moe_layers * layers_per_stage(m, p) / m.num_layers
                return layers, Curve(rows if routing else random_routing(rows, f.top_k, f.num_experts))
        return None

    def _marlin_rows(self, m: ModelSpec, routing: str | None, shape: tuple[int, ...]) -> dict[int, float] | None:
        """Marlin's MXFP4 MoE where its own rows lack the shape: the W4A16 rows no faster than Marlin's rows of
        another shape at this split do the FLOPs (`marlin_capped`, on the balanced rows, whose routing the cap's rates
        were measured with); under a power law's `routing` times the W4A16 rows' own skewed over balanced latency at
        each token count (the routing changes what the two kernels read alike)."""
        f, split = m.moe, shape[4:]
        w4a16 = self.tables.moe.get((MOE_DTYPES["mxfp4"], *shape))
        # Marlin measured in another shape at this split (the bundled H100/H200/B200/GB200 folders: 896 experts of
        # 3,584 x 3,072, top 16; the first such shape where a folder has several)
        other = next((k for k in sorted(self.tables.moe) if k[0] == MARLIN_MOE_DTYPE and k[5:] == split), None)
        skewed = self.tables.moe_skewed.get((routing, MOE_DTYPES["mxfp4"], *shape)) if routing else None
        if w4a16 is None or other is None or (routing and skewed is None):
            return None
        _, h, w, k, e, *_ = other
        gpus = split[0] * split[1]
        capped = marlin_capped(w4a16, 6.0 * m.hidden_size * f.expert_width * f.top_k / gpus, f.top_k, f.num_experts,
                               self.tables.moe[other], 6.0 * h * w * k / gpus, k, e)
        return capped if skewed is None else {t: capped[t] * skewed[t] / w4a16[t] for t in capped if t in skewed}

    def _latent(self, m: ModelSpec, p: ParallelConfig, generation: Mapping, context: Mapping,
                key_of: Callable[[tuple[int, ...]], tuple]
                ) -> tuple[list[LatentShape], list[tuple[float, BatchCurves, BatchCurves]]]:
        """The dense MLA shapes a pair of MLA tables (decode, prefill) holds under the keys `key_of` makes of each
        shape's dims, and per shape (layers per stage, decode latency by (seqs, KV length), prefill latency by
        (seqs, tokens)); none unless all are."""
        shapes, curves = latent_shapes(m, p), []
        for shape in shapes:
            decode = attention_rows(generation, key_of(shape.dims))
            prefill = attention_rows(context, key_of(shape.dims))
            if decode is None or prefill is None:
                return [], []
            curves.append((shape.per_stage, decode, prefill))
        return shapes, curves

    def _delta_net(self, m: ModelSpec, p: ParallelConfig) -> list[tuple[float, Curve, BatchCurves]]:
        """Per gated delta net shape (layers per stage, decode latency by seqs, prefill latency by (seqs, chunk
        tokens)) when every recurrent layer is one the GDN tables hold; else none (the roofline prices the state)."""
        shapes, curves = delta_net_shapes(m, p), []
        if sum(s.per_stage for s in shapes) < self.roofline.kv.state_layers * layers_per_stage(m, p) / m.num_layers:
            return []                                # Mamba-2 layers among them
        for shape in shapes:
            decode = self.tables.gdn_generation.get(shape.dims)
            prefill = attention_rows(self.tables.gdn_context, shape.dims)
            if decode is None or prefill is None:
                return []
            curves.append((shape.per_stage, Curve(decode), prefill))
        return curves

    def _attention(self, m: ModelSpec, p: ParallelConfig, kv: str | None, latent: set[str],
                   missing: list[str]) -> None:
        found, unmeasured = [], set()
        # one sequence's K and V of one layer per token, read at the memory bandwidth (KvReadFloor): in the dtype the
        # bundled engine ran in where its tables are read in it (float32 on a CPU), else the deployment's KV dtype
        value_bytes = (DTYPE_BYTES[self.ran_in] if self.ran_in and kv == self.ran_in
                       else kv_value_bytes(self.roofline.kv.dtype))
        s_per_value = value_bytes / self.roofline.hardware.memory_bandwidth_bytes_per_s
        for s in attention_shapes(m, p):
            key = (kv, s.heads, s.kv_heads, s.head_dim)
            decode, decode_blend = heads_rows(self.tables.generation_attention, key)
            prefill, prefill_blend = heads_rows(self.tables.context_attention, key)
            if decode is None or prefill is None:
                unmeasured.add(s.label)
            else:
                blends = {note for note in (decode_blend, prefill_blend) if note}
                decode = KvReadFloor(decode, 2 * s.kv_heads * s.head_dim * s_per_value)
                found.append((s.label, (s.per_stage, s.window_tokens, decode, prefill), blends))
        # a KV group (layers of one mixer kind) is priced wholly by the tables or wholly by the roofline:
        # by the roofline when any of its shapes is not measured, and for other mixers (sparse MLA, ...);
        # dense MLA groups the module tables hold (`latent`) are priced in attention_s. The plan names a head
        # interpolation only where the tables priced it.
        self.attention = [entry for label, entry, _ in found if label not in unmeasured]
        self.blended_heads = set().union(*(blends for label, _, blends in found if label not in unmeasured))
        measured = ({label for label, _, _ in found} - unmeasured) | latent
        groups = self.roofline.kv.groups
        self.roofline_groups = [i for i, g in enumerate(groups) if g.label not in measured]
        if self.roofline_groups:
            missing.append("attention of " + ", ".join(groups[i].label for i in self.roofline_groups))

    def attention_s(self, batch: StepBatch) -> float:
        """Attention, MLA blocks and recurrent mixers of one stage: from the tables what they hold, the others
        from the roofline."""
        if not (self.attention or self.latent or self.delta_net):     # the roofline's groups alone (no split needed)
            groups_s = self.roofline.attention_groups_s(self.roofline_groups, batch)
            return groups_s + batch.num_seqs * self._state_s_per_seq
        total = 0.0
        decode, decode_ctx, prefill, n, c = split_attention(batch)
        for layers, window, decode_t, prefill_t in self.attention:
            if decode:
                kv_len = decode_ctx + 1 if window is None else min(decode_ctx + 1, window)
                total += layers * decode_t(decode, kv_len)
            if prefill:
                # a windowed layer's chunk attends to at most `window` keys a query: the table's cost per pair at
                # the chunk's length, times the pairs the window leaves
                s = n + (c if window is None else min(c, window))
                pairs = n * c + n * (n + 1) / 2 if window is None else windowed_pairs(n, c, window)
                s_table = min(s, prefill_t.longest(prefill))   # past the longest measured prompt: its cost per pair
                total += layers * prefill_t(prefill, s_table) * pairs / (s_table * (s_table + 1) / 2)
        for layers, decode_t, prefill_t in self.latent:
            if decode:
                total += layers * decode_t(decode, decode_ctx + 1)
            if prefill:
                own = prefill_t(prefill, n)
                total += layers * (max(own, prefill_t(prefill, n + c) - prefill_t(prefill, c)) if c else own)
        for layers, decode_t, prefill_t in self.delta_net:
            if decode:
                total += layers * decode_t(decode)
            if prefill:
                total += layers * prefill_t(prefill, n)
        r = self.roofline
        for i in self.roofline_groups:
            total += r.attention_group_s(i, batch)
        return total + batch.num_seqs * self._state_s_per_seq

    def step_time(self, batch: StepBatch) -> float:
        if batch.new_tokens == 0:
            return 0.0
        expert_tokens = batch.new_tokens
        if self.ranks > 1:      # the busiest data-parallel rank; its MoE layers route every rank's tokens under EP
            batch, expert_tokens = self.roofline.rank_and_expert_tokens(batch)
        tokens = batch.new_tokens
        # curves of one integer: memoised (steps repeat them; a hit costs no call)
        per_token = self._per_token_memo.get(tokens)
        if per_token is None:
            per_token = _memoised(self._per_token_memo, tokens, self.per_token)
        stage = per_token + self.attention_s(batch) + self._fixed_s + tokens * self._s_per_token
        if self.roofline_gemms:
            r = self.roofline
            for count, n, k in self.roofline_gemms:
                stage += count * r.gemm_s(tokens, n, k)
        if self._experts is not None:        # the busiest GPU's experts see the imbalance times the mean tokens
            layers, curve = self._experts
            stage += layers * curve(self.load_imbalance * expert_tokens)
        if self._roofline_experts:
            stage += self.roofline.expert_gemm_s(expert_tokens)
        if batch.lora_tokens:                # the adapters' low-rank GEMMs: no table holds them (the roofline's)
            stage += self.roofline.lora_s(batch)
        rows = batch.logits_rows
        lm_head = self._lm_head_memo.get(rows)
        if lm_head is None:
            lm_head = _memoised(self._lm_head_memo, rows, self._lm_head_s)
        return stage * self.pp + lm_head + self.step_overhead_s

    def decode_step_time(self) -> Callable[[int, int], float] | None:
        """`step_time` of a plain decode step, `seqs` one-token decodes on `context` tokens in all (the StepBatch
        (seqs, seqs, context, context + seqs)), as a function of those two, where the tables price its attention on
        one rank and the roofline prices none of it (`sums_step_time` covers the roofline's plain attention); None
        otherwise. The same additions and products
        in the same order as `step_time` and `attention_s` with `split_attention`'s values for such a batch (no
        prefill: its context per decode is `(context - 0 * 0.0) / seqs`), flattened into one call for the
        simulator's decode steps whose time is not memoised (tests/sizer/timing compare the two to the bit)."""
        if self.ranks > 1 or self.roofline_groups or not (self.attention or self.latent or self.delta_net):
            return None
        attention, latent, delta_net = tuple(self.attention), tuple(self.latent), tuple(self.delta_net)
        roofline, roofline_gemms = self.roofline, tuple(self.roofline_gemms)
        experts, roofline_experts, load_imbalance = self._experts, self._roofline_experts, self.load_imbalance
        per_token_memo, per_token_curve = self._per_token_memo, self.per_token
        lm_head_memo, lm_head_curve = self._lm_head_memo, self._lm_head_s
        state, fixed, s_per_token = self._state_s_per_seq, self._fixed_s, self._s_per_token
        pp, overhead = self.pp, self.step_overhead_s

        def step_s(seqs: int, context: int) -> float:
            if seqs == 0:
                return 0.0
            per_token = per_token_memo.get(seqs)
            if per_token is None:
                per_token = _memoised(per_token_memo, seqs, per_token_curve)
            total = 0.0
            decode_ctx = (context - 0 * 0.0) / seqs
            for layers, window, decode_t, _ in attention:
                kv_len = decode_ctx + 1 if window is None else min(decode_ctx + 1, window)
                total += layers * decode_t(seqs, kv_len)
            for layers, decode_t, _ in latent:
                total += layers * decode_t(seqs, decode_ctx + 1)
            for layers, decode_t, _ in delta_net:
                total += layers * decode_t(seqs)
            stage = per_token + (total + seqs * state) + fixed + seqs * s_per_token
            for calls, n, k in roofline_gemms:
                stage += calls * roofline.gemm_s(seqs, n, k)
            if experts is not None:
                layers, curve = experts
                stage += layers * curve(load_imbalance * seqs)
            if roofline_experts:
                stage += roofline.expert_gemm_s(seqs)
            lm_head = lm_head_memo.get(seqs)
            if lm_head is None:
                lm_head = _memoised(lm_head_memo, seqs, lm_head_curve)
            return stage * pp + lm_head + overhead
        return step_s

    def sums_step_time(self) -> Callable[[int, int, int, int], float] | None:
        """`step_time` as a function of a batch's first four sums (sequences, new tokens, context tokens, attention
        pairs) where it reads no other field: one rank, attention from the roofline's plain groups alone (no
        tables, MLA or delta-net rows, no window or top-k), no roofline GEMMs or experts, no LoRA adapters (their
        tokens are a later field); None otherwise. It prices a batch without drafts (their logits rows, a later
        field, are left out: the simulator sends it no other). The
        same additions and products in the same order as `step_time`, `attention_s`, `attention_groups_s` and
        the roofline's `_group_s` (with `attended` 1.0, whose products are exact), flattened into one call for
        the simulator's steps whose time is not memoised (tests/sizer/timing compare the two to the bit)."""
        if (self.attention or self.latent or self.delta_net or self.ranks > 1 or self.roofline_gemms
                or self._experts is not None or self._roofline_experts or self.roofline.lora is not None):
            return None
        groups = self.roofline.plain_groups(self.roofline_groups)
        if groups is None:
            return None
        per_token_memo, per_token_curve = self._per_token_memo, self.per_token
        lm_head_memo, lm_head_curve = self._lm_head_memo, self._lm_head_s
        state, fixed, s_per_token = self._state_s_per_seq, self._fixed_s, self._s_per_token
        pp, overhead = self.pp, self.step_overhead_s

        def step_s(seqs: int, tokens: int, context: int, pairs: int) -> float:
            if tokens == 0:
                return 0.0
            per_token = per_token_memo.get(tokens)
            if per_token is None:
                per_token = _memoised(per_token_memo, tokens, per_token_curve)
            groups_s = 0.0
            for per_pair, per_token_s in groups:
                groups_s += max(pairs * 1.0 * per_pair, (context * 1.0 + 2 * tokens) * per_token_s)
            stage = per_token + (groups_s + seqs * state) + fixed + tokens * s_per_token
            lm_head = lm_head_memo.get(seqs)
            if lm_head is None:
                lm_head = _memoised(lm_head_memo, seqs, lm_head_curve)
            return stage * pp + lm_head + overhead
        return step_s


MEMO_ENTRIES = 1 << 14      # a memo of a curve of one integer is cleared past this (a pure function: no number changes)


def _memoised(memo: dict[int, float], key: int, curve: Callable[[int], float]) -> float:
    """curve(key), from `memo` when it was asked before."""
    value = memo.get(key)
    if value is None:
        if len(memo) >= MEMO_ENTRIES:
            memo.clear()
        value = memo[key] = curve(key)
    return value


class BundledEngineStepTimeModel:
    """The bundled engine's whole steps on a device it calibrated (`sizer validate --kernel-tables`): the
    kernel-table step x the fitted kernel factor, plus the fitted seconds beyond the kernels (host work,
    sampling, launches: `BundledEngine.overhead`, fitted on one model and used for any, its forward pass's
    fixed part scaled by the layers)."""

    def __init__(self, tables_model: KernelTableStepTimeModel, overhead: Overhead, fitted_layers: int,
                 max_num_batched_tokens: int, max_num_seqs: int):
        self.tables_model, self.overhead = tables_model, overhead
        self.layers_ratio = tables_model.roofline.model.num_layers / fitted_layers
        self.max_num_batched_tokens, self.max_num_seqs = max_num_batched_tokens, max_num_seqs
        self.steps = self.out_of_range_steps = 0     # steps larger than the tables' measured range
        self.name = f"{tables_model.name}; the bundled engine's fitted step overhead"

    def step_time(self, batch: StepBatch) -> float:
        if batch.new_tokens == 0:
            return 0.0
        self.steps += 1
        if batch.new_tokens > self.max_num_batched_tokens or batch.num_seqs > self.max_num_seqs:
            self.out_of_range_steps += 1
        factor, beyond_s = self.overhead.line(batch, self.layers_ratio)
        return factor * self.tables_model.step_time(batch) + beyond_s
