"""A malformed config.json gives one line naming the key and exit 2, never a traceback."""

import json

import pytest
from typer.testing import CliRunner

from sizer.cli import app

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
