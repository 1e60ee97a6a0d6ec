"""The roofline step-time model: seconds for one engine step from FLOPs, bytes and the profile.

A step runs, on each GPU of the busiest pipeline stage, one after another:
  GEMMs      max(2 x active params x tokens / (peak x eff), weight bytes read / (bw x eff x weight efficiency))
  attention  max(4 x query-key pairs x heads x head dim / (peak x eff),
                 KV bytes read+written / (bw x eff x attention KV efficiency))
  lm_head    for one sampled token per sequence
  collectives  TP all-reduce / EP all-to-all bytes / link bandwidth + a fixed latency each
  layers     a fixed cost per layer (graph replay and launches of its small kernels: norms,
             rotary, KV write, activation)
  overhead   a fixed per-step cost (sampling, the step's own launches)
  LoRA       max(2 x adapter params x LoRA tokens / (peak x eff), adapters in the step x adapter bytes / bw)
             + a fixed cost per layer of the shrink/expand kernels (Punica SGMV, S-LoRA), when any runs
With pipeline parallelism a step's latency is the sum over its stages (no micro-batching).
The efficiencies come from the hardware profile and are printed with every plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.step_batch import StepBatch, attention_pairs
from sizer.analytic import llamacpp
from sizer.analytic.format_support import execution
from sizer.analytic.formats import WeightFormat, embedding_bytes_per_value, group_bytes
from sizer.analytic.memory import KVLayout, LoraMemory, WeightMemory
from sizer.analytic.offload import OP_OFFLOAD_MIN_BATCH, Offload
from sizer.analytic.parallel import ParallelConfig, comm_per_step, layers_per_stage, shard_fraction
from sizer.analytic.weights import linear_groups, parameter_count
from sizer.errors import InputError
from sizer.inputs.hardware import HardwareSpec, scale_up_link
from sizer.inputs.layers import EXPERT, LM_HEAD, VISION
from sizer.inputs.model_spec import ModelSpec

# Assumptions (replace with a calibrated profile): printed by the plan.
STEP_OVERHEAD_S = 0.5e-3          # sampler and the step's own launches (CUDA graphs on); scheduling: the engine loop
COLLECTIVE_LATENCY_S = 8e-6       # fixed cost of one NVLink all-reduce / all-to-all
# Hardware-level constants fitted once on the public vLLM 0.15.1 H100 runs (benchmarks/fidelity_vllm.py,
# docs/fidelity.md), never per model or experiment; other GPUs take them until measured.
WEIGHT_STREAM_EFFICIENCY = 0.80   # memory-bound GEMMs stream weights at this share of the achievable bandwidth
ATTENTION_KV_EFFICIENCY = 0.95    # paged-attention KV reads reach this share of the achievable bandwidth
LAYER_STEP_S = 5e-6               # fixed cost per layer per step: small kernels and their launches
# FP8 GEMMs reach less of the FP8 peak than 16-bit GEMMs reach of theirs: the share of the dense FP8 peak at
# m = 8,192 tokens, median over the (n, k) grid points of 4,096 and more in the GPU's bundled vLLM 0.24.0 tables
# (aiconfigurator-core 0.12.0; benchmarks/roofline_efficiencies.py prints them, and m = 512: 56%, 61%, 48%, 39%,
# 35%). A GPU without FP8 tables (or without FP8) keeps its profile's compute efficiency; 16-bit GEMMs keep it too
# (the same tables: H100 77%, H200 76%, A100 92%, L40S 57%, B200 69%, GB200 48% of the bf16 peak; docs/fidelity.md).
FP8_COMPUTE_EFFICIENCY = {"h100-sxm": 0.66, "h200": 0.68, "l40s": 0.49, "b200": 0.45, "gb200": 0.45}
FP8_COMPUTE_SOURCE = ("measured FP8 GEMMs at m = 8,192, the GPU's bundled vLLM tables "
                      "(benchmarks/roofline_efficiencies.py)")
# Assumption: the LoRA shrink and expand kernels (vLLM's Punica-style SGMV/BGMV Triton kernels, one pair per
# LoRA-wrapped module, ~4 per layer) cost a fixed ~1 us each beyond their FLOPs and bytes under CUDA graphs.
LORA_STEP_S_PER_LAYER = 8e-6


@dataclass(frozen=True)
class StepCost:
    """The parts of one step's time, in seconds."""
    gemm_s: float
    attention_s: float
    lm_head_s: float
    comm_s: float
    overhead_s: float
    gemm_compute_bound: bool
    layers_s: float = 0.0
    lora_s: float = 0.0

    @property
    def total_s(self) -> float:
        return (self.gemm_s + self.attention_s + self.lm_head_s + self.comm_s + self.layers_s + self.overhead_s
                + self.lora_s)


