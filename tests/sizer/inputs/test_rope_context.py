"""The longest context vLLM serves a model at, from its RoPE scaling (vllm/config/model.py, _get_and_verify_max_len):
max_position_embeddings x factor, from original_max_position_embeddings for yarn; llama3, longrope and Gemma-3 not
scaled again. Other engines keep max_position_embeddings (their rules are not modelled)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizer.inputs.model_spec import from_hf_config
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.check import _model_limit
from sizer.sizing.resolve import resolve
from validation.errors import FieldError

CATALOG = Path(__file__).resolve().parents[3] / "sizer" / "inputs" / "catalog" / "models"
# Qwen3's model card: "add the rope_scaling fields to config.json" for 131,072 tokens with YaRN
QWEN_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def _config(name: str, **changes) -> dict:
    c = json.loads((CATALOG / f"{name}.json").read_text())
    c.pop("_sizer", None)
    return {**c, **changes}


def test_yarn_counts_from_the_original_context():
    # Qwen3-8B states max_position_embeddings 40,960; vLLM derives 32,768 x 4 = 131,072
    assert from_hf_config(_config("qwen3-8b"), "q").rope_scaled_positions == 0
    assert from_hf_config(_config("qwen3-8b", rope_scaling=QWEN_YARN), "q").rope_scaled_positions == 131_072


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "gemma-3-27b", "kimi-k2.5"])
def test_shipped_scalings_are_the_stated_context(name):
    # llama3 type (Llama-3.1) is not scaled again; DeepSeek-V3's yarn 4,096 x 40 = 163,840, gpt-oss 4,096 x 32 =
    # 131,072, Kimi-K2.5 4,096 x 64 = 262,144: each its max_position_embeddings; Gemma-3's linear factor 8 is
    # counted in its 131,072 already (vLLM skips gemma3)
    assert from_hf_config(_config(name), name).rope_scaled_positions == 0


def test_dynamic_and_per_layer_type_scalings():
    # dynamic NTK factor 2 on Llama-3.1-8B's 131,072: 262,144; transformers v5's rope_parameters per layer type,
    # one factor for all (vLLM's assumption), yarn in the full-attention set
    dynamic = _config("llama-3.1-8b", rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    assert from_hf_config(dynamic, "d").rope_scaled_positions == 262_144
    per_layer = _config("qwen3-8b", rope_parameters={"full_attention": {**QWEN_YARN, "rope_theta": 1e6},
                                                     "sliding_attention": {"rope_type": "default"}})
    assert from_hf_config(per_layer, "p").rope_scaled_positions == 131_072


def _data(engine: str, max_model_len: int | None = None) -> dict:
    deployment = {"engine": engine} | ({"max_model_len": max_model_len} if max_model_len else {})
    return {"model": {"name": "qwen3-8b", "overrides": {"rope_scaling": QWEN_YARN}}, "hardware": "h100-sxm",
            "deployment": deployment,
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 100}}}


def _scenario(engine: str, max_model_len: int | None = None):
    return scenario_from_dict(_data(engine, max_model_len), "s.yaml")


def test_vllm_serves_the_scaled_context_other_engines_the_stated_one():
    r = resolve(_scenario("vllm"))
    assert r.engine.max_model_len == 131_072
    assert r.engine.sources["max_model_len"] == "model (rope_scaling context under vLLM)"
    assert resolve(_scenario("sglang")).engine.max_model_len == 40_960
    with pytest.raises(FieldError) as err:
        resolve(_scenario("sglang", 131_072))
    assert (err.value.field, err.value.message) == ("deployment.max_model_len",
                                                    "131072 exceeds the model's max_position_embeddings 40,960")
    with pytest.raises(FieldError) as err:
        resolve(_scenario("vllm", 131_073))
    assert err.value.message == ("131073 exceeds the model's rope_scaling context under vLLM 131,072 "
                                 "(max_position_embeddings 40,960 scaled)")


def test_check_judges_max_model_len_by_the_engines_limit():
    # `sizer check`'s max_model_len rule: 131,072 within vLLM's scaled context, beyond SGLang's 40,960
    assert _model_limit(_data("vllm", 131_072), "s.yaml").tokens == 131_072
    sglang = _model_limit(_data("sglang", 131_072), "s.yaml")
    assert (sglang.tokens, sglang.described) == (40_960, "max_position_embeddings 40,960")


def test_malformed_scalings_are_refused_at_their_key():
    for scaling, field in [({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 10**400},
                            "rope_scaling.original_max_position_embeddings"),      # was an OverflowError
                           ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "32k"},
                            "rope_scaling.original_max_position_embeddings"),
                           ({"rope_type": "dynamic", "factor": 0}, "rope_scaling.factor"),
                           ({"rope_type": "linear", "factor": True}, "rope_scaling.factor")]:
        with pytest.raises(FieldError) as err:
            from_hf_config(_config("qwen3-8b", rope_scaling=scaling), "bad", "config.json")
        assert err.value.field == field


def test_yarn_takes_the_top_level_original_length_first_else_its_own_else_the_stated_context():
    # transformers v5 (standardize_rope_params) and vLLM (patch_rope_parameters) read a top-level
    # original_max_position_embeddings first: 32,768 x 4 = 131,072; without any, max_position_embeddings 40,960 x 4
    top = _config("qwen3-8b", rope_scaling={"rope_type": "yarn", "factor": 4.0},
                  original_max_position_embeddings=32768)
    assert from_hf_config(top, "t").rope_scaled_positions == 131_072
    assert from_hf_config(_config("qwen3-8b", rope_scaling={"rope_type": "yarn", "factor": 4.0}),
                          "n").rope_scaled_positions == 163_840
    assert from_hf_config(_config("qwen3-8b", rope_scaling={**QWEN_YARN, "original_max_position_embeddings": 32768.0}),
                          "f").rope_scaled_positions == 131_072       # a whole float, read as an integer


def test_longrope_serves_its_original_length_by_default():
    # Phi-3-mini-128k-instruct: longrope, max_position_embeddings 131,072, original_max_position_embeddings 4,096;
    # vLLM's default max_model_len is the original 4,096 ("to avoid performance degradation for shorter sequences"),
    # its limit stays 131,072
    phi = _config("qwen3-8b", max_position_embeddings=131072, original_max_position_embeddings=4096,
                  rope_scaling={"rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0]})
    m = from_hf_config(phi, "phi")
    assert (m.rope_scaled_positions, m.rope_default_positions) == (0, 4096)
    data = _data("vllm")
    data["model"]["overrides"] = {k: phi[k] for k in ("max_position_embeddings", "original_max_position_embeddings",
                                                      "rope_scaling")}
    data["workload"]["prompt_tokens"] = {"distribution": "fixed", "value": 1000}
    r = resolve(scenario_from_dict(data, "s.yaml"))
    assert r.engine.max_model_len == 4096
    assert r.engine.sources["max_model_len"] == "model (vLLM's default for LongRoPE: original_max_position_embeddings)"
    data["deployment"]["max_model_len"] = 131_072
    assert resolve(scenario_from_dict(data, "s.yaml")).engine.max_model_len == 131_072


def test_a_request_beyond_the_scaled_context_names_it():
    data = _data("vllm")
    data["workload"]["prompt_tokens"] = {"distribution": "fixed", "value": 140_000}
    with pytest.raises(FieldError) as err:
        resolve(scenario_from_dict(data, "s.yaml"))
    assert err.value.message.startswith("expected prompt + output within deployment.max_model_len 131,072 (the "
                                        "model's rope_scaling context under vLLM), got 140,000 + 100")
