"""DeepSeek sparse attention (DSA, issue 24 item 3): DeepSeek-V3.2's and GLM-5's indexer scores every cached
token against its own FP8 key cache, then each query attends to the top `index_topk` tokens. One layer
description (sizer.inputs.layers.LatentAttention) gives the KV kept, the indexer's cost and the top-k
attention."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.step_batch import StepBatch
from sizer.analytic import formats
from sizer.analytic.formats import FORMATS, weight_format
from sizer.analytic.memory import kv_layout, weight_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.cli.app import app
from sizer.inputs.hardware import load_hardware
from sizer.inputs.model_spec import from_hf_config, load_model
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.timing.roofline import ATTENTION_KV_EFFICIENCY, RooflineStepTimeModel, decode_batch
from sizer.timing.step_model import step_model_for

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
TP8 = ParallelConfig(tp=8)


def _roofline(m, gpu: str = "h200") -> RooflineStepTimeModel:
    fmt = FORMATS["fp8"]
    return RooflineStepTimeModel(m, load_hardware(gpu), fmt, weight_memory(m, fmt, TP8), kv_layout(m, "bf16", TP8), TP8)


def _decode_attention_by_hand(seqs: int, context: int) -> float:
    """One decode step's attention of DeepSeek-V3.2 (61 layers: 128 heads, latent 512 + rope 64, indexer 64 heads x
    128, top 2,048) at TP 8 on an H200 (profile: bf16 989 TFLOP/s, fp8 1,979 TFLOP/s, compute efficiency 0.8;
    4.8 TB/s, bandwidth efficiency 0.85; KV reads at ATTENTION_KV_EFFICIENCY 0.95 of that), bf16 KV cache."""
    kv_bytes_per_s = 4.8e12 * 0.85 * ATTENTION_KV_EFFICIENCY
    pairs = seqs * (context + 1)                       # each new token attends to its context and itself
    # top-k attention: 2,048 pairs a query, absorbed MLA 2 x 128 heads x (2 x 512 + 64) FLOPs a pair, heads / 8
    attended = seqs * 2048
    main_compute = attended * 2 * 128 * (2 * 512 + 64) / 8 * 61 / (989e12 * 0.8)
    # it reads the 2,048 chosen tokens' latent + rope (576 x 2 bytes, replicated on every rank) and writes the new one
    main_memory = (attended + 2 * seqs) * 61 * 576 * 2 / kv_bytes_per_s
    # the indexer: every pair, 2 x 64 x 128 FLOPs in FP8, all index heads on every rank; its key cache (128 FP8 bytes
    # + a 4-byte scale per token and layer) read whole
    index_compute = pairs * 2 * 64 * 128 * 61 / (1979e12 * 0.8)
    index_memory = (seqs * context + seqs) * 61 * 132 / kv_bytes_per_s
    return max(main_compute, main_memory) + max(index_compute, index_memory)


def test_one_decode_step_of_sparse_attention_derived_by_hand():
    model = _roofline(load_model("deepseek-v3.2"))
    batch = decode_batch(32, 131_072)
    expected = _decode_attention_by_hand(32, 131_072)
    assert model.cost(batch).attention_s == pytest.approx(expected, rel=1e-12)
    # the numbers: main attention memory-bound, 65,600 x 70,272 B / 3.876 TB/s = 1.19 ms; the indexer memory-bound,
    # 4,194,336 x 8,052 B / 3.876 TB/s = 8.71 ms
    assert expected == pytest.approx(1.189e-3 + 8.713e-3, rel=2e-3)


def test_sparse_decode_attention_is_several_times_cheaper_than_dense_at_long_context():
    m = load_model("deepseek-v3.2")
    config = json.loads((MODELS / "deepseek-v3.2" / "config.json").read_text())
    dense = from_hf_config({**config, "index_n_heads": 0, "index_head_dim": 0, "index_topk": 0}, "v3.2 dense")
    batch = decode_batch(32, 131_072)
    sparse_s, dense_s = _roofline(m).cost(batch).attention_s, _roofline(dense).cost(batch).attention_s
    # dense MLA reads all 32 x 131,073 tokens' 1,152-byte latents in each of 61 layers: 4,194,336 x 70,272 B /
    # 3.876 TB/s = 76 ms; sparse 9.9 ms (above)
    assert dense_s == pytest.approx(4_194_336 * 70_272 / (4.8e12 * 0.85 * ATTENTION_KV_EFFICIENCY), rel=1e-3)
    assert dense_s / sparse_s > 7
    # a short context (below the top-k) attends to everything: only the indexer is added
    short = decode_batch(32, 1024)
    assert _roofline(m).cost(short).attention_s > _roofline(dense).cost(short).attention_s


def test_prefill_pairs_are_capped_at_top_k_per_query():
    model = _roofline(load_model("deepseek-v3.2"))
    # a 4,096-token chunk on 8,192 cached: 4,096 x 8,192 + 4,096 x 4,097 / 2 pairs dense, 4,096 x 2,048 attended
    batch = StepBatch.from_seqs([(4096, 8192)])
    pairs = 4096 * 8192 + 4096 * 4097 // 2
    main_compute = 4096 * 2048 * 2 * 128 * (2 * 512 + 64) / 8 * 61 / (989e12 * 0.8)
    main_memory = (2048 + 2 * 4096) * 61 * 1152 / (4.8e12 * 0.85 * ATTENTION_KV_EFFICIENCY)
    index_compute = pairs * 2 * 64 * 128 * 61 / (1979e12 * 0.8)
    index_memory = (8192 + 4096) * 61 * 132 / (4.8e12 * 0.85 * ATTENTION_KV_EFFICIENCY)
    assert model.cost(batch).attention_s == pytest.approx(
        max(main_compute, main_memory) + max(index_compute, index_memory), rel=1e-12)


def test_the_plan_prices_decode_attention_from_the_top_k_and_says_so():
    # sizer plan --model deepseek-v3.2 --gpu h200 --tp 8 --max-model-len 131072: the kernel tables hold no sparse
    # MLA, so its attention comes from the roofline's DSA pricing above
    r = resolve(scenario_from_dict({
        "name": "dsa", "model": "deepseek-v3.2", "hardware": "h200",
        "deployment": {"engine": "vllm", "tensor_parallel_size": 8, "max_model_len": 131072},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 1024},
                     "output_tokens": {"distribution": "fixed", "value": 256}}}, None))
    step = step_model_for(r)
    assert step.attention_s(decode_batch(32, 131_072)) == pytest.approx(_decode_attention_by_hand(32, 131_072),
                                                                        rel=1e-12)
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3.2", "--gpu", "h200", "--tp", "8",
                                      "--max-model-len", "131072"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "attention is priced from the top 2,048 cached tokens each query attends to, not the whole context" in text
    assert "indexer key 132 B (FP8 + scale) x 61 layers" in text


def test_kv_per_token_holds_the_latent_and_the_indexer_key():
    m = load_model("deepseek-v3.2")
    # 61 x (576 x 2 bytes in bf16 + 132 indexer bytes) = 78,324 B
    assert kv_layout(m, "bf16", TP8).bytes_per_token == 61 * (1152 + 132) == 78_324
    # an fp8 cache is vLLM's fp8_ds_mla for a DSA model (DeepseekV32ForCausalLM.verify_and_update_config): 512 FP8
    # latent values + 4 fp32 scales + 64 RoPE dims in bf16 = 656 B a layer (MLAAttentionSpec), the indexer key
    # beside it: 61 x (656 + 132) = 48,068 B (it was 61 x (576 + 132), the latent and RoPE both in FP8)
    layout = kv_layout(m, "fp8", TP8)
    assert layout.bytes_per_token == 61 * (656 + 132) == 48_068
    assert "fp8_ds_mla (kv_lora_rank 512 x 1 B + 4 fp32 scales + qk_rope_head_dim 64 x 2 B) x 61 layers" in \
        layout.formula
    # a dense MLA model keeps plain FP8: DeepSeek-V3's 61 x 576
    assert kv_layout(load_model("deepseek-v3"), "fp8", TP8).bytes_per_token == 61 * 576


def test_the_indexers_weights_proj_stays_16_bit_in_an_fp8_checkpoint(monkeypatch):
    # vLLM builds the indexer's weights_proj with quant_config=None ("weight_proj is not quantized"): 61 layers of a
    # 7,168 x 64 matrix, replicated on every GPU, at 2 bytes (55,967,744 B) where FP8 counted 1 byte and a fp32
    # scale per 128 x 128 block (27,983,872 + 61 x 56 x 4 = 27,997,536 B): 27,970,208 B more on each GPU
    m = load_model("deepseek-v3.2")
    fmt, group = weight_format(m, "auto", 128)
    kept = weight_memory(m, fmt, TP8, group).per_gpu_bytes
    monkeypatch.setattr(formats, "UNCONVERTED_MODULES", ())
    assert kept - weight_memory(m, fmt, TP8, group).per_gpu_bytes == 61 * 7168 * 64 * 2 - 61 * (7168 * 64 + 56 * 4)
