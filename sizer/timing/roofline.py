"""The roofline step-time model: seconds for one engine step from FLOPs, bytes and the profile.

A step runs, on each GPU of the busiest pipeline stage, one after another:
  GEMMs      max(2 x active params x tokens / (peak x eff), weight bytes read / (bw x eff x weight efficiency))
  MoE        per MoE layer: a fixed cost (router, top-k, token permutation, grouped-GEMM launches, combine)
             + max(the routed tokens' expert FLOPs x load imbalance / (peak x grouped-GEMM efficiency at
             the step's tokens per expert), the bytes of the experts they touch / (bw x eff x weight
             efficiency x the grouped GEMMs' streaming share)): a prefill is priced by its tokens per
             expert, not as one dense GEMM
  attention  max(4 x query-key pairs x heads x head dim / (peak x eff),
                 KV bytes read+written / (bw x eff x attention KV efficiency))
  lm_head    a logits row per sequence, and one per draft token a speculative verification scores
  collectives  TP all-reduce / EP all-to-all bytes / link bandwidth + a fixed latency each + the wait for the
             last GPU of the group to reach it
  layers     a fixed cost per layer (graph replay and launches of its small kernels: norms,
             rotary, KV write, activation)
  overhead   a fixed per-step cost (sampling, the step's own launches)
  LoRA       max(2 x adapter params x LoRA tokens / (peak x eff), adapters in the step x adapter bytes / bw)
             + a fixed cost per layer of the shrink/expand kernels (Punica SGMV, S-LoRA), when any runs
With pipeline parallelism a step's latency is the sum over its stages (no micro-batching). With data-parallel
ranks (sizer/analytic/parallel.py) everything but the MoE layers is the busiest rank's share of the step; with
expert parallelism across the ranks the MoE layers take every rank's tokens, and their all-to-all (dispatch and
combine) the rank's own.
The efficiencies come from the hardware profile and are printed with every plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

from simulator.step_batch import StepBatch, attention_pairs, split_attention, windowed_pairs
from sizer.analytic.format_support import Execution, execution, family
from sizer.analytic.formats import WeightFormat, embedding_bytes_per_value, group_bytes
from sizer.analytic.memory import KVLayout, LoraMemory, WeightMemory
from sizer.analytic.offload import OP_OFFLOAD_MIN_BATCH, Offload
from sizer.analytic.parallel import ParallelConfig, comm_per_step, layers_per_stage, rank_batch, shard_fraction
from sizer.analytic.weights import linear_groups, parameter_count
from sizer.errors import InputError
from sizer.inputs.hardware import HardwareSpec, alltoall_link, scale_up_link
from sizer.inputs.layers import EXPERT, LM_HEAD, VISION
from sizer.inputs.model_spec import ModelSpec
from sizer.timing import llamacpp

# Assumptions (replace with a calibrated profile): printed by the plan.
STEP_OVERHEAD_S = 0.5e-3          # sampler and the step's own launches (CUDA graphs on); scheduling: the engine loop
# The same beside measured kernels (the kernel-table step model, whose tables time each kernel of the forward): the
# step's input preparation and sampler, by engine. Fitted once per engine with its tables where public points decide
# it, never per model or run (docs/fidelity.md, "The step overhead beside the tables"), with the collectives' wait
# below. vLLM: the median signed TPOT error of InferenceMAX's vLLM 0.13 gpt-oss-120b points (H100, H200, B200: 150
# points) is +2.3..+4.0% at 0 and grows with it, the median signed ITL error of the 15 public vLLM 0.15.1 H100 runs
# -2.5% at 0 and 0 at about 0.15 ms: 0. TensorRT-LLM (its overlap scheduler, on by default, runs a step's host work
# beside the next step's kernels: nvidia.github.io/TensorRT-LLM features/overlap-scheduler): InferenceMAX's
# trtllm-serve gpt-oss-120b points (B200, 60 points, 2-3 ms steps at 4-8 clients) have a median TPOT error of +24.6%
# with the roofline's 0.5 ms and +7.9% at 0, and TensorRT-LLM's published maximum-load rows (59) a median |error| of
# 3.0% / 3.2% (dense / MoE) with it and 3.6% / 3.1% at 0, the dense rows' largest -9.0% -> +7.5%: 0. SGLang keeps the
# roofline's assumption: its 30 DeepSeek-R1 points do not decide it (at 0 the median |TPOT error| goes 3.6 -> 6.3% on
# the H200 and 10.9 -> 9.7% on the B200).
TABLES_STEP_OVERHEAD_S = {"vllm": 0.0, "tensorrt-llm": 0.0}
# Fixed cost of one NVLink all-reduce kernel: the median of the all-reduces of at most 64 KiB in the bundled tables
# of the NVLink GPUs (A100, H100, H200, B200, GB200; vLLM, SGLang and TensorRT-LLM; TP 2-8: 378 points, 2.3-14.8 us),
# each measured with its GPUs started together (aiconfigurator-core 0.12.0's comm tables)
COLLECTIVE_LATENCY_S = 4.6e-6
# What a collective waits beyond its kernel in a forward pass: the GPUs of a group reach it at different moments (the
# kernels before it run a little longer or shorter on each), and it starts when the last arrives. Each GPU's arrival
# taken as normal with this standard deviation, the wait is sigma x E[max of N standard normals]: 0.56, 1.03, 1.42
# sigma at 2, 4, 8 GPUs (`collective_wait_s`). Fitted once, on the spread between TP sizes: with the tables' measured
# all-reduces alone, InferenceMAX's vLLM gpt-oss-120b decode at concurrency 4-8 comes out 0.4-0.5 ms a step faster
# at TP8 than at TP4 against the measured (-5.5 / -5.2 / -4.2% at TP8, -3.1 / -1.9 / -0.8% at TP4 on B200 / H100 /
# H200), 3.2-4.4 us a collective at 0.39 sigma a collective from TP4 to TP8; 3 us levels them (+1.2 / +0.3 / +1.1%
# at TP8, +0.8 / +0.8 / +1.9% at TP4) and takes Llama-3.1-70B TP4's ITL on the public vLLM 0.15.1 runs from -7.0 /
# -9.1% to -4.5 / -7.1% (docs/fidelity.md, "The wait at each collective")
COLLECTIVE_SKEW_S = 3e-6
# Fixed cost of one all-to-all dispatch or combine of a MoE layer: DeepEP's low-latency kernels on 8 H200s (NVLink),
# 1-16 tokens per GPU, hidden 7,168, top-8 of 256 experts, 28-71 us each, median 47 us (aiconfigurator-core 0.12.0,
# systems/data/h200_sxm/comm/trtllm/1.3.0rc11 and comm/vllm/0.24.0, moe_a2a_perf.parquet)
ALLTOALL_LATENCY_S = 47e-6
# Hardware-level constants fitted once on the public vLLM 0.15.1 H100 runs (benchmarks/fidelity_vllm.py,
# docs/fidelity.md), never per model or experiment; other GPUs take them until measured.
WEIGHT_STREAM_EFFICIENCY = 0.80   # memory-bound GEMMs stream weights at this share of the achievable bandwidth
ATTENTION_KV_EFFICIENCY = 0.95    # paged-attention KV reads reach this share of the achievable bandwidth
LAYER_STEP_S = 5e-6               # fixed cost per layer per step: small kernels and their launches
# FP8 GEMMs reach less of the FP8 peak than 16-bit GEMMs reach of theirs: each profile's `fp8_gemm_efficiency`
# (the share of the dense FP8 peak measured in its bundled GEMM tables: hardware_profiles/README.md); a GPU without
# one keeps its profile's compute efficiency, and 16-bit GEMMs keep it too.
# sizer's expert weight format -> the MoE tables' expert dtype (aiconfigurator-core's moe_dtype): FP8 by its scales
# (per tensor: ModelOpt checkpoints; per 128 x 128 block: DeepSeek's), MXFP4 as the W4A16 kernels Hopper runs, and
# as W4A8 where the engine feeds the experts MXFP8 activations (Blackwell: format_support.MXFP4_MOE): its own rows
# where an engine's tables measured the shape, else the roofline with none of the W4A16 figures below
MOE_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block",
              "mxfp4": "w4a16_mxfp4", "nvfp4": "nvfp4"}
MXFP8_ACTIVATED_MOE_DTYPE = "w4a8_mxfp4_mxfp8"
# MXFP4 experts run by vLLM's Marlin MoE kernel (W4A16, another kernel than OpenAI's triton_kernels that Hopper runs
# by default: format_support.MXFP4_MOE_MARLIN): its own rows, which aiconfigurator-core measured for another expert
# shape on the H100, H200, B200 and GB200 and for gpt-oss's on the L40S
MARLIN_MOE_DTYPE = "w4a16_mxfp4_marlin"
# A MoE layer's routed experts where no MoE table prices them, from the bundled tables that do
# (benchmarks/moe_efficiencies.py, its "h100-sxm+h200" lines: aiconfigurator-core 0.12.0's moe_perf of H100 SXM and
# H200 in vLLM 0.24.0, SGLang 0.5.14 and TensorRT-LLM 1.3.0rc20, balanced routing; medians over expert shapes and
# splits), by the experts' table format (MOE_DTYPES; None: any other): a layer's fixed cost per step (its 1-token
# latency less its experts' weight read), the share of the roofline's weight streaming its grouped GEMMs reach
# where memory-bound (W4A16 MXFP4's kernels half; the experts a balanced row reads: every one once its tokens' top-k
# choices reach the experts, issue 23), and their share of the format's peak where compute-bound, by
# tokens per expert (tokens x top-k / experts; log-linear between the points, flat beyond them: below the first no
# measured point was compute-bound). Other GPUs take these figures until measured.
# vLLM's Marlin MXFP4 MoE (MARLIN_MOE_DTYPE) has figures of its own, from its own rows (another expert shape than
# any catalog model's on these GPUs: 896 experts of 3,584 x 3,072, top 16), and is left out of the None figures.
# They are Hopper's: Marlin runs the mma.sync tensor-core instructions of Ampere, so its share of a later GPU's peak
# is its own (at 16,384 tokens the H100's and H200's Marlin rows reach 23% of the bf16 peak, the B200's 11%) and of
# an Ampere or Ada GPU's much higher (the L40S's rows on gpt-oss's shape: 44-45%); there the roofline keeps the W4A16
# figures.
MOE_LAYER_S = {"bfloat16": 22.6e-6, "fp8": 25.8e-6, "fp8_block": 34.1e-6, "w4a16_mxfp4": 51.4e-6,
               MARLIN_MOE_DTYPE: 66.2e-6, None: 27.8e-6}
MOE_STREAMING = {"bfloat16": 1.12, "fp8": 1.13, "fp8_block": 1.16, "w4a16_mxfp4": 0.50, MARLIN_MOE_DTYPE: 0.82,
                 None: 1.12}
MOE_GROUPED_EFFICIENCY = {"bfloat16": {256: 0.3669, 1024: 0.4368}, "fp8": {256: 0.3519, 1024: 0.5743},
                          "fp8_block": {256: 0.2449, 1024: 0.3042},
                          "w4a16_mxfp4": {64: 0.2647, 256: 0.2959, 1024: 0.3129},
                          MARLIN_MOE_DTYPE: {64: 0.1974, 256: 0.1962},
                          None: {64: 0.2647, 256: 0.2837, 1024: 0.3581}}
# Expert load imbalance under expert parallelism, by the routing's power-law skew (alpha) and EP size: the busiest
# GPU's routed tokens over the mean, as the cost of power-law routing over balanced routing in aiconfigurator-core's
# moe_perf tables: latency ratio at 1,024-16,384 tokens, experts spread whole over 2, 4 or 8 GPUs, median over the
# H100 SXM and H200 tables of TensorRT-LLM 1.3.0rc20, vLLM 0.24.0 and SGLang 0.5.14 (7,632 points). Beyond 8 GPUs the
# figure of 8. Experts sliced by TP run every expert on every GPU, so their GPUs stay balanced.
EP_LOAD_IMBALANCE = {1.01: {2: 1.156, 4: 1.247, 8: 1.349}, 1.2: {2: 1.21, 4: 1.35, 8: 1.50}}
# The skew each model family routes with, as aiconfigurator-core prices it (ai-dynamo/aiconfigurator
# src/aiconfigurator/sdk/models at 28db91233dafcff9d43efbd11f3c057dc5f5b6fc: deepseek.py and deepseek_v32.py set
# _power_law_alpha 1.01 for its DEEPSEEK/DEEPSEEKV32 families (DeepSeek-V2/V3/R1/V3.2, GLM-5, Kimi-K2.5), moe.py 1.2
# for every other MoE: Mixtral, Qwen2/3-MoE, gpt-oss, MiniMax; Llama-4 and MiMo as HYBRIDMOE)
DEEPSEEK_ROUTING = frozenset({"DeepSeekForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
                              "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "KimiK25ForConditionalGeneration"})
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
                 lora: LoraMemory | None = None, runs: Execution | None = None):
        """`runs`: how the scenario's engine runs `weights_format` on `hardware` (format_support.execution, as the
        scenario resolved it: its MXFP4 MoE kernel and those experts' activations); left out, as vLLM runs it."""
        if not hardware.has_datasheet:
            raise InputError(None, "hardware.gpu", f"{hardware.name} has no datasheet figures to price steps with; "
                             "steps on it are measured (sizer calibrate, then sizer validate)")
        self.model, self.hardware, self.parallel, self.kv, self.offload = model, hardware, parallel, kv, offload
        self.llamacpp = llamacpp.runs_llamacpp(weights_format, hardware)
        self.step_overhead_s = step_overhead_s
        self.lora = lora
        runs = runs or execution(weights_format, hardware)
        compute_fmt = runs.compute_format       # weight-only kernels run 16-bit GEMMs
        self.compute_format = compute_fmt
        # MXFP4 experts' activations as the engine feeds them on this GPU (format_support.MXFP4_MOE), and whether
        # Marlin runs them (vLLM below sm_90, or deployment.moe_backend marlin)
        self.expert_activations = runs.expert_activations
        self.moe_kernel = runs.moe_kernel
        self.weight_format = weights_format     # its name, scales (per tensor, channel, group, block), targets
        measured = hardware.fp8_gemm_efficiency if compute_fmt == "fp8" else None
        self.gemm_compute_efficiency = measured or hardware.compute_efficiency
        self.gemm_compute_efficiency_source = (hardware.fp8_gemm_efficiency_source if measured
                                               else hardware.compute_efficiency_source)
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
        return 0.0 if moe is None else random_routing_share(tokens, moe.top_k, moe.num_experts)

    def _coefficients(self) -> None:
        """Seconds per unit of work, computed once: step_time is called once per simulated step."""
        m, p = self.model, self.parallel
        moe = m.moe
        self._gemm_s_per_token = 2.0 * self.dense_params / self.gemm_flops_per_s
        weight_bytes_per_s = self.bytes_per_s * (1.0 if self.llamacpp else WEIGHT_STREAM_EFFICIENCY)
        self._dense_read_s = self.dense_bytes / weight_bytes_per_s
        self._expert_read_s = self.expert_bytes / weight_bytes_per_s
        self._expert_miss = 1.0 - moe.top_k / moe.num_experts if moe else 1.0
        stage = layers_per_stage(m, p) / m.num_layers
        # MoE layers: fixed cost, FLOPs per routed token at the format's peak (the grouped-GEMM efficiency
        # applies per step), tokens per expert per token; the busiest rank's share of a data-parallel step
        self.ranks, self.context_balance = p.dp, p.context_balance
        self.experts_span_dp = p.experts_span_dp
        self.load_imbalance = load_imbalance(p.ep, routing_alpha(m.architecture)) if p.expert_parallel else 1.0
        table = moe_dtype(self.weight_format.name, self.weight_format.scheme.scales, self.expert_activations,
                          self.moe_kernel)
        if table == MARLIN_MOE_DTYPE and family(self.hardware) != "hopper":
            table = MOE_DTYPES["mxfp4"]     # Marlin's figures are Hopper's: elsewhere the W4A16 ones, as before them
        table = table if table in MOE_LAYER_S else None
        self._moe_fixed_s = m.num_moe_layers * stage * MOE_LAYER_S[table] if moe else 0.0
        self._moe_efficiency = MOE_GROUPED_EFFICIENCY[table]
        self._moe_streaming = MOE_STREAMING[table]
        self._moe_s_per_token = (2.0 * self.expert_active_params * self.load_imbalance
                                 / self.hardware.peak_flops(self.compute_format)) if moe else 0.0
        self._tokens_per_expert = moe.top_k / moe.num_experts if moe else 0.0
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
        self._lm_s_per_row = 2.0 * self.lm_params / self.gemm_flops_per_s
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
        self._comm_s_per_token = (c.tp_allreduce_bytes_per_token + c.pp_send_bytes_per_token) / self.link_bytes_per_s
        # each all-reduce's kernel latency, and the wait for the last GPU it has beyond any kernel, measured or not
        self._allreduce_wait_s = c.allreduces_per_step * collective_wait_s(p.tp)
        self._comm_fixed_s = c.allreduces_per_step * COLLECTIVE_LATENCY_S + self._allreduce_wait_s
        # the MoE layers' all-to-all (experts spread over data-parallel ranks): over NVLink within a scale-up
        # domain, else the scale-out NIC
        self.alltoall_link = alltoall_link(self.hardware, p.ep)
        self._alltoall_s_per_token = c.ep_alltoall_bytes_per_token / self.alltoall_link.bytes_per_s_per_direction
        self._alltoall_fixed_s = (2 * math.ceil(m.num_moe_layers / p.pp)
                                  * (ALLTOALL_LATENCY_S + collective_wait_s(p.dp))     # over the DP group
                                  if c.ep_alltoall_bytes_per_token else 0.0)
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
        if window:           # each query attends to at most `window` keys; a sequence reads at most that many
            decode, decode_ctx, prefill, n, c = split_attention(batch)
            # a decode's new tokens: 1, more when it verifies speculative drafts
            decode_tokens = (batch.new_tokens - prefill * n) / decode if decode else 0.0
            pairs = decode * windowed_pairs(decode_tokens, decode_ctx, window) + prefill * windowed_pairs(n, c, window)
            read = decode * min(window, decode_ctx) + prefill * min(window, c)
            return max(pairs * seconds_per_pair, (read + 2 * batch.new_tokens) * seconds_per_token)
        return max(batch.attention_pairs * seconds_per_pair,
                   (batch.context_tokens + 2 * batch.new_tokens) * seconds_per_token)

    def _parts(self, batch: StepBatch) -> tuple[float, float, float, float, float]:
        """(GEMM compute s, GEMM memory s, attention s, lm_head s, collectives s) for one stage, the MoE
        layers' experts apart (expert_gemm_s)."""
        tokens = batch.new_tokens
        gemm_compute = tokens * self._gemm_s_per_token
        gemm_memory = self._dense_read_s
        attention = batch.num_seqs * self._state_s_per_seq
        for group in self._attention_groups:
            attention += self._group_s(group, batch)
        lm_head = self.lm_head_s(batch.logits_rows)
        comm = tokens * self._comm_s_per_token + self._comm_fixed_s
        if self._alltoall_fixed_s:
            comm += self.alltoall_s(tokens)
        if self.offload:        # host layers: a transfer on top of the GPU's work, counted with the collectives
            comm += self._host_layers_s(tokens)
        return gemm_compute, gemm_memory, attention, lm_head, comm

    def _host_layers_s(self, tokens: int) -> float:
        """The host layers' part of a step of `tokens`: llama_decode runs each ubatch (n_ubatch tokens, the last
        the rest) as its own graph, and ggml's op offload copies the host weights to the GPU for each ubatch of
        OP_OFFLOAD_MIN_BATCH tokens or more; a smaller one runs them on the CPU, which reads them."""
        def one(n: int) -> float:
            return self._host_upload_s if n >= OP_OFFLOAD_MIN_BATCH else self._host_read_s
        full, rest = divmod(max(tokens, 1), self.offload.ubatch_tokens)
        return full * one(self.offload.ubatch_tokens) + (one(rest) if rest else 0.0)

    # The parts one at a time, for the kernel-table model to price what its tables lack (one stage each).
    def attention_group_s(self, index: int, batch: StepBatch) -> float:
        """Attention of the layers of KV group `index` (self.kv.groups)."""
        return self._group_s(self._attention_groups[index], batch)

    def attention_groups_s(self, indices: list[int], batch: StepBatch) -> float:
        """The attention of KV groups `indices` summed in order from 0.0 (`attention_group_s` of each, added one
        by one)."""
        total, groups, group_s = 0.0, self._attention_groups, self._group_s
        for i in indices:
            total += group_s(groups[i], batch)
        return total

    def plain_groups(self, indices: list[int]) -> list[tuple[float, float]] | None:
        """(seconds per pair, seconds per token) of KV groups `indices`, in order, when each is plain (no window,
        no top-k: `_group_s`'s last line); None when any is not."""
        groups = [self._attention_groups[i] for i in indices]
        if any(window or topk for _, _, window, topk, _, _ in groups):
            return None
        return [(per_pair, per_token) for per_pair, per_token, _, _, _, _ in groups]

    def state_s(self, batch: StepBatch) -> float:
        """Mamba-2 / linear-attention state read and written once per sequence."""
        return batch.num_seqs * self._state_s_per_seq

    def gemm_s(self, tokens: int, n: int, k: int) -> float:
        """One dense (n, k) GEMM of `tokens` rows: compute or weight streaming, whichever is longer."""
        bytes_per_value = self.dense_bytes / self.dense_params if self.dense_params else 2.0
        return max(tokens * 2.0 * n * k / self.gemm_flops_per_s,
                   n * k * bytes_per_value / (self.bytes_per_s * WEIGHT_STREAM_EFFICIENCY))

    def expert_gemm_s(self, tokens: int) -> float:
        """The MoE layers of one stage for `tokens` routed tokens (module docstring)."""
        if not self._expert_read_s:
            return 0.0
        compute = tokens * self._moe_s_per_token / grouped_gemm_efficiency(tokens * self._tokens_per_expert,
                                                                           self._moe_efficiency)
        memory = self._expert_read_s * (1.0 - self._expert_miss ** tokens) / self._moe_streaming
        return (compute if compute > memory else memory) + self._moe_fixed_s

    def rank_and_expert_tokens(self, batch: StepBatch) -> tuple[StepBatch, int]:
        """(the busiest data-parallel rank's share of the step, the tokens its MoE layers route: every rank's
        when the experts span the ranks)."""
        rank = rank_batch(batch, self.ranks, self.context_balance)
        return rank, batch.new_tokens if self.experts_span_dp else rank.new_tokens

    def lm_head_s(self, rows: int) -> float:
        """The lm_head over `rows` logits rows (StepBatch.logits_rows): their FLOPs or its weights' read."""
        return max(rows * self._lm_s_per_row, self._lm_read_s)

    def alltoall_s(self, tokens: int) -> float:
        """The MoE layers' dispatch and combine of one stage for a rank's `tokens` (0 unless experts span ranks)."""
        return tokens * self._alltoall_s_per_token + self._alltoall_fixed_s

    def transfer_s(self, tokens: int, allreduce: bool = True) -> float:
        """Collectives of one stage: the pipeline send and the expert all-to-all, the TP all-reduces if asked; without
        them (kernel tables time their kernels) still each all-reduce's wait for the last GPU of its group."""
        c = self.comm
        nbytes = c.pp_send_bytes_per_token + (c.tp_allreduce_bytes_per_token if allreduce else 0.0)
        fixed = self._comm_fixed_s if allreduce else self._allreduce_wait_s    # the all-reduces' fixed costs alone
        return tokens * nbytes / self.link_bytes_per_s + fixed + self.alltoall_s(tokens)

    @property
    def layers_s(self) -> float:
        return self._layers_s

    def cost(self, batch: StepBatch) -> StepCost:
        if batch.new_tokens == 0:
            return StepCost(0, 0, 0, 0, 0, False)
        batch, expert_tokens = self.rank_and_expert_tokens(batch)
        gemm_compute, gemm_memory, attention, lm_head, comm = self._parts(batch)
        stages = self.parallel.pp
        return StepCost((max(gemm_compute, gemm_memory) + self.expert_gemm_s(expert_tokens)) * stages,
                        attention * stages, lm_head, comm * stages, self.step_overhead_s,
                        gemm_compute >= gemm_memory, self._layers_s * stages, self.lora_s(batch) * stages)

    def step_time(self, batch: StepBatch) -> float:
        if batch.new_tokens == 0:
            return 0.0
        if self.ranks > 1:
            batch, expert_tokens = self.rank_and_expert_tokens(batch)
        else:
            expert_tokens = batch.new_tokens
        gemm_compute, gemm_memory, attention, lm_head, comm = self._parts(batch)
        lora = self.lora_s(batch) if batch.lora_tokens else 0.0
        experts = self.expert_gemm_s(expert_tokens) if self._expert_read_s else 0.0
        return ((gemm_compute if gemm_compute > gemm_memory else gemm_memory) + experts + attention + comm
                + self._layers_s + lora) * self.parallel.pp + lm_head + self.step_overhead_s


