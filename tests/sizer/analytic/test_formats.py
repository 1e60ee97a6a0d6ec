"""Checkpoint formats sized matrix by matrix: the scheme's scales, and the modules its ignore or exclude
patterns leave at 16 bits, matched by full module name in the checkpoint's own spelling.

The real checkpoints' config.json and hf_quant_config.json are byte copies in tests/data/models/<id>/
(sources: that folder's README.md and facts.yaml); where only a sidecar is there, the shapes come from
the bundled catalog (the test says which).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sizer.analytic.formats import FORMATS, converted_share, scale_bytes, validate_groups, weight_format
from sizer.analytic.memory import weight_memory
from sizer.analytic.module_names import quantised_share, spellings
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import LinearGroup, linear_groups
from sizer.errors import InputError
from sizer.inputs.model_spec import from_hf_config, load_model
from sizer.inputs.quantization import parse_hf_quant_config, parse_quantization

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
MODELOPT_FP8 = {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}


def real(model_id: str, file: str = "config.json") -> dict:
    return json.loads((MODELS / model_id / file).read_text())


def sized(m, requested: str = "auto", tp: int = 1):
    fmt, group = weight_format(m, requested, 128)
    return fmt, weight_memory(m, fmt, ParallelConfig(tp=tp), group)


def test_llama_3_1_70b_modelopt_fp8_is_half_of_bf16():
    # nvidia/Llama-3.1-70B-Instruct-FP8: config.json without quantization_config, and hf_quant_config.json:
    # ModelOpt FP8, exclude_modules [lm_head], kv_cache_quant_algo FP8
    m = load_model(str(MODELS / "llama-3.1-70b-instruct-fp8"))
    fmt, w = sized(m)
    # per layer: q, o 8192x8192; k, v 8192x1024; gate_up 8192x57344; down 28672x8192 = 855,638,016; x 80 layers
    assert w.converted_value_bytes == 80 * 855_638_016 == 68_451_041_280        # 1 byte each
    assert w.scale_bytes == 80 * 6 * 8                   # fp32 weight + static input scale per matrix
    # embedding and lm_head 128256 x 8192 each, norms 80 x 2 x 8192 + 8192 = 1,318,912; 2 bytes each
    assert w.unconverted_bytes == (2 * 1_050_673_152 + 1_318_912) * 2 == 4_205_330_432
    assert w.total_bytes == 72_656_375_552             # ~73 GB, not the 141 GB of bf16: fits 2 x H100 80GB
    assert weight_memory(m, FORMATS["bf16"], ParallelConfig()).total_bytes == 141_107_412_992
    assert (fmt.compute, m.quantization.kv_cache, m.quantization.source) == ("fp8", "fp8", "hf_quant_config.json")


def test_llama_4_scout_fp8_dynamic_keeps_attention_routers_lm_head_and_vision_in_bf16():
    # RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic: compressed-tensors FP8 (per-channel weights, dynamic
    # per-token activations) at the top level beside text_config; 449 ignores: every layer's q/k/v/o and
    # feed_forward.router, the vision model, language_model.lm_head
    m = load_model(str(MODELS / "llama-4-scout-17b-16e-instruct-fp8-dynamic"))
    fmt, w = sized(m, tp=2)
    shares = {g.name: converted_share(g, fmt, m) for g in linear_groups(m)}
    assert {name for name, share in shares.items() if share} == {
        "mlp.experts.gate_up_proj", "mlp.experts.down_proj", "mlp.shared_experts.gate_up_proj",
        "mlp.shared_experts.down_proj"} and set(shares.values()) == {0, 1}
    # 48 layers x (16 routed + 1 shared expert) x (5120 x 16384 + 8192 x 5120) at 1 byte
    assert w.converted_value_bytes == 48 * 17 * 125_829_120 == 102_676_561_920
    # per-channel bf16 scales: (16384 + 5120) output rows x 2 bytes per expert matrix pair; dynamic activations
    assert w.scale_bytes == 48 * 17 * 21_504 * 2 == 35_094_528
    assert fmt.compute == "fp8" and not m.quantization.static_activations


def test_kimi_w4a16_regex_ignores_leave_only_routed_experts_in_int4():
    # Kimi-K2.5's quantization_config (compressed-tensors W4A16, group 32; ignores lm_head, self_attn,
    # shared_experts and the dense MLPs by regex) on DeepSeek-V3's shapes (the same DeepseekV3 architecture)
    q = parse_quantization(real("kimi-k2.5")["text_config"]["quantization_config"], "kimi")
    m = replace(load_model("deepseek-v3"), quantization=q)
    fmt, w = sized(m)
    converted = {g.name for g in linear_groups(m) if converted_share(g, fmt, m)}
    assert converted == {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}
    experts = 58 * 256 * (7168 * 4096 + 2048 * 7168)         # 58 MoE layers x 256 experts
    assert w.converted_value_bytes == experts / 2
    assert w.scale_bytes == experts / 32 * 2                 # a bf16 scale per 32 inputs, symmetric: no zeros


@pytest.mark.parametrize(("model_id", "catalog", "excluded_prefix"), [
    ("qwen3-30b-a3b-nvfp4", "qwen3-30b-a3b", "mlp.gate"),        # only routers (and lm_head) excluded
    ("deepseek-v3-0324-nvfp4", "deepseek-v3", "self_attn."),      # attention and routers excluded
])
def test_modelopt_nvfp4_sidecars_on_catalog_shapes(model_id, catalog, excluded_prefix):
    m = replace(load_model(catalog), quantization=parse_hf_quant_config(real(model_id, "hf_quant_config.json"), "h"))
    fmt, w = sized(m)
    for g in linear_groups(m):
        excluded = g.name.startswith(excluded_prefix) or g.kind in ("router", "lm_head")
        assert converted_share(g, fmt, m) == (0 if excluded else 1), g.name
    # 1 byte E4M3 scale per 16 values, + fp32 global weight and input scale per matrix
    quantised = [g for g in linear_groups(m) if converted_share(g, fmt, m)]
    assert w.scale_bytes == sum(g.params / 16 + 8 * g.count for g in quantised)


@pytest.mark.parametrize(("model_id", "quantised"), [
    # Nemotron-3-Nano NVFP4 (hf_quant_config.json): 6 of 23 Mamba layers and all 6 attention layers excluded by
    # name (backbone.layers.N.mixer.*); experts and shared experts quantised
    ("nemotron-3-nano-30b-a3b-nvfp4", {"mixer.in_proj": 17 / 23, "mixer.out_proj": 17 / 23, "mlp.experts.up_proj": 1,
                                       "mlp.experts.down_proj": 1, "mlp.shared_experts.up_proj": 1,
                                       "mlp.shared_experts.down_proj": 1}),
    # Qwen3.5-397B NVFP4 (config.json, ModelOpt): linear_attn, self_attn, shared experts, visual excluded
    ("qwen3.5-397b-a17b-nvfp4", {"mlp.experts.gate_up_proj": 1, "mlp.experts.down_proj": 1}),
    # Gemma-4-26B-A4B NVFP4: every layer's mlp (the dense MLP beside the experts), router and self_attn excluded
    ("gemma-4-26b-a4b-nvfp4", {"mlp.experts.gate_up_proj": 1, "mlp.experts.down_proj": 1}),
])
def test_real_nvfp4_checkpoints_quantise_what_they_say(model_id, quantised):
    m = load_model(str(MODELS / model_id))
    fmt, _ = weight_format(m, "auto", 128)
    assert fmt.name == "nvfp4"
    assert {g.name: converted_share(g, fmt, m) for g in linear_groups(m) if converted_share(g, fmt, m)} == quantised


def test_a_group_partly_excluded_counts_partly():
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
              "intermediate_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
              "vocab_size": 1000, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8",
                                                          "ignore": ["model.layers.0.mlp*", "lm_head"]}}
    m = from_hf_config(config, "half")
    fmt, w = sized(m)
    gate_up = next(g for g in linear_groups(m) if g.name == "mlp.gate_up_proj")
    assert converted_share(gate_up, fmt, m) == 0.5
    # 2 layers x (attention 2,621,440 + MLP 12,582,912): all attention and layer 1's MLP at 1 byte
    assert w.converted_value_bytes == 2 * 2_621_440 + 12_582_912
    assert w.scale_bytes == (8 + 2) * 8                          # 10 matrices quantised, 8 bytes of scales each


def test_the_same_format_named_explicitly_keeps_the_checkpoints_scheme():
    m = replace(load_model("llama-3.1-8b"), quantization=parse_hf_quant_config(MODELOPT_FP8, "h"))
    assert sized(m, "fp8")[1].total_bytes == sized(m)[1].total_bytes
    assert sized(m, "awq")[0].scheme.method == ""               # another format: sizer's defaults for it


def test_fp8_block_scales_are_output_rows_by_input_columns():
    # vLLM's weight_block_size is [block_n, block_k]: 2 x 4 = 8 blocks of 64 x 128 for a 256-in, 128-out matrix
    m = replace(load_model("llama-3.1-8b"), quantization=parse_quantization(
        {"quant_method": "fp8", "weight_block_size": [64, 128]}, "c"))
    fmt, _ = weight_format(m, "auto", 128)
    assert scale_bytes(LinearGroup("x", "mlp", 256, 128, 1), fmt, 128) == 2 * 2 * 4


@pytest.mark.parametrize(("module", "architecture", "pattern", "share"), [
    # a pattern naming layer 0 leaves layer 1 of 2 quantised (share 0.5); one naming every layer leaves none
    ("self_attn.q_proj", "NemotronHForCausalLM", "backbone.layers.0.mixer.q_proj", 0.5),    # NemotronH: mixer.*
    ("mixer.in_proj", "NemotronHForCausalLM", "backbone.layers.0.mixer.in_proj", 0.5),
    ("linear_attn.in_proj_qkvz", "Qwen3_5MoeForConditionalGeneration", "model.language_model.layers.0.linear_attn*",
     0.5),
    ("linear_attn.in_proj_qkvz", "Qwen3NextForCausalLM", "model.layers.0.linear_attn.in_proj_qkv", 0.5),   # split
    ("mlp.shared_experts.down_proj", "Qwen3NextForCausalLM", "*.mlp.shared_expert.*", 0.0),
    ("mlp.shared_experts.gate_up_proj", "Llama4ForConditionalGeneration",
     "language_model.model.layers.0.feed_forward.shared_expert.gate_proj", 0.5),
    ("mlp.experts.down_proj", "MixtralForCausalLM", "re:model\\.layers\\.0\\.mlp\\.experts\\.0\\..*", 0.5),
    ("self_attn.o_proj", "GptOssForCausalLM", "model.layers.*.self_attn", 0.0),  # a parent module takes its children
    ("self_attn.o_proj", "LlamaForCausalLM", "model.layers.1.mlp*", 1.0),
])
def test_checkpoint_spellings_match(module, architecture, pattern, share):
    assert quantised_share(module, (0, 1), (pattern,), (), architecture) == share


def test_spellings_split_fused_matrices_and_index_experts():
    assert spellings("mlp.experts.gate_up_proj", "X") == (
        "mlp.experts.gate_up_proj", "mlp.experts.0.gate_up_proj", "mlp.experts.gate_proj", "mlp.experts.0.gate_proj",
        "mlp.experts.up_proj", "mlp.experts.0.up_proj")
    # Gemma-4: the dense MLP beside the experts is `mlp`, the experts sit on the layer
    assert spellings("mlp.shared_experts.down_proj", "Gemma4ForConditionalGeneration") == ("mlp.down_proj",)
    assert spellings("mlp.experts.down_proj", "Gemma4ForConditionalGeneration") == (
        "experts.down_proj", "experts.0.down_proj")
    # a plain name does not reach into a sibling: Kimi's dense-MLP regex leaves the experts alone
    assert quantised_share("mlp.experts.down_proj", (3,), (r"re:.*mlp\.(gate|up|gate_up|down)_proj.*",), (), "X") == 1


def _groups_refusal(m, requested: str, tp: int, ep: bool = False, group_size: int = 128):
    fmt, group = weight_format(m, requested, group_size)
    with pytest.raises(InputError) as err:
        validate_groups(m, ParallelConfig(tp=tp, expert_parallel=ep), fmt, group, "s.yaml")
    return err.value


def _groups_pass(m, requested: str, tp: int, ep: bool = False, group_size: int = 128) -> None:
    fmt, group = weight_format(m, requested, group_size)
    validate_groups(m, ParallelConfig(tp=tp, expert_parallel=ep), fmt, group, "s.yaml")


def test_a_split_that_cuts_a_scale_group_is_refused():
    # vLLM's AWQ/GPTQ layers need each GPU's inputs of a matrix to be whole groups. Qwen2.5-72B's MLP is 29,568
    # wide: at TP 4 a GPU's down_proj inputs are 7,392 = 57.75 x 128; at TP 8 3,696 = 28.875 x 128
    m = load_model("qwen2.5-72b")
    for tp, inputs in ((4, "7,392"), (8, "3,696")):
        err = _groups_refusal(m, "awq", tp)
        assert err.field == "deployment.tensor_parallel_size"
        assert f"{inputs} inputs a GPU (29,568 / TP {tp})" in str(err)
    _groups_pass(m, "awq", 1)
    # Qwen/Qwen2.5-72B-Instruct-AWQ pads the MLP to 29,696 = 232 x 128 for this: 3,712 = 29 x 128 a GPU at TP 8
    _groups_pass(replace(m, layers=tuple(replace(layer, ffn=replace(layer.ffn, width=29_696)) for layer in m.layers)),
                 "awq", 8)
    # Llama-3.1-70B's 28,672 / 8 = 3,584 = 28 x 128: fits; per-channel GPTQ (-1) has no groups to cut
    _groups_pass(load_model("llama-3.1-70b"), "awq", 8)
    _groups_pass(m, "gptq", 8, group_size=-1)


def test_experts_cut_by_tp_are_refused_and_kept_whole_by_ep():
    # Qwen3-235B-A22B's experts are 1,536 wide: sliced over TP 8 a GPU holds 192 inputs of each down_proj, 1.5
    # groups; spread whole over 8 GPUs (expert parallel) each keeps 12 whole groups
    m = load_model("qwen3-235b-a22b")
    err = _groups_refusal(m, "gptq", 8)
    assert "mlp.experts.down_proj would hold 192 inputs" in str(err) and "enable_expert_parallel" in str(err)
    _groups_pass(m, "gptq", 8, ep=True)
    _groups_pass(m, "gptq", 4)                  # 384 = 3 x 128


def test_a_stated_group_size_that_divides_no_matrix_is_named():
    # 4,096 inputs of Llama-3.1-8B's q_proj are not whole groups of 7 at any TP: the group size is what is wrong
    err = _groups_refusal(load_model("llama-3.1-8b"), "awq", 1, group_size=7)
    assert err.field == "deployment.quantization_group_size"
    assert "4,096 inputs a GPU, not whole awq groups of 7" in str(err)


def test_a_split_that_cuts_an_fp8_block_is_refused():
    # Qwen/Qwen3-32B-FP8 stores [128, 128] blocks; its MLP is 25,600 wide. vLLM's row-parallel down_proj needs
    # input_size_per_partition % block_k == 0: at TP 8 a GPU holds 3,200 = 25 x 128 inputs; at TP 16 1,600 = 12.5 x 128
    m = load_model("Qwen/Qwen3-32B-FP8")
    assert m.quantization.block_size == (128, 128)
    _groups_pass(m, "auto", 8)
    err = _groups_refusal(m, "auto", 16)
    assert err.field == "deployment.tensor_parallel_size"
    assert "mlp.down_proj would hold 1,600 inputs a GPU (25,600 / TP 16), not whole 128x128 FP8 blocks" in str(err)
    assert "Weight input_size_per_partition = 1600 is not divisible by weight quantization block_k = 128" in str(err)
    _groups_pass(m, "auto", 1)                  # nothing is split
    # sized as another format (--weights bf16) the checkpoint's blocks are not what is loaded
    _groups_pass(m, "bf16", 16)


def test_fp8_experts_cut_by_tp_are_refused_and_kept_whole_by_ep():
    # Qwen/Qwen3-30B-A3B-FP8's experts are 768 wide: sliced over TP 2 a GPU holds 384 = 3 x 128 of gate and of up; over
    # TP 4 192 = 1.5 x 128 (vLLM's Fp8MoEMethod: "The output_size of gate's and up's weight = 192 is not divisible by
    # weight quantization block_n = 128"); spread whole over 4 GPUs (expert parallel) each expert keeps 768 = 6 x 128
    m = load_model("Qwen/Qwen3-30B-A3B-FP8")
    _groups_pass(m, "auto", 2)
    err = _groups_refusal(m, "auto", 4)
    assert err.field == "deployment.tensor_parallel_size"
    assert "mlp.experts.gate_up_proj would hold 192 outputs of gate and of up each a GPU (768 / TP 4)" in str(err)
    assert "The output_size of gate's and up's weight = 192" in str(err) and "enable_expert_parallel" in str(err)
    _groups_pass(m, "auto", 4, ep=True)
    # Qwen/Qwen3-235B-A22B-FP8's 1,536-wide experts: 192 a GPU at TP 8 too; 384 at TP 4
    m = load_model("Qwen/Qwen3-235B-A22B-FP8")
    assert "192 outputs" in str(_groups_refusal(m, "auto", 8))
    _groups_pass(m, "auto", 4)
    _groups_pass(m, "auto", 8, ep=True)


def test_deepseek_r1_fp8_splits_into_whole_blocks_up_to_tp_16():
    # DeepSeek-R1 ([128, 128]): 128 heads. At TP 8 a GPU holds q_b_proj's 24,576 / 8 = 3,072 = 24 x 128 outputs,
    # kv_b_proj's 32,768 / 8 = 4,096 = 32 x 128, o_proj's 16,384 / 8 = 2,048 = 16 x 128 inputs, the dense down_proj's
    # 18,432 / 8 = 2,304 = 18 x 128, the experts' and the shared expert's 2,048 / 8 = 256 = 2 x 128. At TP 16: 1,536,
    # 2,048, 1,024, 1,152 = 9 x 128 and 128. At TP 32 the dense MLP's 576 = 4.5 x 128 is cut, expert parallel or not.
    # q_a_proj (7,168 -> 1,536) and kv_a_proj_with_mqa (7,168 -> 576 = 4.5 x 128) are whole on every GPU (vLLM's
    # ReplicatedLinear): not checked
    m = load_model("deepseek-ai/DeepSeek-R1")
    for tp in (8, 16):
        _groups_pass(m, "auto", tp)
        _groups_pass(m, "auto", tp, ep=True)
    for ep in (False, True):
        assert "mlp.down_proj would hold 576 inputs a GPU (18,432 / TP 32)" in str(_groups_refusal(m, "auto", 32, ep))


def test_fp8_single_column_matrices_are_checked_and_merged_ones_let_through():
    # DeepSeek-R1 cut to 8 heads: at TP 8 one head a GPU, q_b_proj's 8 x 192 = 1,536 / 8 = 192 outputs = 1.5 x 128
    # (a ColumnParallelLinear of one output: "Weight output_partition_size = 192 is not divisible by ... block_n")
    r1 = load_model("deepseek-ai/DeepSeek-R1")
    few = replace(r1, layers=tuple(replace(layer, mixer=replace(layer.mixer, num_heads=8)) for layer in r1.layers))
    err = _groups_refusal(few, "auto", 8)
    assert "self_attn.q_b_proj would hold 192 outputs a GPU (1,536 / TP 8)" in str(err)
    assert "Weight output_partition_size = 192 is not divisible by weight quantization block_n = 128" in str(err)
    # Qwen3-32B-FP8 with 64-wide heads at TP 8: o_proj 64 x 64 = 4,096 / 8 = 512 inputs = 4 x 128; the merged
    # qkv_proj's k and v hold one 64-wide KV head a GPU, half a block, which vLLM's Fp8Config lets through
    # (ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch): not refused
    q = load_model("Qwen/Qwen3-32B-FP8")
    narrow = replace(q, layers=tuple(replace(layer, mixer=replace(layer.mixer, head_dim=64)) for layer in q.layers))
    _groups_pass(narrow, "auto", 8)
