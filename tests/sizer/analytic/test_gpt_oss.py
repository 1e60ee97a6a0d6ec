"""gpt-oss read right (issue 24 item 1): its sliding-window layers keep at most their window in KV memory, KV
capacity and attention time; its attention sinks are read; the MXFP4 MoE kernel each engine runs on each GPU is
named with its source. Config: tests/data/models/gpt-oss-120b (aiconfigurator-core 0.12.0 copy, facts.yaml)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.step_batch import StepBatch, windowed_pairs
from sizer.analytic.format_support import execution
from sizer.analytic.formats import weight_format
from sizer.analytic.memory import kv_layout, weight_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import parameter_count
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware
from sizer.inputs.layers import SLIDING, Attention
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.timing.kernel_tables import KERNELS_DIR
from sizer.timing.roofline import (
    ATTENTION_KV_EFFICIENCY,
    RooflineStepTimeModel,
    decode_batch,
)
from sizer.timing.step_model import step_model_for, step_sources

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
GPT_OSS = MODELS / "gpt-oss-120b"
# per token per group of 18 layers: 2 (K, V) x 18 layers x 8 KV heads x 64 head dim x 2 bytes (bf16)
GROUP_BYTES = 2 * 18 * 8 * 64 * 2


def _gpt_oss(gpu: str = "h200", engine: str = "vllm", tp: int = 1, max_model_len: int = 131072, prompt: int = 8192,
             **deployment):
    """gpt-oss-120b on `tp` `gpu`s in `engine` (one H200 in vLLM at a 131,072-token context by default), `prompt`-token
    prompts and 1,024-token outputs; `deployment`: further deployment fields."""
    return resolve(scenario_from_dict({
        "name": "gpt-oss", "model": str(GPT_OSS), "hardware": gpu,
        "deployment": {"engine": engine, "tensor_parallel_size": tp, "max_model_len": max_model_len, **deployment},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": prompt},
                     "output_tokens": {"distribution": "fixed", "value": 1024}}}, None))


def test_the_sinks_are_read_one_logit_per_head():
    m = load_model(str(GPT_OSS))
    assert all(a.sinks for a in m.mixers(Attention))
    without = replace(m, layers=tuple(replace(layer, mixer=replace(layer.mixer, sinks=False)) for layer in m.layers))
    # 36 layers x 64 heads, one bf16 logit each (transformers GptOssAttention.sinks: num_attention_heads values)
    assert parameter_count(m).total - parameter_count(without).total == 36 * 64
    # openai/gpt-oss README: 117B parameters
    assert parameter_count(m).total == pytest.approx(117e9, rel=0.03)


def test_kv_per_sequence_keeps_the_window_in_the_sliding_layers():
    m = load_model(str(GPT_OSS))
    kv = kv_layout(m, "bf16", ParallelConfig())
    sliding = next(g for g in kv.groups if g.window_tokens)
    assert (sliding.window_tokens, sliding.layers) == (128, 18)
    # 131,072 tokens: the full layers keep all of them, the sliding ones 128 tokens in 8 blocks of 16 plus the
    # block the window straddles: 9 x 16 tokens
    assert kv.sequence_bytes(131_072, 16, per_gpu=False) == GROUP_BYTES * 131_072 + GROUP_BYTES * 9 * 16
    # about half of counting every layer at full context (2 x 36,864 B x 131,072)
    assert kv.sequence_bytes(131_072, 16, per_gpu=False) / (2 * GROUP_BYTES * 131_072) == pytest.approx(0.5, abs=1e-3)


def test_the_plans_capacity_counts_the_window_not_the_context():
    r = _gpt_oss()
    plan = make_plan(r)
    # requests of 9,216 tokens: full layers 9,216 x 36,864 B, sliding layers 9 blocks of 16 tokens x 36,864 B
    per_request = GROUP_BYTES * 9216 + GROUP_BYTES * 9 * 16
    assert plan.capacity.requests_held_per_replica == int(r.memory.kv_cache_bytes // per_request)
    assert plan.kv_bytes_per_sequence_at_max_model_len == GROUP_BYTES * (131_072 + 9 * 16)


def test_sliding_layers_attend_to_the_window_only():
    m = load_model(str(GPT_OSS))
    fmt, _ = weight_format(m, "auto", 128)
    p, hw = ParallelConfig(), load_hardware("h200")
    model = RooflineStepTimeModel(m, hw, fmt, weight_memory(m, fmt, p), kv_layout(m, "bf16", p), p)
    # 16 sequences decoding at 32,768 tokens: the full layers read 16 x 32,768 tokens' K and V, the sliding ones
    # 16 x 128 (the window), each plus the 16 new tokens written twice; memory-bound (4.8 TB/s x 0.85 x 0.95)
    kv_bytes_per_s = 4.8e12 * 0.85 * ATTENTION_KV_EFFICIENCY
    full = (16 * 32_768 + 2 * 16) * GROUP_BYTES / kv_bytes_per_s
    sliding = (16 * 128 + 2 * 16) * GROUP_BYTES / kv_bytes_per_s
    # compute: 4 x 64 heads x 64 head dim FLOPs per pair and layer at 989 TFLOP/s x 0.8, far below either
    pairs = 16 * 32_769
    assert pairs * 4 * 64 * 64 * 18 / (989e12 * 0.8) < full
    assert model.cost(decode_batch(16, 32_768)).attention_s == pytest.approx(full + sliding, rel=1e-12)


def test_a_prompt_in_the_sliding_layers_attends_to_the_window_only():
    m = load_model(str(GPT_OSS))
    fmt, _ = weight_format(m, "auto", 128)
    p, hw = ParallelConfig(), load_hardware("h200")
    model = RooflineStepTimeModel(m, hw, fmt, weight_memory(m, fmt, p), kv_layout(m, "bf16", p), p)
    windows = [g.window_tokens for g in model.kv.groups]
    assert sorted(windows, key=str) == [128, None]
    full, sliding = (model.attention_group_s(windows.index(w), StepBatch.from_seqs([(8192, 0)])) for w in (None, 128))
    # one fresh 8,192-token prompt, compute-bound in both groups (18 layers each, the same heads): the full layers
    # attend to 8,192 x 8,193 / 2 = 33,558,528 query-key pairs; a sliding layer's query j to min(128, j) keys:
    # 128 x 129 / 2 + (8,192 - 128) x 128 = 1,040,448 pairs (it was priced as the full layers' before)
    assert sliding / full == pytest.approx(1_040_448 / 33_558_528, rel=1e-12)
    # a 100-token chunk on 1,000 cached tokens: every query sees the whole window, 100 x 128 pairs
    assert windowed_pairs(100, 1000, 128) == 100 * 128
    # within the window the pairs are the causal ones: 20 x 50 + 20 x 21 / 2
    assert windowed_pairs(20, 50, 128) == 20 * 50 + 20 * 21 / 2


@pytest.mark.parametrize(("engine", "gpu", "kernel", "acts"), [
    # vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend: sm_90 triton_kernels (Marlin fallback);
    # sm_100 FlashInfer TRT-LLM-gen MoE, MXFP8 activations with the gpt-oss recipe's environment variable
    ("vllm", "h200", "OpenAI triton_kernels MXFP4 MoE", "bf16"),
    ("vllm", "b200", "FlashInfer TRT-LLM-gen MXFP4 MoE, W4A8 with MXFP8 activations", "mxfp8"),
    # sglang server_args.py: sm_100 flashinfer_mxfp4, else triton_kernel
    ("sglang", "h200", "triton_kernel MoE runner", "bf16"),
    ("sglang", "b200", "flashinfer_mxfp4 MoE runner", "mxfp8"),
    # TensorRT-LLM examples/models/core/gpt_oss/README.md: Hopper TRITON (bf16 x mxfp4), Blackwell mxfp8 x mxfp4
    ("tensorrt-llm", "h200", "MoE backend TRITON", "bf16"),
    ("tensorrt-llm", "b200", "W4A8_MXFP4_MXFP8", "mxfp8"),
])
def test_each_engine_names_its_own_mxfp4_moe_kernel(engine, gpu, kernel, acts):
    m = load_model(str(GPT_OSS))
    fmt, _ = weight_format(m, "auto", 128)
    runs = execution(fmt, load_hardware(gpu), engine=engine)
    assert kernel in runs.kernel and runs.expert_activations == acts
    assert ("[VLLM" in runs.kernel) == (engine == "vllm")
    # the experts' GEMMs stay priced at the 16-bit rate (no MXFP8 peak is applied to them)
    assert runs.compute_format == "bf16"


POWER = "the tokens routed by a power law, alpha 1.2, as measured"   # gpt-oss's rows (moe_skewed)


def test_w4a8_experts_are_priced_by_w4a8_rows_or_the_roofline_never_by_the_w4a16_rows():
    # On a B200 the engines feed gpt-oss's MXFP4 experts MXFP8 activations (W4A8: format_support.MXFP4_MOE). The
    # bundled B200 tables (aiconfigurator-core 0.12.0) hold gpt-oss's expert shape as W4A8 rows in TensorRT-LLM
    # 1.3.0rc20 (moe_torch_flow) with the experts whole on 1-8 GPUs and in SGLang 0.5.14 (FlashInfer's TRT-LLM-gen
    # MoE) sliced or spread, but in vLLM 0.24.0 only as W4A16 MXFP4 x BF16 rows (flashinfer_trtllm_mxfp4_bf16),
    # another kernel. vLLM runs SGLang's kernel (step_model.SHARED_MOE_KERNELS), so SGLang's W4A8 rows price vLLM's
    # experts, never the W4A16 rows; TensorRT-LLM's its own at TP 1, and where TP 2 slices the experts (no such W4A8
    # rows) its own W4A8 rows of the experts spread whole over 2 GPUs (the same bytes and FLOPs a GPU). On an H200
    # the W4A16 rows are the kernel that runs (OpenAI triton_kernels). Experts sliced by TP (here on one GPU) are
    # priced by the rows measured with gpt-oss's power-law routing (moe_skewed).
    def priced(gpu, engine="vllm", tp=1):
        step = step_model_for(_gpt_oss(gpu, engine, tp, max_model_len=8192, prompt=1024))
        return step_sources(step)["MoE experts"], step
    source, step = priced("b200")
    assert source == f"kernel tables (the same kernel as SGLang's 0.5.14 tables measured it; {POWER})"
    assert step.roofline.expert_activations == "mxfp8"
    m = step.roofline.model
    sglang = step_model_for(_gpt_oss("b200", "sglang", max_model_len=8192, prompt=1024))
    ours, theirs = step._moe_curve(m, step.roofline.parallel), sglang._moe_curve(m, sglang.roofline.parallel)
    assert (ours[1].xs, ours[1].ys) == (theirs[1].xs, theirs[1].ys)
    assert ("w4a8_mxfp4_mxfp8", 2880, 2880, 4, 128, 1, 1) not in step.tables.moe
    assert ("power_law_1.2", "w4a8_mxfp4_mxfp8", 2880, 2880, 4, 128, 1, 1) not in step.tables.moe_skewed
    # the same at TP 2 (experts sliced in two: SGLang's rows hold the split)
    assert priced("b200", tp=2)[0] == source
    # tables a scenario brings (hardware.kernel_tables) are its measurements alone: nothing borrowed
    own = resolve(scenario_from_dict({
        "name": "gpt-oss", "model": str(GPT_OSS),
        "hardware": {"gpu": "b200", "kernel_tables": str(KERNELS_DIR / "b200-vllm-0.24.0")},
        "deployment": {"max_model_len": 8192},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 1024},
                     "output_tokens": {"distribution": "fixed", "value": 1024}}}, None))
    assert step_sources(step_model_for(own))["MoE experts"] == "roofline"
    assert priced("b200", "tensorrt-llm")[0] == f"kernel tables ({POWER})"
    assert priced("b200", "tensorrt-llm", tp=2)[0] == (
        "kernel tables (sliced over 2 GPUs, priced by the rows of the experts spread whole over 2 (the same bytes and "
        "FLOPs a GPU, no imbalance))")
    trt = priced("b200", "tensorrt-llm", tp=2)[1]
    assert ("w4a8_mxfp4_mxfp8", 2880, 2880, 4, 128, 1, 2) in trt.tables.moe
    assert priced("h200")[0] == f"kernel tables ({POWER})"


def test_marlin_moe_prices_prompts_at_its_measured_rate_and_decodes_as_the_w4a16_rows():
    # InferenceMAX's Hopper gpt-oss scripts export VLLM_MXFP4_USE_MARLIN=1 (sizer: moe_backend marlin). The bundled H200
    # vLLM tables measure Marlin's MXFP4 MoE only for another expert shape (896 experts of 3,584 x 3,072, top 16), so
    # gpt-oss's triton_kernels W4A16 rows price it, no faster than Marlin's rows do the FLOPs at the same tokens per
    # expert.
    auto = step_model_for(_gpt_oss(max_model_len=9216))
    marlin = step_model_for(_gpt_oss(max_model_len=9216, moe_backend="marlin"))
    assert marlin.roofline.moe_kernel == "marlin" and auto.roofline.moe_kernel == ""
    assert "Marlin" in step_sources(marlin)["MoE experts"] and step_sources(auto)["MoE experts"] == (
        f"kernel tables ({POWER})")
    # an 8,192-token prompt: 8,192 x 4 / 128 = 256 tokens an expert. Marlin's rows (aiconfigurator-core 0.12.0,
    # h200_sxm vllm 0.24.0, balanced, TP 1): 58.696 ms at 12,288 tokens (219.4 an expert) and 74.670 ms at 16,384
    # (292.6), 6 x 3,584 x 3,072 x 16 FLOPs a token: 221.3 and 231.9 TFLOPS, 227.0 at 256 (log-linear); gpt-oss's
    # 6 x 2,880 x 2,880 x 4 x 8,192 = 1.631 TFLOP a layer then take 7.18 ms balanced, against the triton_kernels
    # row's 2.905 ms; both routed by gpt-oss's power law (alpha 1.2), as the triton_kernels rows measured it: 4.021 ms
    # (h200_sxm vllm 0.24.0, power_law_1.2), Marlin's 7.18 x 4.021 / 2.905 = 9.94 ms
    flops = [6 * 3584 * 3072 * 16 * t / s for t, s in ((12288, 58.696e-3), (16384, 74.670e-3))]
    where = math.log(256 / (12288 * 16 / 896)) / math.log(16384 / 12288)
    layer_s = 6 * 2880 * 2880 * 4 * 8192 / (flops[0] + (flops[1] - flops[0]) * where)
    assert layer_s == pytest.approx(7.18e-3, rel=0.005)
    prompt = StepBatch.from_seqs([(8192, 0)])
    skew = 4.021e-3 / 2.905e-3
    assert marlin.step_time(prompt) - auto.step_time(prompt) == pytest.approx(36 * (layer_s - 2.905e-3) * skew,
                                                                              rel=0.01)
    # decode (32 sequences): the experts stream, where the two kernels read MXFP4 at about the same rate
    assert marlin.step_time(decode_batch(32, 2000)) == auto.step_time(decode_batch(32, 2000))


def test_marlin_is_what_vllm_runs_below_sm_90_and_is_priced_by_its_own_rows():
    # vllm get_mxfp4_backend: compute capability below 9 runs Marlin; the L40S vLLM 0.24.0 tables measure gpt-oss's
    # shape with Marlin (vllm_gptossmxfp4moe_marlin_marlinexperts), imported as MARLIN_MOE_DTYPE
    runs = execution(weight_format(load_model(str(GPT_OSS)), "auto", 128)[0], load_hardware("l40s"))
    assert runs.moe_kernel == "marlin" and "Marlin MXFP4 MoE" in runs.kernel
    step = step_model_for(_gpt_oss("l40s", tp=4, max_model_len=8192, prompt=1024))
    assert step_sources(step)["MoE experts"] == f"kernel tables ({POWER})"
    # SGLang there runs its own MXFP4 MoE: not vLLM's Marlin, in the plan or in the step model
    sglang = _gpt_oss("l40s", "sglang", tp=4, max_model_len=8192, prompt=1024)
    assert sglang.execution.moe_kernel == "" and step_model_for(sglang).roofline.moe_kernel == ""


@pytest.mark.parametrize(("model", "deployment", "says"), [
    ("llama-3.1-8b", {}, "the model has no MoE experts"),
    ("mixtral-8x7b", {}, "these weights are bf16"),
    ("mixtral-8x7b", {"quantization": "mxfp4"}, r"MXFP4 MoE checkpoints \(quant_method mxfp4\) only; these weights "
                                                r"are mxfp4$"),
    (str(GPT_OSS), {"engine": "sglang"}, "is a setting of vllm"),
    (str(GPT_OSS), {"gpu": "mi300x"}, "run on NVIDIA GPUs from Ampere on, not on AMD Instinct MI300X"),
    (str(GPT_OSS), {"gpu": "tpu-v6e"}, "run on NVIDIA GPUs from Ampere on"),
])
def test_marlin_where_sizer_does_not_price_it_is_refused(model, deployment, says):
    with pytest.raises(InputError, match=says) as e:
        resolve(scenario_from_dict({"model": model, "hardware": deployment.pop("gpu", "h200"),
                                    "deployment": {"moe_backend": "marlin", **deployment},
                                    "workload": {"arrival": {"rate_per_s": 1},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 100},
                                                 "output_tokens": {"distribution": "fixed", "value": 100}}}, None))
    assert e.value.field == "deployment.moe_backend"


def test_other_engines_do_not_borrow_vllms_kernel_names():
    fp8 = weight_format(load_model("llama-3.1-8b"), "fp8", 128)[0]
    h200 = load_hardware("h200")
    assert execution(fp8, h200).kernel == "CUTLASS FP8 W8A8 [VLLM-HW]"
    sglang = execution(fp8, h200, engine="sglang")
    assert sglang.kernel == "SGLang's own kernels for fp8 (native)" and "VLLM" not in sglang.note
    assert sglang.compute_format == "fp8"


def test_sliding_spans_are_the_window_layers():
    m = load_model(str(GPT_OSS))
    spans = [a.span for a in m.mixers(Attention)]
    assert spans == [SLIDING if i % 2 == 0 else "full" for i in range(36)]


def test_the_kv_pool_counts_blocks_of_the_full_layers_and_the_simulator_the_windows():
    r = _gpt_oss()
    # a block is 16 tokens of the 18 full-attention layers (36,864 B a token); the 18 sliding layers hold as many
    # bytes per token, so a window block is one pool block, window 128
    assert r.memory.kv_blocks == int(r.memory.kv_cache_bytes // (GROUP_BYTES * 16))
    assert r.replica.kv_windows == ((1.0, 128),)