def moe_dtype(weight_format: str, scales: str, activations: str = "", kernel: str = "") -> str | None:
    """The MoE tables' expert dtype of experts stored in `weight_format` with `scales` (Quantization.scales), their
    GEMMs fed `activations` (Execution.expert_activations: "mxfp8", "bf16", or "" where the format says) by `kernel`
    (Execution.moe_kernel: "marlin", or "" for the engine's own choice)."""
    if weight_format == "mxfp4" and activations == "mxfp8":
        return MXFP8_ACTIVATED_MOE_DTYPE
    if weight_format == "mxfp4" and kernel == "marlin":
        return MARLIN_MOE_DTYPE
    return MOE_DTYPES.get("fp8_block" if weight_format == "fp8" and scales == "block" else weight_format)


def random_routing_share(tokens: float, top_k: int, experts: int) -> float:
    """Expected share of the experts that at least one of `tokens` routes to when each token picks its top-k at
    random, as real traffic spreads: 1 - (1 - k / E)^tokens."""
    return 1.0 - (1.0 - top_k / experts) ** tokens


def balanced_routing_share(tokens: float, top_k: int, experts: int) -> float:
    """The share of the experts the MoE tables' balanced rows read: the tokens' top-k choices spread evenly, so every
    expert once there are as many choices as experts (aiconfigurator-core's `balanced` distribution)."""
    return min(1.0, tokens * top_k / experts)


