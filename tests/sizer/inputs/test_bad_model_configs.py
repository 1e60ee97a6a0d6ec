"""A malformed config.json gives one line naming the key and exit 2, never a traceback."""

import json

import pytest
from typer.testing import CliRunner

from sizer.analytic.weights import parameter_count
from sizer.cli import app
from sizer.inputs.config_keys import (
    DENSE_TYPES,
    GATED_ATTENTION_TYPES,
    MODEL_TYPES,
    MOE_TYPES,
    NON_GATED_MLP_TYPES,
    PARALLEL_BLOCK_TYPES,
    PER_SHARED_EXPERT_WIDTH_TYPES,
    QK_NORM_ACROSS_HEADS_TYPES,
    QK_NORM_TYPES,
    SINK_TYPES,
    TIED_EMBEDDING_TYPES,
)
from sizer.inputs.model_spec import from_hf_config

GOOD = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 4096}

BAD = [
    ({"hidden_size": 4}, "hidden_size"),                       # 4 / 8 heads: no head dimension
    ({"hidden_size": "big"}, "hidden_size"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),       # does not divide 8 heads
    ({"vocab_size": 0}, "vocab_size"),
    ({"intermediate_size": 0}, "intermediate_size"),
    ({"head_dim": "abc"}, "head_dim"),
    ({"sliding_window": "x"}, "sliding_window"),
    ({"quantization_config": "fp8"}, "quantization_config"),
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": 128}},
     "quantization_config.weight_block_size"),
    ({"num_local_experts": 8}, "num_experts_per_tok"),         # MoE without top-k
    ({"layer_types": ["full_attention"]}, "layer_types"),      # 1 entry for 4 layers
    # each of these was planned as the dense Llama its other keys describe
    ({"model_type": "mamba"}, "model_type"),                   # a family sizer does not place layers for
    ({"model_type": "t5", "is_encoder_decoder": True}, "is_encoder_decoder"),
    ({"add_cross_attention": True}, "add_cross_attention"),
    ({"torch_dtype": "int4"}, "torch_dtype"),                  # was sized as bf16
    ({"torch_dtype": "float128"}, "torch_dtype"),
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    # vLLM's and transformers' Llama ignore expert keys: was sized as a Mixtral
    ({"num_local_experts": 8, "num_experts_per_tok": 2}, "num_local_experts"),
]


@pytest.mark.parametrize("change,key", BAD, ids=[k for _, k in BAD])
def test_bad_config_names_the_key(tmp_path, change, key):
    (tmp_path / "config.json").write_text(json.dumps({**GOOD, **change}))
    result = CliRunner().invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "h100"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f": {key}:" in lines[0], result.stderr


def test_text_config_must_be_an_object(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["X"], "text_config": 5}))
    result = CliRunner().invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "h100"])
    assert result.exit_code == 2 and "text_config" in result.stderr


@pytest.mark.parametrize("model_type", ["granite", None])
def test_a_decoder_of_a_family_sizer_was_not_checked_on_is_read_and_said_so(model_type):
    # a Llama-shaped config under another decoder's model_type (or none): read from its keys, as the Llama it
    # states (the same parameters to the parameter), with a note naming the family; a Mamba's is refused (above)
    config = {k: v for k, v in GOOD.items() if k != "model_type"} | ({"model_type": model_type} if model_type else {})
    m, llama = from_hf_config(config, "x"), from_hf_config(GOOD, "x")
    assert parameter_count(m).total == parameter_count(llama).total
    named = f"model_type '{model_type}' is not a family" if model_type else "no model_type: not a family"
    assert [n for n in m.notes if "a family sizer was checked on" in n] == [
        f"{named} sizer was checked on (docs/models.md): its layers are read from the config's keys as attention "
        "and MLP (or expert) blocks; a key that would change them is refused"]
    assert not [n for n in llama.notes if "a family sizer was checked on" in n]


def test_the_family_rules_name_only_model_types_sizer_reads():
    # a rule for a model_type outside MODEL_TYPES would name a family sizer notes as unchecked; the prefixes (qwen3,
    # gemma3) name families too
    assert {*GATED_ATTENTION_TYPES, *QK_NORM_TYPES, *SINK_TYPES, *NON_GATED_MLP_TYPES, *PARALLEL_BLOCK_TYPES,
            *PER_SHARED_EXPERT_WIDTH_TYPES, *QK_NORM_ACROSS_HEADS_TYPES, *TIED_EMBEDDING_TYPES} <= set(MODEL_TYPES)
    assert not set(DENSE_TYPES) & set(MOE_TYPES) and len(set(MODEL_TYPES)) == len(MODEL_TYPES)
