"""MoE as deployed at scale: attention data parallelism with the experts spread over the ranks (DEP), its all-to-all,
expert load imbalance, the MoE tables' expert formats and the roofline's per-layer MoE cost (issue 24)."""

from __future__ import annotations

import copy
import math

import pytest

from simulator.step_batch import StepBatch
from sizer.analytic.parallel import ParallelConfig, comm_per_step, rank_batch
from sizer.errors import InputError
from sizer.inputs.hardware import alltoall_link, load_hardware
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.timing.roofline import (
    ALLTOALL_LATENCY_S,
    MOE_GROUPED_EFFICIENCY,
    MOE_LAYER_S,
    WEIGHT_STREAM_EFFICIENCY,
    grouped_gemm_efficiency,
    load_imbalance,
    moe_dtype,
    routing_alpha,
)
from sizer.timing.step_model import roofline_for, step_model_for

QWEN3 = {"name": "qwen3-dep", "model": "qwen3-235b-a22b", "hardware": {"gpu": "h200"},
         "deployment": {"engine": "tensorrt-llm", "tensor_parallel_size": 8, "quantization": "fp8",
                        "kv_cache_dtype": "fp8", "max_model_len": 4096},
         "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                      "prompt_tokens": {"distribution": "fixed", "value": 128},
                      "output_tokens": {"distribution": "fixed", "value": 128}, "num_requests": 10}}


def resolved(attention_dp: bool, base: dict = QWEN3):
    data = copy.deepcopy(base)
    data["deployment"]["enable_attention_dp"] = attention_dp
    return resolve(scenario_from_dict(data, None))


def test_the_busiest_rank_takes_its_share_of_decodes_and_prefill_chunks():
    # 16 decodes on 100 cached tokens and 2 prefill chunks of 50 new tokens over 8 ranks: the busiest rank runs
    # ceil(16 / 8) = 2 decodes (2 tokens, 200 context, 2 x 101 pairs) and ceil(2 / 8) = 1 chunk (50 tokens,
    # 50 x 51 / 2 = 1,275 pairs): 3 sequences, 52 tokens, 200 context, 1,477 pairs
    batch = StepBatch.from_seqs([(1, 100)] * 16 + [(50, 0)] * 2)
    assert rank_batch(batch, 8) == StepBatch(3, 52, 200, 1477, 1, 50)
    assert rank_batch(batch, 1) is batch


def test_ranks_that_schedule_their_own_prompts_wait_for_the_busiest():
    # TensorRT-LLM's baseline attention-DP scheduling balances a step's tokens at 54.11% (mean over most per rank,
    # its ADP Balance tech blog): the busiest of 8 ranks takes ceil(n / (8 x 0.5411)) of n prompts, at most all
    assert rank_batch(StepBatch.from_seqs([(2048, 0)] * 8, prefill=[True] * 8), 8, 0.5411).prefill_seqs == 2
    assert rank_batch(StepBatch.from_seqs([(2048, 0)] * 32, prefill=[True] * 32), 8, 0.5411).prefill_seqs == 8
    assert rank_batch(StepBatch.from_seqs([(2048, 0)] * 32, prefill=[True] * 32), 8).prefill_seqs == 4
    assert rank_batch(StepBatch.from_seqs([(2048, 0)]), 8, 0.5411).prefill_seqs == 1
    # decodes stay spread as evenly as they go: 16 over 8 ranks, 2 on the busiest
    assert rank_batch(StepBatch.from_seqs([(1, 100)] * 16), 8, 0.5411).num_seqs == 2
    # the figure is TensorRT-LLM's; SGLang's DP attention is assumed balanced (no measurement)
    assert resolved(True).parallel.context_balance == 0.5411
    sglang = copy.deepcopy(QWEN3)
    sglang["deployment"]["engine"] = "sglang"
    assert resolved(True, sglang).parallel.context_balance == 1.0 and resolved(False).parallel.context_balance == 1.0