@cache
def expected_max_of_normals(n: int) -> float:
    """E[max of n independent standard normals], the integral of x n phi(x) Phi(x)^(n - 1) over x (midpoint rule,
    steps of 0.01 on [-8, 8]): 1 / sqrt(pi) at 2, 3 / (2 sqrt(pi)) at 3; 0 for one."""
    if n <= 1:
        return 0.0
    step, total = 1e-2, 0.0
    for i in range(-800, 800):
        x = (i + 0.5) * step
        total += x * math.exp(-x * x / 2) * (0.5 * (1.0 + math.erf(x / math.sqrt(2)))) ** (n - 1)
    return n * total * step / math.sqrt(2 * math.pi)


def collective_wait_s(ranks: int) -> float:
    """What a collective over `ranks` GPUs waits for the last of them beyond its measured kernel (COLLECTIVE_SKEW_S)."""
    return COLLECTIVE_SKEW_S * expected_max_of_normals(ranks)


def routing_alpha(architecture: str) -> float:
    """The power-law skew of a model's expert routing (EP_LOAD_IMBALANCE's key): DeepSeek's family 1.01, others 1.2."""
    return 1.01 if architecture in DEEPSEEK_ROUTING else 1.2


def skewed_routing(alpha: float) -> str:
    """The MoE tables' name for routing by a power law of skew `alpha` (aiconfigurator-core's distribution)."""
    return f"power_law_{alpha}"


