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
    ({"sliding_window_pattern": True}, "sliding_window_pattern: expected an integer in \\[1, 1000\\] or a string"),
])
def test_a_bad_or_disagreeing_pattern_is_one_line(change, message):
    with pytest.raises(FieldError, match=message):
        from_hf_config({**EXAONE_4_32B, **change}, "x")


# CohereLabs/c4ai-command-a-03-2025 config.json (gated on Hugging Face), the keys that shape the count, and the keys
# Cohere's Cohere2 configs state beside them that sizer refused for their names: layer_norm_eps, layer_switch,
# order_of_interleaved_layers, use_parallel_block (the ports that read Cohere's configs list them, e.g. a Swift
# port's Cohere2Configuration: "Cohere2 config.json additionally ships layer_switch, order_of_interleaved_layers,
# rotary_pct, use_parallel_block, use_embedding_sharing"; layer_switch's value is taken here as the pattern it is the
# older spelling of). No tie_word_embeddings: transformers' Cohere2Config defaults it to true and vLLM's commandr.py
# computes the logits through the input embedding
COMMAND_A = {
    "architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2", "hidden_size": 12288, "intermediate_size": 36864,
    "num_hidden_layers": 64, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 256000, "sliding_window": 4096, "sliding_window_pattern": 4, "layer_switch": 4,
    "order_of_interleaved_layers": "local_attn_first", "use_parallel_block": True, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 131072, "rope_theta": 50000, "logit_scale": 0.25,
}


def test_command_a_ties_its_embedding_and_holds_one_norm_a_layer():
    m = from_hf_config(COMMAND_A, "command-a")
    assert m.tie_word_embeddings and {layer.norms for layer in m.layers} == {1}
    assert "order_of_interleaved_layers = 'local_attn_first' (the usual value: Cohere2's order of each group's " \
           "layers: the sliding ones first, then the global one, as sliding_window_pattern and layer_types place " \
           "them)" in m.unread_keys
    assert any(k.startswith("use_parallel_block = True (the usual value") for k in m.unread_keys)
    # every 4th layer global, the 3 before it sliding (layer_switch 4 is sliding_window_pattern's older spelling)
    assert [a.span for a in m.mixers(Attention)] == [FULL if i % 4 == 3 else SLIDING for i in range(64)]
    # the embedding, once (tied): 256,000 x 12,288 = 3,145,728,000; a layer: q and o 12,288 x 12,288 each, k and v
    # 12,288 x 1,024 each (327,155,712), gate, up and down 3 x 12,288 x 36,864 (1,358,954,496), one norm of 12,288:
    # 1,686,122,496; x 64 = 107,911,839,744; the final norm 12,288: 111,057,580,032 (a separate lm_head, as sizer
    # took one without the family's tie, would add 3,145,728,000)
    counts = parameter_count(m)
    assert counts.total == 111_057_580_032
    # Command-A model card (CohereLabs/c4ai-command-a-03-2025): "Number of parameters: 111 billion"
    assert counts.total == pytest.approx(111e9, rel=0.03)
    # KV per token: 2 (K, V) x 64 layers x 8 KV heads x 128 head dim x 2 bytes = 262,144 B, windows aside
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 262_144
    # a config that states the tie keeps it (Command-R7B states "tie_word_embeddings": true; an untied copy false)
    assert not from_hf_config({**COMMAND_A, "tie_word_embeddings": False}, "x").tie_word_embeddings