def test_attention_dp_holds_a_full_attention_replica_and_an_eighth_of_the_experts():
    tp8, dep8 = resolved(False), resolved(True)
    assert (dep8.parallel.tp, dep8.parallel.dp, dep8.parallel.ep) == (1, 8, 8)
    # KV per token per GPU: 94 layers x (K, V) x 128 head dim x 1 byte (fp8) x KV heads per GPU: at TP 8 one of
    # Qwen3-235B's 4 KV heads (replicated twice), data-parallel all 4
    assert tp8.kv.bytes_per_token_per_gpu == 94 * 2 * 128 * 1
    assert dep8.kv.bytes_per_token_per_gpu == 94 * 2 * 128 * 4
    # weights per GPU: the experts' eighth is the same either way; attention, the embedding and the lm_head are
    # whole under DEP, so the difference is 7/8 of the attention matrices (q 4096 x 8192, k and v 4096 x 512,
    # o 8192 x 4096 per layer, fp8: 1 byte each) and of the bf16 embedding and lm_head (151,936 x 4,096 x 2 bytes
    # each); norms and routers are whole either way
    attention = 94 * (4096 * 8192 + 2 * 4096 * 512 + 8192 * 4096)
    vocab = 2 * 151936 * 4096 * 2
    assert dep8.weights.per_gpu_bytes - tp8.weights.per_gpu_bytes == pytest.approx(7 / 8 * (attention + vocab),
                                                                                   rel=0.01)
    # the 8 ranks run as one engine of their combined KV pool and limits
    assert dep8.replica.num_blocks == 8 * dep8.memory.kv_blocks
    assert dep8.scheduler.max_num_seqs == 8 * dep8.engine.max_num_seqs
    assert dep8.scheduler.max_num_batched_tokens == 8 * dep8.engine.max_num_batched_tokens


def test_attention_dp_of_a_dense_model_is_refused_naming_the_field():
    dense = copy.deepcopy(QWEN3)
    dense["model"] = "llama-3.1-8b"
    with pytest.raises(InputError) as err:
        resolved(True, dense)
    assert err.value.field == "deployment.enable_attention_dp"


def test_all_to_all_bytes_latency_and_link():
    m = load_model("qwen3-235b-a22b")
    # all-gather and reduce-scatter of the hidden state (bf16) across 8 ranks, per token of a rank:
    # 2 x 94 MoE layers x (8 - 1) x 4,096 x 2 bytes
    assert comm_per_step(m, ParallelConfig(1, 1, 8, True)).ep_alltoall_bytes_per_token == 2 * 94 * 7 * 4096 * 2
    # TP 8 with EP: every GPU already holds every token; the TP all-reduce combines them, no all-to-all
    assert comm_per_step(m, ParallelConfig(8, 1, 1, True)).ep_alltoall_bytes_per_token == 0
    # TP 2 inside 4 DP ranks, EP 8: the gather runs over the DP group (vLLM's get_dp_group().all_gatherv); a rank's
    # tokens are on both its GPUs already, so each GPU receives the other 3 ranks' shares, not 7 (the EP size less 1)
    assert comm_per_step(m, ParallelConfig(2, 1, 4, True)).ep_alltoall_bytes_per_token == 2 * 94 * 3 * 4096 * 2
    roofline = roofline_for(resolved(True))
    # one step of 100 tokens a rank: 100 x bytes / NVLink 4's 450 GB/s + 2 x 94 x (47 us + the wait for the last of 8
    # GPUs: 3 us x 1.4236, the expected largest of 8 standard normals, Harter's 1961 tables)
    assert roofline.alltoall_s(100) == pytest.approx(100 * 2 * 94 * 7 * 4096 * 2 / 450e9
                                                     + 2 * 94 * (ALLTOALL_LATENCY_S + 3e-6 * 1.4236), rel=1e-5)
    h200, gb200 = load_hardware("h200"), load_hardware("gb200")
    assert alltoall_link(h200, 8).bytes_per_s_per_direction == 450e9          # one HGX board: NVLink
    assert alltoall_link(h200, 16).bytes_per_s_per_direction == 50e9          # two boards: a 400 Gb/s NIC each
    assert alltoall_link(gb200, 16).bytes_per_s_per_direction == gb200.interconnect_bytes_per_s_per_direction