class RooflineStepTimeModel:
    """`step_time(batch)` from the architecture, the split and the hardware profile."""

    def __init__(self, model: ModelSpec, hardware: HardwareSpec, weights_format: WeightFormat, weights: WeightMemory,
                 kv: KVLayout, parallel: ParallelConfig, group_size: int = 128,
                 step_overhead_s: float = STEP_OVERHEAD_S, offload: Offload | None = None,
                 lora: LoraMemory | None = None):
        if not hardware.has_datasheet:
            raise InputError(None, "hardware.gpu", f"{hardware.name} has no datasheet figures to price steps with; "
                             "steps on it are measured (sizer calibrate, then sizer validate)")
        self.model, self.hardware, self.parallel, self.kv, self.offload = model, hardware, parallel, kv, offload
        self.llamacpp = llamacpp.runs_llamacpp(weights_format, hardware)
        self.step_overhead_s = step_overhead_s
        self.lora = lora
        compute_fmt = execution(weights_format, hardware).compute_format   # weight-only kernels run 16-bit GEMMs
        self.compute_format = compute_fmt
        self.weight_format = weights_format.name
        measured = FP8_COMPUTE_EFFICIENCY.get(hardware.id) if compute_fmt == "fp8" else None
        self.gemm_compute_efficiency = measured or hardware.compute_efficiency
        self.gemm_compute_efficiency_source = FP8_COMPUTE_SOURCE if measured else hardware.compute_efficiency_source
        self.name = (f"roofline on {hardware.name} (efficiency: compute {self.gemm_compute_efficiency:.0%}"
                     + (" of FP8 peak" if measured else "") + f", bandwidth {hardware.bandwidth_efficiency:.0%}"
                     + ("; llama.cpp step costs" if self.llamacpp else "") + ")")
        self.gemm_flops_per_s = (hardware.peak_flops(compute_fmt) * self.gemm_compute_efficiency
                                 * llamacpp.prompt_share(weights_format, hardware))
        self.attn_flops_per_s = hardware.peak_flops("bf16") * hardware.compute_efficiency
        self.bytes_per_s = hardware.memory_bandwidth_bytes_per_s * hardware.bandwidth_efficiency
        self.link_bytes_per_s = scale_up_link(hardware).bytes_per_s_per_direction
        self.comm = comm_per_step(model, parallel)
        self._shares(weights_format, weights, group_size)
        self._coefficients()
        self.sources = {"all operators": "roofline"}

    def _shares(self, fmt: WeightFormat, weights: WeightMemory, group_size: int) -> None:
        """Per-GPU parameters and bytes of the dense part, the experts and the lm_head (vision towers run
        only on images, so a text step reads none of theirs)."""
        m, p = self.model, self.parallel
        scale = weights.parameters / parameter_count(m).total     # 1.0 unless a parameter count was stated
        dense_params = dense_bytes = expert_params = expert_bytes = expert_active = lm_params = lm_bytes = 0.0
        for g in linear_groups(m):
            if g.kind == VISION:
                continue
            share = shard_fraction(g, m, p) * scale
            values, extra, _ = group_bytes(g, fmt, group_size, m)
            nbytes = values + extra
            if g.kind == EXPERT:
                moe = m.layers[g.layers[0]].ffn
                expert_params += g.params * share
                expert_active += g.params * share * moe.top_k / moe.num_experts
                expert_bytes += nbytes * share
            elif g.kind == LM_HEAD:
                lm_params += g.params * share
                lm_bytes += nbytes * share
            else:
                dense_params += g.params * share
                dense_bytes += nbytes * share
        if m.tie_word_embeddings:   # the embedding matrix doubles as the lm_head
            lm_params = m.vocab_size * m.hidden_size / p.tp * scale
            lm_bytes = lm_params * embedding_bytes_per_value(fmt, m)
        self.dense_params, self.dense_bytes = dense_params, dense_bytes
        self.expert_params, self.expert_bytes, self.expert_active_params = expert_params, expert_bytes, expert_active
        self.lm_params, self.lm_bytes = lm_params, lm_bytes
        self.weight_bytes_per_gpu = dense_bytes + expert_bytes + lm_bytes

    def experts_touched(self, tokens: int) -> float:
        """Expected share of a GPU's experts that at least one of `tokens` routes to."""
        moe = self.model.moe
        if moe is None:
            return 0.0
        return 1.0 - (1.0 - moe.top_k / moe.num_experts) ** tokens

    def _coefficients(self) -> None:
        """Seconds per unit of work, computed once: step_time is called once per simulated step."""
        m, p = self.model, self.parallel
        moe = m.moe
        self._gemm_s_per_token = 2.0 * (self.dense_params + self.expert_active_params) / self.gemm_flops_per_s
        weight_bytes_per_s = self.bytes_per_s * (1.0 if self.llamacpp else WEIGHT_STREAM_EFFICIENCY)
        self._dense_read_s = self.dense_bytes / weight_bytes_per_s
        self._expert_read_s = self.expert_bytes / weight_bytes_per_s
        self._expert_miss = 1.0 - moe.top_k / moe.num_experts if moe else 1.0
        stage = layers_per_stage(m, p) / m.num_layers
        # Attention, per group of layers that cache the same KV and keep the same span:
        # (FLOPs per query-key pair, KV seconds per token kept, window or None)
        # DSA groups add (top-k, the indexer's seconds per pair and per cached token): the indexer runs in FP8
        # (DeepGEMM's fp8_mqa_logits in vLLM) where the GPU has FP8, its heads whole on every TP rank
        self._attention_groups = []
        kv_bytes_per_s = self.bytes_per_s * ATTENTION_KV_EFFICIENCY
        hw = self.hardware
        index_flops_per_s = hw.peak_flops("fp8" if hw.supports("fp8") else "bf16") * hw.compute_efficiency
        for group in self.kv.groups:
            seconds_per_pair = group.flops_per_pair_per_layer / p.tp * group.layers * stage / self.attn_flops_per_s
            self._attention_groups.append((
                seconds_per_pair,
                (group.bytes_per_token_per_gpu - group.index_bytes_per_token_per_gpu) / kv_bytes_per_s,
                group.window_tokens, group.attended_tokens,
                group.index_flops_per_pair_per_layer * group.layers * stage / index_flops_per_s,
                group.index_bytes_per_token_per_gpu / kv_bytes_per_s))
        # Mamba-2 / linear attention: each sequence's state is read and written once per step
        self._state_s_per_seq = 2 * self.kv.state_bytes_per_seq_per_gpu / self.bytes_per_s
        self._lm_s_per_seq = 2.0 * self.lm_params / self.gemm_flops_per_s
        self._lm_read_s = self.lm_bytes / weight_bytes_per_s
        # Partial offload: the GPU reads its layers; host layers are read by the CPU (decode) or copied to the GPU
        # over the host link (prompt batches of OP_OFFLOAD_MIN_BATCH tokens and more)
        self._host_read_s = self._host_upload_s = 0.0
        if self.offload:
            o = self.offload
            self._dense_read_s, self._lm_read_s = o.gpu_weight_bytes / weight_bytes_per_s, 0.0
            self._host_read_s = o.host_layer_bytes / o.host_read_bytes_per_s
            self._host_upload_s = o.host_layer_bytes / o.host_link_bytes_per_s
        c = self.comm
        self._comm_s_per_token = (c.tp_allreduce_bytes_per_token + c.pp_send_bytes_per_token
                                  + c.ep_alltoall_bytes_per_token) / self.link_bytes_per_s
        collectives = c.allreduces_per_step + (2 * m.num_moe_layers if p.expert_parallel and p.ep > 1 else 0)
        self._comm_fixed_s = collectives * COLLECTIVE_LATENCY_S
        layer_s = llamacpp.LAYER_STEP_S[self.hardware.device_kind] if self.llamacpp else LAYER_STEP_S
        self._layers_s = layers_per_stage(m, p) * layer_s
        lora = self.lora
        self._lora_s_per_token = 2.0 * lora.params_per_slot / self.gemm_flops_per_s if lora else 0.0
        self._lora_read_s = lora.bytes_per_slot / (self.bytes_per_s * WEIGHT_STREAM_EFFICIENCY) if lora else 0.0
        self._lora_fixed_s = layers_per_stage(m, p) * LORA_STEP_S_PER_LAYER

    def lora_s(self, batch: StepBatch) -> float:
        """One stage's extra time for the step's LoRA tokens: the adapters' FLOPs or the read of
        each adapter in the step, whichever is longer, plus the kernels' fixed cost."""
        if not batch.lora_tokens:
            return 0.0
        compute = batch.lora_tokens * self._lora_s_per_token
        memory = batch.lora_adapters * self._lora_read_s
        return (compute if compute > memory else memory) + self._lora_fixed_s

    def _group_s(self, group: tuple, batch: StepBatch) -> float:
        seconds_per_pair, seconds_per_token, window, topk, index_s_per_pair, index_s_per_token = group
        if topk:    # DSA: the indexer over every pair and cached token, then attention over the top-k of each query
            pairs = min(batch.attention_pairs, batch.new_tokens * topk)
            read = min(batch.context_tokens, batch.num_seqs * topk)
            index = max(batch.attention_pairs * index_s_per_pair,
                        (batch.context_tokens + batch.new_tokens) * index_s_per_token)
            return max(pairs * seconds_per_pair, (read + 2 * batch.new_tokens) * seconds_per_token) + index
        attended = 1.0       # windowed layers attend to at most a window per sequence
        if window and batch.context_tokens:
            attended = min(1.0, batch.num_seqs * window / batch.context_tokens)
        return max(batch.attention_pairs * attended * seconds_per_pair,
                   (batch.context_tokens * attended + 2 * batch.new_tokens) * seconds_per_token)

    def _parts(self, batch: StepBatch) -> tuple[float, float, float, float, float]:
        """(GEMM compute s, GEMM memory s, attention s, lm_head s, collectives s) for one stage."""
        tokens = batch.new_tokens
        gemm_compute = tokens * self._gemm_s_per_token
        gemm_memory = self._dense_read_s + (self._expert_read_s * (1.0 - self._expert_miss ** tokens)
                                            if self._expert_read_s else 0.0)
        attention = batch.num_seqs * self._state_s_per_seq
        for group in self._attention_groups:
            attention += self._group_s(group, batch)
        lm_head = max(batch.num_seqs * self._lm_s_per_seq, self._lm_read_s)
        comm = tokens * self._comm_s_per_token + self._comm_fixed_s
        if self.offload:        # host layers: a transfer on top of the GPU's work, counted with the collectives
            comm += self._host_upload_s if tokens >= OP_OFFLOAD_MIN_BATCH else self._host_read_s
        return gemm_compute, gemm_memory, attention, lm_head, comm

    # The parts one at a time, for the kernel-table model to price what its tables lack (one stage each).
    def attention_group_s(self, index: int, batch: StepBatch) -> float:
        """Attention of the layers of KV group `index` (self.kv.groups)."""
        return self._group_s(self._attention_groups[index], batch)

    def state_s(self, batch: StepBatch) -> float:
        """Mamba-2 / linear-attention state read and written once per sequence."""
        return batch.num_seqs * self._state_s_per_seq

    def gemm_s(self, tokens: int, n: int, k: int) -> float:
        """One dense (n, k) GEMM of `tokens` rows: compute or weight streaming, whichever is longer."""
        bytes_per_value = self.dense_bytes / self.dense_params if self.dense_params else 2.0
        return max(tokens * 2.0 * n * k / self.gemm_flops_per_s,
                   n * k * bytes_per_value / (self.bytes_per_s * WEIGHT_STREAM_EFFICIENCY))

    def expert_gemm_s(self, tokens: int) -> float:
        if not self._expert_read_s:
            return 0.0
        return max(tokens * 2.0 * self.expert_active_params / self.gemm_flops_per_s,
                   self._expert_read_s * (1.0 - self._expert_miss ** tokens))

    def lm_head_s(self, seqs: int) -> float:
        return max(seqs * self._lm_s_per_seq, self._lm_read_s)

    def transfer_s(self, tokens: int, allreduce: bool = True) -> float:
        """Collectives of one stage: the pipeline send and the expert all-to-all, the TP all-reduces if asked."""
        c = self.comm
        nbytes = c.pp_send_bytes_per_token + c.ep_alltoall_bytes_per_token \
            + (c.tp_allreduce_bytes_per_token if allreduce else 0.0)
        fixed = self._comm_fixed_s if allreduce else self._comm_fixed_s - c.allreduces_per_step * COLLECTIVE_LATENCY_S
        return tokens * nbytes / self.link_bytes_per_s + fixed

    @property
    def layers_s(self) -> float:
        return self._layers_s

    def cost(self, batch: StepBatch) -> StepCost:
        if batch.new_tokens == 0:
            return StepCost(0, 0, 0, 0, 0, False)
        gemm_compute, gemm_memory, attention, lm_head, comm = self._parts(batch)
        stages = self.parallel.pp
        return StepCost(max(gemm_compute, gemm_memory) * stages, attention * stages, lm_head, comm * stages,
                        self.step_overhead_s, gemm_compute >= gemm_memory, self._layers_s * stages,
                        self.lora_s(batch) * stages)

    def step_time(self, batch: StepBatch) -> float:
        if batch.new_tokens == 0:
            return 0.0
        gemm_compute, gemm_memory, attention, lm_head, comm = self._parts(batch)
        lora = self.lora_s(batch) if batch.lora_tokens else 0.0
        return ((gemm_compute if gemm_compute > gemm_memory else gemm_memory) + attention + comm + self._layers_s
                + lora) * self.parallel.pp + lm_head + self.step_overhead_s