def test_cohere_keys_with_another_value_are_named_not_refused():
    m = from_hf_config({**COMMAND_A, "order_of_interleaved_layers": "global_attn_first",
                        "use_parallel_block": False}, "x")
    assert parameter_count(m).total == 111_057_580_032            # the same model: the keys are not read
    assert "order_of_interleaved_layers = 'global_attn_first' (not read: sizer places the layers as " \
           "sliding_window_pattern or layer_types say, as vLLM's commandr.py does; the counts are the same, the " \
           "global layer's place in each group is not; the usual 'local_attn_first': Cohere2's order of each " \
           "group's layers: the sliding ones first, then the global one, as sliding_window_pattern and layer_types " \
           "place them)" in m.unread_keys
    assert any(k.startswith("use_parallel_block = False (not read: vLLM's commandr.py builds the parallel layer")
               for k in m.unread_keys)
    # layer_switch is sliding_window_pattern under another name: the two must agree
    with pytest.raises(FieldError, match="layer_switch: 6 beside sliding_window_pattern 4"):
        from_hf_config({**COMMAND_A, "layer_switch": 6}, "x")
    # in a family whose layers are not Cohere's, use_parallel_block is a key sizer does not know: refused
    with pytest.raises(FieldError, match="use_parallel_block: architecture feature not modelled"):
        from_hf_config({**APERTUS_8B, "use_parallel_block": True}, "x")


# mistralai/Mistral-Small-3.1-24B-Instruct-2503 config.json, as TensorRT-LLM's mistral_small_3_1_24b_config unit-test
# fixture copies it (its 40 text layers, cut to 4 there for CI, restored), with the top-level
# "vision_feature_layer": -1 that Mistral-Small-3.1 and 3.2 state
MISTRAL_SMALL_3_1 = {
    "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10, "model_type": "mistral3",
    "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
    "text_config": {"attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
                    "initializer_range": 0.02, "intermediate_size": 32768, "max_position_embeddings": 131072,
                    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40,
                    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0,
                    "sliding_window": None, "use_cache": True, "vocab_size": 131072},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"attention_dropout": 0.0, "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024,
                      "image_size": 1540, "initializer_range": 0.02, "intermediate_size": 4096,
                      "model_type": "pixtral", "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24,
                      "patch_size": 14, "rope_theta": 10000.0},
    "vision_feature_layer": -1,
}


def test_vision_feature_layer_minus_one_is_the_whole_tower_and_another_is_named():
    m = from_hf_config(MISTRAL_SMALL_3_1, "mistral-small-3.1")
    assert "vision_feature_layer = -1 (the usual value: the vision tower's last layer feeds the projector, so vLLM " \
           "builds the whole tower, as sizer counts it)" in m.unread_keys
    # language model: embedding + lm_head 2 x 131,072 x 5,120 = 1,342,177,280; a layer: q 5,120 x 4,096 and o
    # 4,096 x 5,120, k and v 5,120 x 1,024 each (52,428,800), gate, up and down 3 x 5,120 x 32,768 (503,316,480), two
    # norms (10,240): 555,755,520; x 40 = 22,230,220,800; the final norm 5,120: 23,572,403,200. The Pixtral tower, 24
    # blocks of 1,024 wide with a gated 4,096 MLP, and its projector: 409,973,760 (sizer's estimate from its shapes)
    counts = parameter_count(m)
    assert counts.total - counts.towers == 23_572_403_200 and counts.towers == 409_973_760
    # Mistral-Small-3.1-24B model card: "With 24 billion parameters"
    assert counts.total == pytest.approx(24e9, rel=0.03)
    # KV per token: 2 (K, V) x 40 layers x 8 KV heads x 128 head dim x 2 bytes = 163,840 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 163_840
    # -2: vLLM builds the tower to its second-to-last layer (llava.py _get_num_hidden_layers: 24 - 2 + 1 = 23 of 24
    # layers); sizer counts all 24: named, not refused, and the count is the same
    two = from_hf_config({**MISTRAL_SMALL_3_1, "vision_feature_layer": -2}, "x")
    assert parameter_count(two).total == counts.total
    assert "vision_feature_layer = -2 (not read: vLLM builds the vision tower only up to its layer -2, so sizer, " \
           "which counts the whole tower, counts 1 ViT layer too many; the usual -1: the vision tower's last layer " \
           "feeds the projector, so vLLM builds the whole tower, as sizer counts it)" in two.unread_keys
    # a list takes its deepest layer: [-4, -2] builds to -2, as -2 alone
    listed = from_hf_config({**MISTRAL_SMALL_3_1, "vision_feature_layer": [-4, -2]}, "x")
    assert any("counts 1 ViT layer too many" in k for k in listed.unread_keys)
