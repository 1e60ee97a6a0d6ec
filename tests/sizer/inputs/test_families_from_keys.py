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
from sizer.inputs.layers import FULL, SLIDING, Attention, DenseFFN
from sizer.inputs.model_spec import from_hf_config
from validation.errors import FieldError

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


# LGAI-EXAONE/EXAONE-4.0-32B config.json, the keys that shape the count: 64 layers, local (sliding-window) attention
# and global attention 3:1, stated twice: layer_types (sliding x 3 then full, repeated) and the letters "LLLG"
EXAONE_4_32B = {
    "architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "hidden_size": 5120, "intermediate_size": 27392,
    "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 102400, "tie_word_embeddings": False, "sliding_window": 4096, "sliding_window_pattern": "LLLG",
    "layer_types": ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(64)],
    "max_position_embeddings": 131072, "rope_theta": 1000000,
}


def test_exaone4_reads_its_pattern_of_letters_and_its_qk_norms():
    m = from_hf_config(EXAONE_4_32B, "exaone-4.0-32b")
    spans = [a.span for a in m.mixers(Attention)]
    assert spans == [FULL if i % 4 == 3 else SLIDING for i in range(64)] and m.num_sliding_layers == 48
    assert m.attention.qk_norm and m.mixers(Attention)[0].window_tokens == 4096
    # a layer: q and o 5,120 x 5,120 each, k and v 5,120 x 1,024 each (62,914,560), gate, up and down 3 x 5,120 x
    # 27,392 (420,741,120), two norms of 5,120 and q / k norms of 128 each (10,496): 483,666,176; x 64 =
    # 30,954,635,264; the final norm 5,120: 30,954,640,384; embedding + lm_head 2 x 102,400 x 5,120 = 1,048,576,000
    counts = parameter_count(m)
    embeddings = 2 * 102_400 * 5_120
    assert counts.total == 30_954_640_384 + embeddings
    # EXAONE-4.0-32B model card: "Number of Parameters (without embeddings): 30.95B"
    assert counts.total - embeddings == pytest.approx(30.95e9, rel=0.03)
    # KV per token: 2 (K, V) x 64 layers x 8 KV heads x 128 head dim x 2 bytes = 262,144 B, windows aside
    kv = kv_layout(m, "bf16", ParallelConfig())
    assert kv.bytes_per_token == 262_144
    # a 32,768-token sequence: the 16 global layers keep every token (16 x 4,096 B a token), the 48 local ones their
    # 4,096-token window: 16 x 4,096 x 32,768 + 48 x 4,096 x 4,096 = 2,952,790,016 B
    assert kv.kept_bytes(32_768) == 16 * 4_096 * 32_768 + 48 * 4_096 * 4_096 == 2_952_790_016


def test_a_pattern_of_letters_places_the_layers_without_layer_types():
    # no layer_types: layer i takes letter i mod 4, and the last layer is global whatever its letter (TensorRT-LLM's
    # check_is_sliding): "LLGL" over 6 layers is L L G L L, then G for the last (its letter L)
    config = {**EXAONE_4_32B, "num_hidden_layers": 6, "sliding_window_pattern": "LLGL"}
    del config["layer_types"]
    spans = [a.span for a in from_hf_config(config, "x").mixers(Attention)]
    assert spans == [SLIDING, SLIDING, FULL, SLIDING, SLIDING, FULL]
    # an integer is Gemma 3's and Cohere2's: every 4th layer global, as "LLLG" over 64 layers
    by_int = from_hf_config({**EXAONE_4_32B, "sliding_window_pattern": 4}, "x")
    assert [a.span for a in by_int.mixers(Attention)] == [a.span for a in from_hf_config(EXAONE_4_32B, "x").mixers(
        Attention)]


@pytest.mark.parametrize(("change", "message"), [
    ({"sliding_window_pattern": "LLXG"}, "sliding_window_pattern: expected a positive integer or a string of L "
                                         "\\(local\\) and G \\(global\\) letters, got 'LLXG'"),
    ({"sliding_window_pattern": "LLGG"}, "sliding_window_pattern: 'LLGG' makes layer 2 full where layer_types\\[2\\] "
                                         "is 'sliding_attention': expected the two to agree"),
    ({"sliding_window_pattern": 3}, "sliding_window_pattern: 3 makes layer 2 full where layer_types\\[2\\]"),
    ({"sliding_window_pattern": True}, "sliding_window_pattern: expected an integer or a string"),
])
def test_a_bad_or_disagreeing_pattern_is_one_line(change, message):
    with pytest.raises(FieldError, match=message):
        from_hf_config({**EXAONE_4_32B, **change}, "x")
