"""Weight bytes per format, counted matrix by matrix on a small model derived by hand.

Model: hidden 1024, intermediate 4096, 2 layers, 8 heads / 2 KV heads x 128, vocab 1000.
Per layer: q 1024x1024 = 1,048,576; k, v 1024x256 = 262,144 each; o 1,048,576;
gate_up 1024x8192 = 8,388,608; down 4096x1024 = 4,194,304  -> 15,204,352; x2 = 30,408,704.
lm_head 1,024,000; embedding 1,024,000; norms (2 x 2 + 1) x 1024 = 5,120.
"""

import pytest

from sizer.analytic.formats import FORMATS
from sizer.analytic.memory import KV_DTYPE_BYTES, kv_layout, memory_budget, weight_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import parameter_count
from sizer.inputs.model_spec import from_hf_config
from validation.errors import FieldError

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
          "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
          "max_position_embeddings": 4096, "tie_word_embeddings": False}
LINEAR = 30_408_704
UNCONVERTED_2B = (1_024_000 * 2 + 5_120) * 2      # embedding, lm_head, norms at 2 bytes = 4,106,240
MATRICES = 12                                     # 6 per layer


@pytest.fixture
def model():
    return from_hf_config(CONFIG, "hand")


def test_parameter_count(model):
    assert parameter_count(model).total == LINEAR + 2 * 1_024_000 + 5_120 == 32_461_824


def test_bf16_is_two_bytes_each(model):
    w = weight_memory(model, FORMATS["bf16"], ParallelConfig())
    assert w.total_bytes == w.ideal_bytes == 32_461_824 * 2


def test_awq_groups_of_128(model):
    w = weight_memory(model, FORMATS["awq"], ParallelConfig(), group_size=128)
    assert w.converted_value_bytes == LINEAR / 2                  # 4 bits
    assert w.scale_bytes == LINEAR / 128 * 2.5                    # fp16 scale + 4-bit zero per 128 = 593,920
    assert w.unconverted_bytes == UNCONVERTED_2B
    assert w.total_bytes == 15_204_352 + 593_920 + 4_106_240
    assert w.ideal_bytes == 32_461_824 / 2                        # every parameter at 4 bits


def test_awq_smaller_groups_cost_more(model):
    g64 = weight_memory(model, FORMATS["awq"], ParallelConfig(), group_size=64)
    assert g64.scale_bytes == LINEAR / 64 * 2.5


def test_nvfp4_blocks_of_16_with_fp8_scales(model):
    w = weight_memory(model, FORMATS["nvfp4"], ParallelConfig())
    # one 1-byte E4M3 scale per 16 values + two fp32 per-tensor scales per matrix
    assert w.scale_bytes == LINEAR / 16 + MATRICES * 8 == 1_900_640


def test_mxfp4_blocks_of_32_with_e8m0_scales(model):
    w = weight_memory(model, FORMATS["mxfp4"], ParallelConfig())
    assert w.scale_bytes == LINEAR / 32 == 950_272
    assert w.total_bytes == LINEAR / 2 + LINEAR / 32 + UNCONVERTED_2B


def test_fp8_and_int8_scales(model):
    assert weight_memory(model, FORMATS["fp8"], ParallelConfig()).scale_bytes == MATRICES * 8
    # int8: one fp32 scale per output channel: (1024 + 256 + 256 + 1024 + 8192 + 1024) x 2 layers x 4 B
    assert weight_memory(model, FORMATS["int8"], ParallelConfig()).scale_bytes == 11_776 * 2 * 4


def test_tensor_and_pipeline_split(model):
    # TP 2: every matrix, the embedding and lm_head halve; norms are replicated
    tp2 = weight_memory(model, FORMATS["bf16"], ParallelConfig(tp=2))
    assert tp2.per_gpu_bytes == (LINEAR + 2 * 1_024_000) / 2 * 2 + 5_120 * 2
    # PP 2: one layer per stage plus the larger of embedding / lm_head, half the norms
    pp2 = weight_memory(model, FORMATS["bf16"], ParallelConfig(pp=2))
    assert pp2.per_gpu_bytes == (LINEAR / 2 + 1_024_000) * 2 + 5_120 / 2 * 2


