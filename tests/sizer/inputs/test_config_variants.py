"""Unusual but real config.json shapes that must be read as vLLM reads them (found probing the reader).

The base is the catalog's Llama-3.1-8B config (tests/bad_inputs/config/experts-on-llama.json without its expert
keys): 32 layers, 32 heads, 8 KV heads of 128, so a full-attention layer caches 2 x 8 x 128 values a token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizer.inputs.model_spec import from_hf_config
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
BASE = {k: v for k, v in json.loads((ROOT / "tests/bad_inputs/config/experts-on-llama.json").read_text()).items()
        if k not in ("num_local_experts", "num_experts_per_tok")}
LLAMA3_ROPE = BASE["rope_scaling"]


def model(**changes):
    return from_hf_config({**BASE, **changes}, name="t", file="config.json")


def test_transformers_v5_rope_parameters_hold_rope_theta():
    # transformers v5 writes rope_theta inside rope_parameters; the top-level key is gone (or null)
    m = model(rope_theta=None, rope_scaling=None, rope_parameters={**LLAMA3_ROPE, "rope_theta": 500000.0})
    assert m.rope_theta == 500000.0 and m.rope_scaled_positions == 0      # llama3: the context counts the scaling
    per_type = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    assert model(rope_theta=None, rope_scaling=None, rope_parameters=per_type).rope_theta == 1e6   # the first set's
    with pytest.raises(FieldError) as err:
        model(rope_theta=None, rope_scaling=None, rope_parameters={"rope_type": "default", "rope_theta": -1})
    assert err.value.field == "rope_parameters.rope_theta"


def test_a_null_factor_is_no_factor():
    # default RoPE needs none; linear needs one (transformers' rope_config_validation: required keys)
    assert model(rope_scaling={"rope_type": "default", "factor": None}).rope_scaled_positions == 0
    for rope in ({"rope_type": "linear"}, {"rope_type": "yarn", "factor": None}):
        with pytest.raises(FieldError) as err:
            model(rope_scaling=rope)
        assert err.value.field == "rope_scaling.factor"


def test_use_sliding_window_false_switches_the_window_off_in_any_family():
    # vLLM's ModelConfig.get_hf_config_sliding_window: use_sliding_window false -> no window, whatever the family;
    # a Mistral-style window of 4096 under a 131,072 context otherwise slides every layer
    assert model(sliding_window=4096).num_sliding_layers == 32
    assert model(sliding_window=4096, use_sliding_window=False).num_sliding_layers == 0


def test_a_wrapper_stating_hidden_size_beside_text_config_reads_text_config():
    # vLLM's get_hf_text_config takes text_config whenever there is one; the top-level hidden_size agrees
    wrapper = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "hidden_size": 4096,
               "text_config": BASE}
    m = from_hf_config(wrapper, name="t", file="config.json")
    assert (m.hidden_size, m.num_layers, m.num_kv_heads, m.head_dim) == (4096, 32, 8, 128)


@pytest.mark.parametrize("value", [None, 0, 2])
def test_a_top_k_on_a_dense_llama_is_noted_not_ignored(value):
    # vLLM's LlamaForCausalLM reads no expert key; the plan names it (null and 0 too: read, and said so)
    m = model(num_experts_per_tok=value)
    assert not m.is_moe
    shown = "null" if value is None else str(value)
    assert any(f"num_experts_per_tok = {shown}" in n and "LlamaForCausalLM reads none of them" in n for n in m.notes)