def prefill_time_s(model: RooflineStepTimeModel, prompt_tokens: int, chunk_tokens: int | None) -> float:
    """A prompt alone, processed in chunks of at most `chunk_tokens` (one step each)."""
    total, done = 0.0, 0
    chunk = chunk_tokens or prompt_tokens
    while done < prompt_tokens:
        n = min(chunk, prompt_tokens - done)
        total += model.step_time(StepBatch.from_seqs([(n, done)], prefill=[True]))
        done += n
    return total


def decode_batch(batch_size: int, context_tokens: int) -> StepBatch:
    """`batch_size` sequences each decoding one token on `context_tokens` of context."""
    return StepBatch(num_seqs=batch_size, new_tokens=batch_size, context_tokens=batch_size * context_tokens,
                     attention_pairs=batch_size * attention_pairs(1, context_tokens))


def compute_bound_batch(model: RooflineStepTimeModel, context_tokens: int, limit: int = 1 << 16) -> int | None:
    """Smallest decode batch whose GEMMs are compute-bound (None if none up to `limit`)."""
    lo, hi = 1, limit
    if not model.cost(decode_batch(hi, context_tokens)).gemm_compute_bound:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if model.cost(decode_batch(mid, context_tokens)).gemm_compute_bound:
            hi = mid
        else:
            lo = mid + 1
    return lo