def test_gpt_oss_keeps_attention_in_bf16():
    from sizer.analytic.formats import weight_format
    from sizer.inputs.model_spec import load_model
    m = load_model("gpt-oss-20b")
    w = weight_memory(m, weight_format(m, "mxfp4", 128)[0], ParallelConfig())   # the checkpoint's own MXFP4
    # only the experts are MXFP4 (modules_to_not_convert names attention, router, embeddings, lm_head);
    # the published checkpoint is about 13.8 GB
    assert 13.0e9 < w.total_bytes < 14.5e9
    all_converted = weight_memory(m, FORMATS["awq"], ParallelConfig())
    assert all_converted.unconverted_bytes < w.unconverted_bytes


def test_kv_capacity_in_whole_blocks(model):
    kv = kv_layout(model, "fp8", ParallelConfig())
    # 2 x 2 layers x 2 KV heads x 128 x 1 byte = 1,024 B per token; blocks of 16 tokens = 16 KiB
    assert kv.bytes_per_token == 1_024 and KV_DTYPE_BYTES["fp8"] == 1
    w = weight_memory(model, FORMATS["bf16"], ParallelConfig())
    budget = memory_budget(model, 4 * 2**30, w, kv, ParallelConfig(), 0.5, 16, 4096, 512, 16)
    assert budget.kv_blocks == int(budget.kv_cache_bytes // (1_024 * 16))
    assert budget.max_seqs_at_max_model_len == int(budget.kv_cache_bytes // (4096 * 1_024))
    assert budget.fits


def test_does_not_fit_names_the_reason():
    from sizer.inputs.model_spec import load_model
    m = load_model("llama-3.1-70b")
    w = weight_memory(m, FORMATS["bf16"], ParallelConfig())
    budget = memory_budget(m, 80 * 2**30, w, kv_layout(m, "bf16", ParallelConfig()), ParallelConfig(), 0.9, 16, 8192,
                           8192, 256)
    # 141 GB of weights cannot fit 72 GiB usable
    assert not budget.fits and "weights need" in budget.reasons[0]


def test_checkpoint_bits_and_group_size_are_read():
    from sizer.analytic.formats import weight_format
    gptq8 = from_hf_config({**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": 32}},
                           "g8")
    fmt, group = weight_format(gptq8, "auto", 128)
    assert (fmt.name, fmt.bits, group) == ("gptq", 8, 32)
    w = weight_memory(gptq8, fmt, ParallelConfig(), group)
    assert w.converted_value_bytes == LINEAR                 # 8 bits = 1 byte per value
    assert w.scale_bytes == LINEAR / 32 * 2.5                # groups of 32, not the default 128
    # an llm-compressor W4A16 checkpoint is 4-bit integer weights with group scales
    ct = from_hf_config({**CONFIG, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 64}}}}}, "w4a16")
    fmt, group = weight_format(ct, "auto", 128)
    assert (fmt.bits, group) == (4, 64)
    # an explicit format wins over the checkpoint's
    assert weight_format(gptq8, "bf16", 128)[0].name == "bf16"


def test_unmodelled_checkpoint_quantization_is_an_input_error():
    from sizer.analytic.formats import weight_format
    bnb = from_hf_config({**CONFIG, "quantization_config": {"quant_method": "bitsandbytes"}}, "bnb")
    with pytest.raises(FieldError, match="deployment.quantization"):
        weight_format(bnb, "auto", 128)


def test_float32_checkpoints_are_served_in_16_bit():
    from sizer.analytic.formats import weight_format
    m = from_hf_config({**CONFIG, "torch_dtype": "float32"}, "f32")
    # vLLM's dtype=auto serves float32 checkpoints in float16
    assert weight_format(m, "auto", 128)[0].name == "fp16"


def test_mla_down_projections_are_replicated_across_tp():
    from sizer.analytic.parallel import shard_fraction
    from sizer.analytic.weights import linear_groups
    from sizer.inputs.model_spec import load_model
    m = load_model("deepseek-v3")
    shares = {g.name: shard_fraction(g, m, ParallelConfig(tp=8)) for g in linear_groups(m)}
    assert shares["self_attn.q_a_proj"] == shares["self_attn.kv_a_proj_with_mqa"] == 1.0  # vLLM's ReplicatedLinear
    assert shares["self_attn.q_b_proj"] == 1 / 8
