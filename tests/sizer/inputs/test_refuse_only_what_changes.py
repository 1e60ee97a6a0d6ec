"""Issue 24, item 2: configs refused before that sizer now reads (a switched-off feature, the short form of a
KV-cache scheme, ModelOpt MIXED_PRECISION layer by layer, GLM-5's stated qk_head_dim). Each real config's
source is in tests/data/models/README.md and facts.yaml; published counts are quoted there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizer.analytic.formats import checkpoint_format, group_bytes, weight_format
from sizer.analytic.memory import kv_layout
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import linear_groups, parameter_count
from sizer.inputs.model_spec import from_hf_config, load_model
from validation.errors import FieldError

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"


def _config(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text())


def test_a_switched_off_feature_is_read_and_noted_not_refused():
    # Qwen3-Coder-480B-A35B-Instruct's config states "qkv_bias": false (no q/k/v biases: nothing to count)
    m = load_model(str(MODELS / "qwen3-coder-480b-a35b-instruct"))
    assert "qkv_bias = False (switched off)" in m.unread_keys
    counts = parameter_count(m)
    # Qwen3-Coder model card: 480B total, 35B activated
    assert counts.total == pytest.approx(480e9, rel=0.03)
    assert counts.active == pytest.approx(35e9, rel=0.03)
    # KV per token: 2 (K, V) x 62 layers x 8 KV heads x 128 head dim x 2 bytes (bf16) = 253,952 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 253_952


def test_the_rule_is_general_but_a_switched_on_unknown_feature_is_still_refused():
    base = _config("qwen3-coder-480b-a35b-instruct")
    for off in (False, None, [], {}):
        m = from_hf_config({**base, "sparse_layer_pattern": off}, "x")
        assert any(k.startswith("sparse_layer_pattern = ") for k in m.unread_keys)
    with pytest.raises(FieldError, match="sparse_layer_pattern: architecture feature not modelled"):
        from_hf_config({**base, "sparse_layer_pattern": [1, 0]}, "x")


def test_a_short_kv_cache_scheme_is_read():
    # aiconfigurator's Qwen3-32B FP8 static per-tensor config: "kv_cache_scheme": "FP8" (the short form)
    m = load_model(str(MODELS / "qwen3-32b-fp8-static-per-tensor"))
    q = m.quantization
    assert (q.format, q.kv_cache, q.static_activations) == ("fp8", "fp8", True)
    # Qwen3-32B model card: 32.8B parameters
    assert parameter_count(m).total == pytest.approx(32.8e9, rel=0.03)
    # KV per token in the stated FP8: 2 x 64 layers x 8 KV heads x 128 head dim x 1 byte = 131,072 B
    assert kv_layout(m, q.kv_cache, ParallelConfig()).bytes_per_token == 131_072
    with pytest.raises(FieldError, match="kv_cache_scheme: expected one of fp8"):
        from_hf_config({**_config("qwen3-32b-fp8-static-per-tensor"), "quantization_config": {
            "quant_method": "compressed-tensors", "kv_cache_scheme": "fp4"}}, "x")


def test_modelopt_mixed_precision_is_read_layer_by_layer():
    # nvidia/Qwen3.6-27B-NVFP4: W4A16_NVFP4 for the 64 x 3 MLP projections and the lm_head, FP8 for the linear
    # attention and attention projections (hf_quant_config.json quantized_layers), KV cache FP8
    m = load_model(str(MODELS / "qwen3.6-27b-nvfp4"))
    fmt, _ = weight_format(m, "auto", 128)
    q = fmt.scheme
    assert (fmt.name, q.weight_only, q.kv_cache) == ("nvfp4", True, "fp8")
    (fp8,) = q.parts
    assert (fp8.format, len(fp8.targets), len(q.targets)) == ("fp8", 208, 193)
    groups = {g.name: g for g in linear_groups(m)}
    # mlp.down_proj: 64 layers of 17,408 x 5,120 in NVFP4: half a byte a value, an E4M3 scale per 16 inputs
    # (17,408 / 16 x 5,120 bytes) and an fp32 global scale per matrix
    down = 64 * 17_408 * 5_120
    values, scales, converted = group_bytes(groups["mlp.down_proj"], fmt, 128, m)
    assert (values, converted) == (down / 2, down / 2)
    assert scales == 64 * (17_408 // 16 * 5_120 + 4)
    # self_attn.o_proj: 16 layers of (24 x 256) x 5,120 in FP8 (a byte a value) with ModelOpt FP8's fp32 weight
    # scale and static input scale per matrix
    o_proj = 16 * 24 * 256 * 5_120
    assert group_bytes(groups["self_attn.o_proj"], fmt, 128, m) == (o_proj, 16 * 8, o_proj)
    # linear_attn.in_proj_ba is in neither list: it stays bf16 (2 bytes a value, no scales)
    ba = groups["linear_attn.in_proj_ba"]
    assert group_bytes(ba, fmt, 128, m) == (2 * ba.params, 0.0, 0.0)
    # the lm_head is named in W4A16_NVFP4: 248,320 x 5,120 at half a byte
    lm = groups["lm_head"]
    assert group_bytes(lm, fmt, 128, m)[2] == lm.params / 2
    assert checkpoint_format(fp8).scheme.static_activations


def test_mixed_precision_moe_experts_take_their_layers_format():
    # nvidia/Qwen3.6-35B-A3B-NVFP4: each layer's mlp.experts is W4A16_NVFP4 (one entry for all 256 experts)
    m = load_model(str(MODELS / "qwen3.6-35b-a3b-nvfp4"))
    fmt, _ = weight_format(m, "auto", 128)
    experts = next(g for g in linear_groups(m) if g.name == "mlp.experts.down_proj")
    # 40 layers x 256 experts x 512 x 2,048 values, all NVFP4
    assert experts.params == 40 * 256 * 512 * 2048
    assert group_bytes(experts, fmt, 128, m)[2] == experts.params / 2
    # Qwen3.6-35B-A3B: 35B total (the name; no finer figure published)
    assert parameter_count(m).total == pytest.approx(35e9, rel=0.03)


def test_glm5_is_read_as_latent_attention_with_a_sparse_indexer():
    # zai-org/GLM-5 config.json (aiconfigurator-core 0.12.0 copy): MLA (64 heads, q_lora 2,048, kv_lora 512,
    # qk nope 192 + rope 64 = qk_head_dim 256, v 256) with DSA's indexer (32 heads of 128, top 2,048)
    m = load_model(str(MODELS / "glm-5"))
    mla = m.attention
    assert (mla.num_heads, mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.v_head_dim) == (
        64, 2048, 512, 192, 256)
    assert (mla.index_heads, mla.index_head_dim, mla.index_topk) == (32, 128, 2048)
    # GLM-5 model card: 744B parameters (40B active); the 40B leaves out the embedding and lm_head, 2 x 154,880 x
    # 6,144 = 1.90B, which sizer's active count holds
    counts = parameter_count(m)
    assert counts.total == pytest.approx(744e9, rel=0.03)
    assert counts.active - 2 * 154_880 * 6_144 == pytest.approx(40e9, rel=0.03)
    # KV per token: 78 layers x ((512 latent + 64 rope) x 2 bytes + the indexer's FP8 key: 128 bytes + one fp32
    # scale per 128 values) = 78 x 1,284 = 100,152 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 78 * ((512 + 64) * 2 + 128 + 4)
    with pytest.raises(FieldError, match="qk_head_dim: expected qk_nope_head_dim \\+ qk_rope_head_dim = 256"):
        from_hf_config({**_config("glm-5"), "qk_head_dim": 192}, "x")
    # the FP8 checkpoint: block FP8 with 712 unconverted module names (norms, routers, the indexer's projection)
    fp8 = load_model(str(MODELS / "glm-5-fp8"))
    assert (fp8.quantization.format, fp8.quantization.block_size) == ("fp8", (128, 128))


def test_glm52_reads_its_per_layer_mlp_and_indexer_lists():
    # zai-org/GLM-5.2: mlp_layer_types (dense x 3, then sparse) and indexer_types (21 layers with their own indexer,
    # 57 that reuse an earlier layer's top-k)
    m = load_model(str(MODELS / "glm-5.2"))
    mixers = [layer.mixer for layer in m.layers]
    assert sum(1 for a in mixers if a.index_heads) == 21 and all(a.index_topk == 2048 for a in mixers)
    assert [type(layer.ffn).__name__ for layer in m.layers[:4]] == ["DenseFFN"] * 3 + ["MoEFFN"]
    # a shared layer drops the indexer: wq_b 2,048 x (32 x 128) + wk 6,144 x 128 + weights_proj 6,144 x 32 + its
    # key LayerNorm (2 x 128) fewer parameters than GLM-5's layer
    indexer = 2048 * 32 * 128 + 6144 * 128 + 6144 * 32 + 2 * 128
    glm5 = load_model(str(MODELS / "glm-5"))
    assert parameter_count(glm5).total - parameter_count(m).total == 57 * indexer
    # KV per token: 78 x 1,152 latent bytes + 21 x 132 indexer-key bytes = 92,628 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 78 * 1152 + 21 * 132
    with pytest.raises(FieldError, match=r"indexer_types\[3\]: expected one of full, shared"):
        from_hf_config({**_config("glm-5.2"), "indexer_types": ["full"] * 3 + ["half"] + ["full"] * 74}, "x")
    with pytest.raises(FieldError, match="mlp_layer_types: expected 78 entries"):
        from_hf_config({**_config("glm-5.2"), "mlp_layer_types": ["dense"]}, "x")


def test_a_zero_count_or_width_is_switched_off_but_not_a_zero_flag_or_a_one():
    # MiniMax-M2's "shared_intermediate_size": 0 states no shared expert: a width of 0 adds nothing to count. Any key
    # whose name marks a count or a width (config_keys.COUNT_WORDS) reads the integer 0 so, and the model is the one
    # without the key: Qwen3-Coder-480B-A35B-Instruct's 480,154,875,392 parameters (its model card: 480B, the first
    # test above)
    base = _config("qwen3-coder-480b-a35b-instruct")
    plain = parameter_count(from_hf_config(base, "x")).total
    for key in ("shared_intermediate_size", "extra_layers", "vision_experts", "num_extra_blocks", "router_dim"):
        m = from_hf_config({**base, key: 0}, "x")
        assert f"{key} = 0 (switched off)" in m.unread_keys
        assert parameter_count(m).total == plain == 480_154_875_392
        # a width or count stated on is still refused: sizer cannot count it
        with pytest.raises(FieldError, match=f"{key}: architecture feature not modelled"):
            from_hf_config({**base, key: 1}, "x")
    # a 0 that is no count (a layer index, a flag as an integer) says nothing is off: refused as before
    for key in ("shared_layer_index", "use_shared_mlp"):
        with pytest.raises(FieldError, match=f"{key}: architecture feature not modelled"):
            from_hf_config({**base, key: 0}, "x")
    # true is no zero (True == 1 in Python: a bool is not read as a count)
    with pytest.raises(FieldError, match="num_extra_heads: architecture feature not modelled"):
        from_hf_config({**base, "num_extra_heads": True}, "x")


# microsoft/phi-2 config.json, as sdpython/experimental-experiment's get_phi2_untrained copies it (key for key, as a
# Python dict; no verbatim JSON copy found): LayerNorms with layer_norm_eps, partial RoPE
PHI_2 = {
    "_name_or_path": "microsoft/phi-2", "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256, "hidden_act": "gelu_new", "hidden_size": 2560,
    "initializer_range": 0.02, "intermediate_size": 10240, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "phi", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "partial_rotary_factor": 0.4, "qk_layernorm": False, "resid_pdrop": 0.1, "rope_scaling": None,
    "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.37.0",
    "use_cache": True, "vocab_size": 51200,
}


def test_a_norm_epsilon_and_the_rotated_width_change_no_count():
    # layer_norm_eps (phi-2; Cohere's Command-R7B and Command-A) and rotary_dim (MiniMax-M2) were refused for the
    # words "layer" and "_dim" in their names; neither shapes a weight or the cache
    m = from_hf_config(PHI_2, "phi-2")
    assert not any("layer_norm_eps" in k for k in m.unread_keys)
    # embedding + lm_head 2 x 51,200 x 2,560 = 262,144,000; a layer: q, k, v, dense 4 x 2,560^2 (26,214,400), fc1 and
    # fc2 2 x 2,560 x 10,240 (52,428,800), 2 norms of 2,560: 78,648,320; x 32 = 2,516,746,240; final norm 2,560:
    # 2,778,892,800. phi-2 model card: "Phi-2 is a Transformer with 2.7 billion parameters". Not counted, and said
    # (config_keys.FAMILY_NOTES): phi's biases, 32 x (3 x 2,560 + 2,560 + 10,240 + 2,560) + 51,200 (lm_head) + 2,560
    # (final LayerNorm) = 791,040, and its one LayerNorm a layer holds a bias where sizer counts a second norm
    counts = parameter_count(m)
    assert counts.total == 2_778_892_800 and counts.total == pytest.approx(2.7e9, rel=0.03)
    assert any(n.startswith("phi's biases") and "not counted" in n for n in m.notes)
    # KV per token: 2 (K, V) x 32 layers x 32 KV heads x 80 head dim x 2 bytes = 327,680 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 327_680
    base = _config("qwen3-coder-480b-a35b-instruct")
    plain = parameter_count(from_hf_config(base, "x")).total
    assert parameter_count(from_hf_config({**base, "rotary_dim": 64, "layer_norm_eps": 1e-5}, "x")).total == plain


def test_moe_layer_freq_as_a_list_marks_each_moe_layer():
    # MiniMax-M3 and MiMo-V2-Flash state moe_layer_freq as one 0 or 1 a layer (vLLM's mimo_v2_flash.py and
    # transformers' MiMoV2Flash: layer i is MoE where moe_layer_freq[i] is 1). On GLM-5 (78 layers, the first 3
    # dense: first_k_dense_replace 3) the list [0, 0, 0, 1, ...] is the same model, 743.9B (its model card: 744B)
    base = _config("glm-5")
    plain = from_hf_config(base, "x")
    listed = from_hf_config({**base, "moe_layer_freq": [0] * 3 + [1] * 75}, "x")
    assert parameter_count(listed).total == parameter_count(plain).total == pytest.approx(744e9, rel=0.03)
    assert listed.layers == plain.layers
    # a 0 at layer 40 makes that layer dense: the count drops by one MoE block less one dense MLP
    flags = [0] * 3 + [1] * 75
    flags[40] = 0
    one_dense = from_hf_config({**base, "moe_layer_freq": flags}, "x")
    moe, dense = plain.layers[40].ffn, plain.layers[0].ffn
    hidden = plain.hidden_size
    drop = (sum(x.params for x in moe.linears(hidden)) + moe.extra_params(hidden)
            - sum(x.params for x in dense.linears(hidden)))
    assert parameter_count(plain).total - parameter_count(one_dense).total == drop
    assert one_dense.num_moe_layers == 74
    # an entry neither 0 nor 1, a list of the wrong length, a 1 among first_k_dense_replace's dense layers, and the
    # integer 0 are refused
    for bad, message in (([2] + [1] * 77, "moe_layer_freq\\[0\\]: expected 0 \\(dense\\) or 1 \\(MoE\\), got 2"),
                         ([1] * 77, "moe_layer_freq: expected 78 entries"),
                         ([1] * 78, "moe_layer_freq\\[0\\]: 1 \\(MoE\\) where first_k_dense_replace 3 makes layer 0 "
                                    "dense"),
                         (0, "moe_layer_freq: expected an integer >= 1 or a list of 0 and 1 a layer, got 0")):
        with pytest.raises(FieldError, match=message):
            from_hf_config({**base, "moe_layer_freq": bad}, "x")


def test_value_heads_narrower_than_query_heads_are_refused_without_mla():
    # MiMo-V2-Flash: head_dim 192 (queries and keys), v_head_dim 128 (values), no kv_lora_rank; sizer's attention
    # has one head size, so its KV (2 x 192 where the cache holds 192 + 128) would be silently wrong: refused
    base = _config("qwen3-coder-480b-a35b-instruct")
    with pytest.raises(FieldError, match="v_head_dim: value heads of 96 beside query and key heads of 128"):
        from_hf_config({**base, "v_head_dim": 96}, "x")
    # the same width as head_dim states nothing new
    assert parameter_count(from_hf_config({**base, "v_head_dim": 128}, "x")).total == 480_154_875_392