def test_load_imbalance_and_grouped_gemm_efficiency_interpolate_their_tables():
    assert load_imbalance(1, 1.01) == load_imbalance(1, 1.2) == 1.0
    assert load_imbalance(8, 1.01) == load_imbalance(64, 1.01) == 1.349
    # EP 3: between EP 2 (1.156) and EP 4 (1.247), linear in log2: 1.156 + 0.091 x log2(1.5)
    assert load_imbalance(3, 1.01) == pytest.approx(1.156 + 0.091 * math.log2(1.5))
    # aiconfigurator-core's skew per family (sdk/models/deepseek.py 1.01, moe.py 1.2): DeepSeek-V3 routes with 1.01,
    # Qwen3-MoE and Llama-4 with 1.2, whose busiest of 8 GPUs sees 1.50x the mean
    assert routing_alpha("DeepseekV3ForCausalLM") == 1.01 and routing_alpha("GlmMoeDsaForCausalLM") == 1.01
    assert routing_alpha("Qwen3MoeForCausalLM") == routing_alpha("Llama4ForConditionalGeneration") == 1.2
    assert load_imbalance(8, 1.2) == 1.50
    # 512 tokens per expert, FP8 experts: between 256 (35.19%) and 1,024 (57.43%), linear in log: halfway
    fp8 = MOE_GROUPED_EFFICIENCY["fp8"]
    assert grouped_gemm_efficiency(512, fp8) == pytest.approx((0.3519 + 0.5743) / 2)
    # below 256 no measured FP8 point was compute-bound: flat; above 1,024 flat
    assert grouped_gemm_efficiency(0.01, fp8) == 0.3519 and grouped_gemm_efficiency(1e6, fp8) == 0.5743


def test_roofline_moe_layer_is_a_fixed_cost_plus_the_experts_it_touches():
    r = resolved(False)
    roofline = roofline_for(r)
    m = r.model
    # one token at TP 8 (experts sliced, no imbalance) touches top-k 8 of 128 experts: their eighth of
    # 94 x 128 x 3 x 4,096 x 1,536 fp8 bytes, streamed at 4.8 TB/s x 0.85 x 0.80 x 1.13 (per-tensor FP8 experts'
    # measured streaming share), plus 94 x 25.8 us; its FLOPs (2 x 3 x 4,096 x 1,536 x 8 x 94 / 8 per GPU) at
    # 35.19% of the FP8 peak are far shorter than that read
    read = 94 * 128 * 3 * 4096 * 1536 / 8 * (8 / 128) / (4.8e12 * 0.85 * WEIGHT_STREAM_EFFICIENCY * 1.13)
    flops = 2 * 3 * 4096 * 1536 * 8 * 94 / 8 / (1979e12 * 0.3519)
    assert m.num_moe_layers == 94 and MOE_LAYER_S["fp8"] == 25.8e-6 and flops < read
    assert roofline.expert_gemm_s(1) == pytest.approx(read + 94 * 25.8e-6, rel=1e-3)
    # 4,096 tokens: 256 tokens per expert, compute-bound at 35.19% of the peak (every expert touched)
    flops = 2 * 3 * 4096 * 1536 * 8 * 94 / 8 * 4096 / (1979e12 * 0.3519)
    assert roofline.expert_gemm_s(4096) == pytest.approx(flops + 94 * 25.8e-6, rel=1e-3)