def load_imbalance(ep: int, alpha: float) -> float:
    """EP_LOAD_IMBALANCE[alpha] for `ep` GPUs: linear in log2(ep) between its sizes, 1.0 for one GPU, the largest
    size's beyond it."""
    if ep <= 1:
        return 1.0
    points = [(1, 1.0), *sorted(EP_LOAD_IMBALANCE[alpha].items())]
    for (e0, f0), (e1, f1) in pairwise(points):
        if ep <= e1:
            return f0 + (f1 - f0) * math.log2(ep / e0) / math.log2(e1 / e0)
    return points[-1][1]


def grouped_gemm_efficiency(tokens_per_expert: float, shares: dict[float, float]) -> float:
    """A MOE_GROUPED_EFFICIENCY curve at `tokens_per_expert`: log-linear between its points, flat beyond them."""
    points = list(shares.items())
    if tokens_per_expert <= points[0][0]:
        return points[0][1]
    for (t0, e0), (t1, e1) in pairwise(points):
        if tokens_per_expert <= t1:
            return e0 + (e1 - e0) * math.log(tokens_per_expert / t0) / math.log(t1 / t0)
    return points[-1][1]


def prefill_time_s(model: RooflineStepTimeModel, prompt_tokens: int, chunk_tokens: int | None) -> float:
    """A prompt alone, processed in chunks of at most `chunk_tokens` (one step each)."""
    total, done = 0.0, 0
    chunk = chunk_tokens or prompt_tokens
    while done < prompt_tokens:
        n = min(chunk, prompt_tokens - done)
        total += model.step_time(StepBatch.from_seqs([(n, done)], prefill=[True]))
        done += n
    return total


def decode_batch(batch_size: int, context_tokens: int, drafts: int = 0) -> StepBatch:
    """`batch_size` sequences each decoding one token on `context_tokens` of context, and verifying `drafts`
    speculative tokens beside it (1 + drafts new tokens a sequence, as the simulator's scheduler builds it)."""
    return StepBatch(num_seqs=batch_size, new_tokens=batch_size * (1 + drafts),
                     context_tokens=batch_size * context_tokens,
                     attention_pairs=batch_size * attention_pairs(1 + drafts, context_tokens),
                     draft_tokens=batch_size * drafts)


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
