"""Families sizer reads whose config.json no public repository holds verbatim (the Hugging Face files are gated or
were not found copied anywhere): each config is built here from the few keys that shape the count, with the values
the model's Hugging Face config.json states, as the source in each test's comment gives them. Not a fixture: no
invented "real" file. Parameters are held to the published figure (3%) and to the hand count written out; KV bytes
per token exactly."""

from __future__ import annotations

import pytest

from sizer.analytic.memory import kv_layout
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import parameter_count
from sizer.inputs.layers import DenseFFN
from sizer.inputs.model_spec import from_hf_config

# swiss-ai/Apertus-8B-2509 config.json, the keys that shape the count (as transformers' ApertusConfig and vLLM's
# models/apertus.py read them): a Llama-shaped decoder whose MLP is up_proj and down_proj around xIELU (no gate) and
# whose attention has q_norm / k_norm over each head
APERTUS_8B = {
    "architectures": ["ApertusForCausalLM"], "model_type": "apertus", "hidden_size": 4096, "intermediate_size": 21504,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072,
    "tie_word_embeddings": False, "hidden_act": "xielu", "mlp_bias": False, "attention_bias": False,
    "post_norm": False, "qk_norm": True, "rope_theta": 12000000, "max_position_embeddings": 65536,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0},
}


def test_apertus_mlp_has_no_gate_and_its_heads_a_qk_norm():
    m = from_hf_config(APERTUS_8B, "apertus-8b")
    assert m.layers[0].ffn == DenseFFN(21504, gated=False) and m.attention.qk_norm
    # embedding + lm_head 2 x 131,072 x 4,096 = 1,073,741,824; a layer: q and o 4,096 x 4,096 each, k and v
    # 4,096 x 1,024 each (41,943,040), up and down 4,096 x 21,504 each (176,160,768), two norms of 4,096 and the
    # q / k norms of 128 each (8,448): 218,112,256; x 32 = 6,979,592,192; the final norm 4,096: 8,053,338,112
    # (with a gate and no q / k norms, as counted before: 10,871,902,208)
    counts = parameter_count(m)
    assert counts.total == 8_053_338_112
    # Apertus model card (swiss-ai/Apertus-8B-2509): "Apertus is a 70B and 8B parameter language model"
    assert counts.total == pytest.approx(8e9, rel=0.03)
    # KV per token: 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 131,072 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 131_072