def test_dep_prices_the_moe_table_at_every_ranks_tokens_times_the_imbalance():
    step = step_model_for(resolved(True))
    layers, curve = step._experts
    # TensorRT-LLM 1.3.0rc20's FP8 MoE of Qwen3-235B's shape (4,096 x 1,536, top-8 of 128) over EP 8 on the H200:
    # 134.3 us for 1,024 tokens (aiconfigurator-core 0.12.0 moe_perf, balanced routing)
    assert (layers, curve(1024)) == (94, pytest.approx(134.3e-6))
    # decode steps of 1,024 and 1,017 sequences: the busiest rank runs ceil(n / 8) = 128 of either through
    # attention, the dense layers and the all-to-all; the experts take all n tokens at the EP 8 imbalance of
    # Qwen3-MoE's routing (alpha 1.2: 1.50 x n on the busiest GPU): the two steps differ by the experts alone
    assert step.load_imbalance == 1.50
    def rest(n: int) -> float:
        return step.step_time(StepBatch.from_seqs([(1, 1000)] * n)) - layers * curve(1.50 * n)
    assert rest(1024) == pytest.approx(rest(1017), rel=1e-9)
    assert rest(1024) != pytest.approx(rest(1016), rel=1e-3)        # 127 sequences a rank


@pytest.mark.parametrize(("fmt", "scales", "table"), [("bf16", "tensor", "bfloat16"), ("fp8", "tensor", "fp8"),
                                                      ("fp8", "block", "fp8_block"), ("mxfp4", "group", "w4a16_mxfp4"),
                                                      ("nvfp4", "group", "nvfp4"), ("awq", "group", None)])
def test_moe_tables_are_looked_up_in_the_experts_format(fmt, scales, table):
    assert moe_dtype(fmt, scales) == table


def test_tensorrt_llms_fused_moe_workspace_is_held_back_from_the_kv_cache():
    # TensorRT-LLM sizes its KV cache from what a profiling forward pass at max_num_tokens leaves
    # (KvCacheCreator); under attention DP every rank profiles max_num_tokens of its own and the MoE layer
    # gathers them, so the CUTLASS fused MoE's workspace is sized for 8 x 8,192 = 65,536 rows, each in top-k
    # copies. Qwen3-235B-A22B (hidden 4,096, expert width 1,536, top-8): 524,288 expanded rows, each a GEMM-input
    # buffer of max(4,096 x 2 bytes (fc2's bf16 output), 1,536 x 1 byte (fc1's FP8 result)) = 8,192 bytes and a
    # GEMM-output buffer of max(2 x 1,536 x 2 bytes (fc1's gated bf16 output), 8,192) = 8,192 bytes:
    # 524,288 x 16,384 = 2^33 bytes = 8 GiB
    from sizer.analytic.memory import GiB, activation_peak_bytes, fused_moe_workspace_bytes, gathered_moe_bytes
    qwen3, maverick = load_model("qwen3-235b-a22b"), load_model("llama-4-maverick-17b-128e")
    dep8 = ParallelConfig(1, 1, 8, True)
    assert fused_moe_workspace_bytes(qwen3, dep8, 8192, 1) == 8 * GiB
    # experts TP-sliced over 8 GPUs, no attention DP: 8,192 rows x 8 copies, width 1,536 / 8 = 192: both buffers
    # 8,192 bytes (the hidden's bf16), 65,536 x 16,384 = 1 GiB
    assert fused_moe_workspace_bytes(qwen3, ParallelConfig(8), 8192, 1) == 1 * GiB
    # Llama-4-Maverick (hidden 5,120, expert width 8,192, top-1): 65,536 rows x (max(10,240, 8,192) +
    # max(2 x 8,192 x 2, 10,240)) = 65,536 x 43,008 bytes = 2.625 GiB
    assert fused_moe_workspace_bytes(maverick, dep8, 8192, 1) == 2.625 * GiB
    assert fused_moe_workspace_bytes(load_model("llama-3.1-8b"), dep8, 8192, 1) == 0.0
    # the plan's activation peak carries it for TensorRT-LLM (with the gathered rows, the next test), and the KV
    # cache is that much smaller for it
    r = resolved(True)
    peak = activation_peak_bytes(r.model, r.parallel, r.engine.max_num_batched_tokens, r.engine.max_num_seqs)
    n = r.engine.max_num_batched_tokens
    assert r.memory.activation_bytes - peak == fused_moe_workspace_bytes(qwen3, dep8, n, 1) + \
        gathered_moe_bytes(qwen3, dep8, n, 1)
    data = copy.deepcopy(QWEN3)
    data["deployment"]["engine"] = "vllm"
    v = resolved(True, data)       # vLLM's profiling pass is activation_peak_bytes' estimate alone
    assert v.memory.activation_bytes == activation_peak_bytes(v.model, v.parallel, v.engine.max_num_batched_tokens,
                                                              v.engine.max_num_seqs)


