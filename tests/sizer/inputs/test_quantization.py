"""quantization_config and hf_quant_config.json read into one typed Quantization, as vLLM reads them.

Real configs (tests/data/models/<id>/, byte copies; sources in that folder's README.md and
facts.yaml): RedHatAI Llama-4-Scout FP8-dynamic (compressed-tensors, 449-entry ignore list),
moonshotai Kimi-K2.5 (compressed-tensors W4A16, group 32, "re:" ignores), nvidia Qwen3-30B-A3B-NVFP4
and DeepSeek-V3-0324-NVFP4 (ModelOpt hf_quant_config.json), RedHatAI DeepSeek-V4-Flash (mixed
precision). The others are minimal configs in the shape llm-compressor, ModelOpt, AutoAWQ and
AutoFP8 write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizer.inputs.quantization import parse_hf_quant_config, parse_quantization
from validation.errors import FieldError

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"


def real(model_id: str, file: str = "config.json") -> dict:
    return json.loads((MODELS / model_id / file).read_text())


def test_llm_compressor_fp8_dynamic_per_channel_with_its_ignore_list():
    q = parse_quantization(real("llama-4-scout-17b-16e-instruct-fp8-dynamic")["quantization_config"], "c.json")
    # weights: num_bits 8, type float, strategy channel; input_activations: float 8, dynamic, strategy token
    assert (q.method, q.format, q.bits, q.scales, q.activations, q.static_activations) == (
        "compressed-tensors", "fp8", 8, "channel", "fp8", False)
    assert q.scale_bytes == 2                        # no scale_dtype: the checkpoint's bf16
    assert len(q.ignore) == 449 and q.ignore[-1] == "language_model.lm_head" and q.targets == ()


def test_kimi_w4a16_group_32_with_regex_ignores():
    q = parse_quantization(real("kimi-k2.5")["text_config"]["quantization_config"], "c.json")
    assert (q.format, q.bits, q.scales, q.group_size, q.zero_points, q.weight_only) == (
        "gptq", 4, "group", 32, False, True)         # symmetric: scales only, no zeros
    assert "re:.*self_attn.*" in q.ignore


@pytest.mark.parametrize(("model_id", "excluded"), [("qwen3-30b-a3b-nvfp4", 49), ("deepseek-v3-0324-nvfp4", 245)])
def test_modelopt_nvfp4_sidecars(model_id, excluded):
    q = parse_hf_quant_config(real(model_id, "hf_quant_config.json"), "hf_quant_config.json")
    assert (q.method, q.format, q.group_size, q.scale_bytes, q.activations, q.source) == (
        "modelopt", "nvfp4", 16, 1, "fp4", "hf_quant_config.json")
    assert len(q.ignore) == excluded


def test_mixed_precision_is_named_not_guessed():
    q = parse_quantization(real("deepseek-v4-flash-nvfp4-fp8-redhatai")["quantization_config"], "c.json")
    assert q.format == "" and "mixed precision" in q.why_not


@pytest.mark.parametrize(("config", "expected"), [
    # compressed-tensors W8A8 FP8, static per-tensor (strategy tensor, dynamic false): an input scale per matrix
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}}}},
     ("fp8", "tensor", "fp8", True)),
    # the same without quant_method (config_groups say what it is, as vLLM's parser accepts it)
    ({"config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                                    "input_activations": {"num_bits": 8, "type": "float", "dynamic": False}}}},
     ("fp8", "tensor", "fp8", True)),
    # W8A16 FP8: no input_activations, weight-only
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
                                                                                 "strategy": "channel"}}}},
     ("fp8", "channel", "16-bit", False)),
    # NVFP4 W4A4 from llm-compressor
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"},
        "input_activations": {"num_bits": 4, "type": "float", "group_size": 16, "dynamic": "local"}}}},
     ("nvfp4", "group", "fp4", True)),
    # W8A8 INT8, dynamic per token
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
        "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}}}},
     ("int8", "channel", "int8", False)),
    # AutoFP8 / vLLM Fp8Config: static activations, block scales
    ({"quant_method": "fp8", "activation_scheme": "static"}, ("fp8", "tensor", "fp8", True)),
    ({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
     ("fp8", "block", "fp8", False)),
    # ModelOpt in config.json
    ({"quant_method": "modelopt", "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}, ("fp8", "channel", "fp8", False)),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, ("awq", "group", "16-bit", False)),
    ({"quant_method": "gptq_marlin", "bits": 4, "group_size": -1}, ("gptq", "channel", "16-bit", False)),
])
def test_schemes(config, expected):
    q = parse_quantization(config, "c.json")
    assert (q.format, q.scales, q.activations, q.static_activations) == expected


def test_kv_cache_format_stated_by_the_checkpoint():
    q = parse_hf_quant_config(real("qwen3-30b-a3b-nvfp4", "hf_quant_config.json"), "h.json")
    assert q.kv_cache == "fp8"                        # "kv_cache_quant_algo": "FP8"
    ct = parse_quantization({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"},
                             "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}, "c.json")
    assert ct.kv_cache == "fp8"


@pytest.mark.parametrize(("config", "why"), [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quant_method 'bitsandbytes' is not modelled"),
    # MIXED_PRECISION without its per-layer map: nothing says which layer is in which format
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}, "MIXED_PRECISION with its quantized_layers map"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.down_proj": {"quant_algo": "INT4_AWQ"}}},
     "quantized_layers: ModelOpt quant_algo 'INT4_AWQ'"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128},
        "input_activations": {"num_bits": 8, "type": "int"}}}}, "4-bit int with int8 activations"),
])
def test_unmodelled_schemes_say_why(config, why):
    q = parse_quantization(config, "c.json")
    assert q.format == "" and why in q.why_not


@pytest.mark.parametrize(("config", "field"), [
    ({"quant_method": "compressed-tensors", "ignore": ["re:(unclosed"]}, "quantization_config.ignore[0]"),
    ({"quant_method": "modelopt", "exclude_modules": "lm_head"}, "quantization_config.exclude_modules"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
      "strategy": "block", "block_structure": [128]}}}}, "quantization_config.config_groups.g.weights.block_structure"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": "Linear"}}},
     "quantization_config.config_groups.g.targets"),
    # each pattern is tried on every layer's matrices: 100,000 took 8 s on a 32-layer model, a 16 MiB list minutes
    ({"quant_method": "fp8", "ignored_layers": ["m"] * 10_001}, "quantization_config.ignore"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["re:.*q_proj"] * 10_001, "weights": {
      "num_bits": 8, "type": "float", "strategy": "channel"}}}}, "quantization_config.config_groups.targets"),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"type": "float"}},
     "quantization_config.kv_cache_scheme.num_bits"),
])
def test_bad_keys_name_their_field(config, field):
    with pytest.raises(FieldError) as err:
        parse_quantization(config, "c.json")
    assert err.value.field == field


def test_hf_quant_config_without_its_quantization_section():
    with pytest.raises(FieldError) as err:
        parse_hf_quant_config({"producer": {"name": "modelopt"}}, "hf_quant_config.json")
    assert err.value.field == "quantization"