def test_tensorrt_llms_fused_moe_holds_every_ranks_gathered_rows_beside_its_workspace():
    # Under attention DP TensorRT-LLM's CutlassFusedMoE allgathers every rank's rows before the fused-MoE op (the
    # FP8 per-tensor checkpoint's hidden values quantized first, 1 byte each, with each top-k choice's int32 expert
    # id and fp32 scale) and the op writes a bf16 output row for each gathered row, reduce-scattered only after it:
    # both live beside the workspace at the profiling pass's peak. Qwen3-235B-A22B DEP8 at 8,192 tokens a rank:
    # 65,536 rows x (4,096 x 1 + 4,096 x 2 + 8 x (4 + 4)) = 65,536 x 12,352 = 809,500,672 bytes (0.754 GiB)
    from sizer.analytic.memory import gathered_moe_bytes
    qwen3, maverick = load_model("qwen3-235b-a22b"), load_model("llama-4-maverick-17b-128e")
    dep8 = ParallelConfig(1, 1, 8, True)
    assert gathered_moe_bytes(qwen3, dep8, 8192, 1) == 809_500_672
    # Llama-4-Maverick (hidden 5,120, top-1): 65,536 x (5,120 x 3 + 8) = 1,007,157,248 bytes
    assert gathered_moe_bytes(maverick, dep8, 8192, 1) == 1_007_157_248
    # experts TP-sliced, no attention DP: each rank's own rows only, already activation_peak_bytes' hidden terms
    assert gathered_moe_bytes(qwen3, ParallelConfig(8), 8192, 1) == 0.0
    assert gathered_moe_bytes(load_model("llama-3.1-8b"), dep8, 8192, 1) == 0.0
    # the KV cache does without them (0.95 of what the profiling peak leaves), at the profiling pass's 8,192 tokens a
    # rank and in the pool of the 2,048 decode graph captured before it. Qwen3 500/2000 on the H200 as the saturation
    # replay runs it (max_num_seqs 2,048 a rank, the page's CUDA-graph sizes): 96,256 B of KV a token (94 layers x 4
    # KV heads x 128 x 2 x 1 B) in 32-token blocks, 79 blocks a 2,500-token sequence. Without the gathered rows a
    # rank's cache held 29,808 blocks, 377 sequences (the row's 375 a rank in one wave); with them 0.95 x
    # (0.754 + 0.188) GiB less, 29,496 blocks: 373, so the 3,000 requests run in two waves, as the page's time says
    data = copy.deepcopy(QWEN3)
    data["deployment"].update(max_model_len=2500, gpu_memory_utilization=0.95, max_num_seqs=2048,
                              cuda_graph_batch_sizes=[1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096])
    memory = resolved(True, data).memory
    block_bytes = 94 * 4 * 128 * 2 * 32
    held_back = 0.95 * (gathered_moe_bytes(qwen3, dep8, 8192, 1) + gathered_moe_bytes(qwen3, dep8, 2048, 1))
    assert int((memory.kv_cache_bytes + held_back) // block_bytes) == 29_808
    assert memory.kv_blocks == 29_496 and memory.kv_blocks // 79 == 373


def test_tensorrt_llms_kv_fraction_is_a_share_of_what_the_profiling_pass_leaves():
    # TensorRT-LLM's KvCacheCreator: KV = kv_cache_free_gpu_mem_fraction x (total - the profiling pass's peak:
    # weights, activations with the fused-MoE workspace, CUDA context and NCCL buffers); vLLM's
    # gpu_memory_utilization is the share of the whole GPU all of them may use. Qwen3-235B-A22B FP8 DEP8 on an
    # H100 SXM at 0.95 (the saturation rows' fraction): the same weights, activations and context, and
    # TensorRT-LLM's cache larger by 0.05 x their sum
    from sizer.analytic.memory import GiB
    data = copy.deepcopy(QWEN3)
    data["hardware"]["gpu"] = "h100-sxm"
    data["deployment"]["gpu_memory_utilization"] = 0.95
    trt = resolved(True, data).memory
    peak = trt.weights_bytes + trt.activation_bytes + trt.non_torch_bytes
    assert trt.non_torch_bytes == 1.5 * GiB     # CUDA context 1 GiB + NCCL buffers 0.5 GiB (DEP ranks gather tokens)
    assert trt.kv_cache_bytes == pytest.approx(0.95 * (trt.gpu_memory_bytes - peak))
    data["deployment"]["engine"] = "vllm"
    vllm = resolved(True, data).memory
    assert vllm.kv_cache_bytes == pytest.approx(0.95 * vllm.gpu_memory_bytes - vllm.weights_bytes
                                                - vllm.activation_bytes - vllm.non_torch_bytes)
    assert trt.usable_bytes > vllm.usable_bytes


def test_tensorrt_llms_profiling_kv_cache_holds_every_ranks_dummy_prompts():
    # KvCacheCreator's dummy prompts (_create_dummy_context_requests): max_num_tokens 8,192 in prompts of
    # max_seq_len - 1 = 2,499 tokens (Qwen3 500/2000's 2,500): three of 2,499 and one of 695, each with 2 more tokens
    # (one generated, one for the overlap scheduler) in 32-token blocks: 3 x ceil(2,501 / 32) + ceil(697 / 32) =
    # 3 x 79 + 22 = 259 blocks; under attention DP repeated for each of 8 ranks and summed: 2,072
    from sizer.analytic.memory import estimation_kv_blocks
    assert estimation_kv_blocks(8192, 2500, 32, 8) == 2072
    assert estimation_kv_blocks(8192, 2500, 32, 1) == 259
    # max_model_len 1 (accepted by the scenario): prompts of one token, not of max_seq_len - 1 = 0 (a division by
    # zero before): 8,192 prompts of 1 + 2 tokens, one 32-token block each
    assert estimation_kv_blocks(8192, 1, 32, 1) == 8192
    # a budget of a whole 22,000-token sequence: dummies of 21,999 tokens (max_seq_len - 1) and 1,
    # ceil(22,001 / 32) + ceil(3 / 32) = 688 + 1 blocks
    assert estimation_kv_blocks(22_000, 22_000, 32, 1) == 689


def test_tensorrt_llms_cuda_graph_pool_is_held_back_when_its_profiling_captured_it():
    # PyTorchModelEngine.warmup captures the decode graphs, largest first, into one shared pool before
    # KvCacheCreator measures its peak; a live graph keeps its pool, so the KV cache does without it. The pool is
    # the largest graph's forward: Qwen3-235B-A22B DEP8 at 2,048 sequences a rank is activation_peak_bytes at
    # 2,048 tokens plus the fused-MoE workspace for 8 x 2,048 = 16,384 gathered rows (a quarter of 8,192 tokens'
    # 8 GiB above: 2 GiB) and those rows themselves (16,384 x 12,352 bytes, above)
    from sizer.analytic.memory import GiB, activation_peak_bytes, trtllm_graph_pool_bytes
    qwen3, dep8 = load_model("qwen3-235b-a22b"), ParallelConfig(1, 1, 8, True)
    assert trtllm_graph_pool_bytes(qwen3, dep8, 2048, 8192, 2500, 32, "fp8") == \
        activation_peak_bytes(qwen3, dep8, 2048, 2048) + 2 * GiB + 16_384 * 12_352
    # a 4,096 graph needs 4,096 free blocks of the profiling cache's 2,072: warmup stops there and captures none
    # before the peak is measured (the final executor captures them from what the KV cache leaves)
    assert trtllm_graph_pool_bytes(qwen3, dep8, 4096, 8192, 2500, 32, "fp8") == 0
    # resolved: a TensorRT-LLM deployment that states its graphs (max_batch_size 2,048) holds the pool beside the
    # CUDA context and NCCL buffers; vLLM's profiling is not TensorRT-LLM's, and holds none
    data = copy.deepcopy(QWEN3)
    data["deployment"].update(max_model_len=2500, max_num_seqs=2048, cuda_graph_batch_sizes=[1, 1024, 2048, 4096])
    trt = resolved(True, data).memory
    assert trt.non_torch_bytes == 1.5 * GiB + trtllm_graph_pool_bytes(qwen3, dep8, 2048, 8192, 2500, 32, "fp8")
    from sizer.sizing.plan import _memory_assumptions
    pool = trt.non_torch_bytes - 1.5 * GiB
    assert any(f"CUDA-graph pool its warmup captured before it, {pool / GiB:.2f} GiB" in n
               for n in _memory_assumptions(resolved(True, data)))
    data["deployment"]["engine"] = "vllm"
    assert resolved(True, data).memory.non_torch_bytes == 1.5 * GiB


def test_the_plan_names_tensorrt_llms_kv_share_and_its_moe_workspace():
    # the 8 GiB derived above (8 ranks x 8,192 tokens x top-8 x 16 KiB) and the 0.754 GiB of gathered rows,
    # 8.75 GiB, printed in the plan's memory assumptions
    from sizer.sizing.plan import _memory_assumptions
    notes = _memory_assumptions(resolved(True))
    assert any("kv_cache_free_gpu_mem_fraction" in n and "fused-MoE workspace and gathered rows, 8.75 GiB for 8,192 "
               "tokens x 8 attention-DP ranks" in n for n in notes), notes
    data = copy.deepcopy(QWEN3)
    data["deployment"]["engine"] = "vllm"
    assert not any("kv_cache_free_gpu_mem_fraction" in n for n in _memory_assumptions(resolved(True, data)))


def test_tensorrt_llm_caches_every_token_of_llama4s_chunked_layers():
    # Llama-4-Maverick: 48 layers, 8 KV heads x 128, FP8 KV; 36 RoPE layers attend within 8,192-token chunks,
    # 12 NoPE layers attend to everything. Under attention DP a GPU holds every KV head of its own sequences:
    # 2 x 8 x 128 x 1 B = 2,048 B per layer per token. TensorRT-LLM's KV cache keeps every token of every layer
    # (one attention window over all layers, presets' KEEPS_CHUNKED_KV): a 22,000-token sequence in 32-token
    # blocks (688 of them, 22,016 tokens) takes 48 x 2,048 x 22,016 B; vLLM's frees what leaves the chunk: the
    # chunked layers keep 8,192 tokens (256 blocks) plus the block they straddle, 257 x 32 = 8,224 tokens.
    data = copy.deepcopy(QWEN3)
    data["model"] = "llama-4-maverick-17b-128e"
    data["deployment"].update(max_model_len=22_000, max_num_batched_tokens=22_000)   # a whole prompt in a step
    trt = resolved(True, data)
    assert trt.kv.sequence_bytes(22_000, 32) == 48 * 2048 * 22_016
    assert trt.replica.kv_windows == ()                       # no windowed blocks in its pool
    data["deployment"]["engine"] = "vllm"
    vllm = resolved(True, data)
    assert vllm.kv.sequence_bytes(22_000, 32) == 12 * 2048 * 22_016 + 36 * 2048 * 8_224
    # the attention itself stays chunked under both: the roofline's and the tables' span is the chunk
    assert {g.window_tokens for g in trt.kv.groups} == {g.window_tokens for g in vllm.kv.groups} == {None, 8192}
