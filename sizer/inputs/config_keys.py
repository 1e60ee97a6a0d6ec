"""The config.json keys sizer reads, declared once: types, bounds, other spellings; the model types
(families) sizer places layers for; the keys known to change nothing sizer computes; the words that
mark an unknown key as architectural; and the features refused when switched on.
`model_spec.from_hf_config` reads a config through these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from validation.schema import Key

# ---- the config.json keys sizer reads, declared once -----------------------------------------
#
# Upper bounds. Each is far above any real model (the largest public configs have 126 layers,
# hidden size 25,600, 128 heads, head dimension 512, intermediate size 73,728, vocabulary 262,144,
# 512 experts and a 10M-token context), so no real config is refused; they exist so that a typo or
# a hostile value cannot reach the arithmetic. With every factor at its bound a parameter count
# (layers x experts x 3 x hidden x intermediate, about 2e21) stays finite in float64 (max ~1.8e308), and
# the loops whose length comes from the config (per-layer attention kinds) run at most MAX_LAYERS times.
MAX_LAYERS = 1_000
MAX_HIDDEN = 1_000_000
MAX_HEADS = 65_536
MAX_HEAD_DIM = 65_536
MAX_INTERMEDIATE = 10_000_000
MAX_VOCAB = 10_000_000
MAX_POSITIONS = 1 << 30
MAX_ROPE_FACTOR = 1024.0      # RoPE scaling factors: Kimi-K2.5's yarn 64 is the largest bundled
MAX_EXPERTS = 65_536

KEYS: dict[str, Key] = {k.name: k for k in (
    Key("architectures", list[str], doc="the first entry names the architecture"),
    Key("model_type", str),
    Key("hidden_size", int, ge=1, le=MAX_HIDDEN, nullable=False),
    Key("num_attention_heads", int, ge=1, le=MAX_HEADS, nullable=False),
    Key("num_hidden_layers", int, ge=1, le=MAX_LAYERS, nullable=False),
    # null only where block_configs state the heads per layer (Llama-Nemotron)
    Key("num_key_value_heads", int, ge=1, le=MAX_HEADS, doc="must divide num_attention_heads"),
    Key("multi_query", bool, doc="Falcon-style MQA: one KV head when num_key_value_heads is absent"),
    Key("head_dim", int, ge=1, le=MAX_HEAD_DIM, aliases=("attention_head_dim",),
        doc="default hidden_size / num_attention_heads"),
    # null only where block_configs state the width per layer (Llama-Nemotron)
    Key("intermediate_size", int, ge=1, le=MAX_INTERMEDIATE, doc="default 4 x hidden_size"),
    Key("vocab_size", int, ge=1, le=MAX_VOCAB, nullable=False),
    Key("max_position_embeddings", int, ge=1, le=MAX_POSITIONS, nullable=False, default=0,
        doc="0 when not stated: the scenario's max_model_len is then required"),
    Key("tie_word_embeddings", bool, doc="default true for Gemma and Cohere (TIED_EMBEDDING_TYPES), else false"),
    Key("rms_norm_eps", float, gt=0, le=1, nullable=False, default=1e-5),
    # null only where rope_parameters states it (transformers v5 moved it there: model_spec._rope_theta)
    Key("rope_theta", float, gt=0, default=10000.0),
    Key("torch_dtype", str, aliases=("dtype",), default="bfloat16", doc="one of DTYPE_BYTES"),
    Key("attention_bias", bool, doc="default true for Qwen2, else false"),
    # Mixture of experts: 0 (or no key) is a dense model
    Key("num_local_experts", int, ge=0, le=MAX_EXPERTS, aliases=("n_routed_experts", "num_experts"), default=0),
    Key("num_experts_per_tok", int, ge=0, le=MAX_EXPERTS, aliases=("experts_per_token", "top_k_experts"),
        doc="required with experts; at most the number of experts"),
    Key("moe_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE, aliases=("expert_intermediate_size",), default=0,
        doc="0: intermediate_size"),
    Key("moe_latent_size", int, ge=1, le=MAX_HIDDEN, doc="NemotronH: routed experts work in this latent width"),
    Key("enable_moe_block", bool, doc="Gemma-4: routed experts beside each layer's dense MLP"),
    # num_shared_experts: Ling's spelling (vLLM models/bailing_moe.py reads config.num_shared_experts)
    Key("n_shared_experts", int, ge=0, le=MAX_EXPERTS, aliases=("num_shared_experts",), default=0),
    Key("first_k_dense_replace", int, ge=0, le=MAX_LAYERS, default=0, doc="at most num_hidden_layers"),
    # Multi-head latent attention: kv_lora_rank 0 (or no key) is standard attention
    Key("kv_lora_rank", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("q_lora_rank", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("qk_rope_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("qk_nope_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("v_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("qk_head_dim", int, ge=1, le=MAX_HEAD_DIM, doc="GLM-5: qk_nope_head_dim + qk_rope_head_dim, stated (checked)"),
    # DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): an indexer picks the top-k cached tokens each query attends to
    Key("index_n_heads", int, ge=0, le=MAX_HEADS, default=0),
    Key("index_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("index_topk", int, ge=0, le=MAX_POSITIONS, default=0),
    Key("indexer_types", list[str], doc="GLM-5.x: per layer, full (its own indexer) or shared (an earlier layer's "
        "top-k: no indexer of its own)"),
    # Sliding-window and chunked attention; per-layer kinds
    Key("sliding_window", int, ge=1, le=MAX_POSITIONS, doc="tokens; null: no window"),
    Key("use_sliding_window", bool),
    Key("max_window_layers", int, ge=0, le=MAX_LAYERS, doc="Qwen: the layers from this index on slide (with "
        "use_sliding_window); the first ones attend to everything"),
    Key("sliding_window_pattern", int | str, ge=1, le=MAX_LAYERS, aliases=("layer_switch",),
        doc="Gemma 3, Cohere2: every n-th layer is global (layer_switch: Cohere2's older spelling, which Command-A's "
            "config states beside it); EXAONE-4: a string of L (local) and G (global) letters, repeated "
            "(model_layers.pattern_spans)"),
    Key("layer_types", list[str], doc="one entry per layer: full/sliding/chunked/linear attention"),
    Key("attn_type_list", list[int], doc="MiniMax: one entry per layer, 1 softmax attention, 0 lightning (linear) "
                                         "attention (not modelled: refused)"),
    Key("full_attention_interval", int, ge=1, le=MAX_LAYERS, doc="Qwen3-Next: every n-th layer full attention, "
        "the rest linear attention"),
    Key("attention_chunk_size", int, ge=1, le=MAX_POSITIONS, doc="Llama-4: RoPE layers attend within chunks"),
    Key("no_rope_layers", list[int], doc="Llama-4: 1 where a layer uses RoPE (chunked), 0 for global NoPE layers"),
    Key("no_rope_layer_interval", int, ge=1, le=MAX_LAYERS, default=4, doc="Llama-4: every n-th layer is NoPE "
        "when no_rope_layers is empty"),
    Key("attn_output_gate", bool, doc="q_proj also yields an output gate (default true for Qwen3-Next / Qwen3.5)"),
    # Gemma-4: global (full-attention) layers have their own head size and KV heads, and may share K as V
    Key("global_head_dim", int, ge=1, le=MAX_HEAD_DIM),
    Key("num_global_key_value_heads", int, ge=1, le=MAX_HEADS),
    Key("attention_k_eq_v", bool, default=False, doc="full-attention layers have no v_proj (V is K)"),
    # features sizer refuses when switched on (a non-default value would change the counts)
    Key("num_kv_shared_layers", int, ge=0, le=MAX_LAYERS, default=0),
    Key("hidden_size_per_layer_input", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("use_double_wide_mlp", bool, default=False),
    Key("mlp_bias", bool, default=False),
    Key("is_encoder_decoder", bool, default=False),
    Key("add_cross_attention", bool, default=False),
    # which layers are MoE, and shared experts
    Key("moe_layer_freq", int | list[int], ge=0, le=MAX_LAYERS, default=1,
        doc="DeepSeek: every n-th layer after the dense ones (at least 1); MiniMax-M3, MiMo-V2-Flash: a 0 or 1 a "
            "layer, 1 where the layer is MoE (model_layers.moe_layer_flags)"),
    Key("decoder_sparse_step", int, ge=1, le=MAX_LAYERS, doc="Qwen MoE: every n-th layer is MoE"),
    Key("mlp_only_layers", list[int], doc="Qwen MoE: layers with a dense MLP"),
    Key("interleave_moe_layer_step", int, ge=1, le=MAX_LAYERS, doc="Llama-4: every n-th layer is MoE"),
    Key("moe_layers", list[int], doc="Llama-4: the MoE layers, listed"),
    Key("mlp_layer_types", list[str], doc="GLM-5.x: per layer, dense (an MLP) or sparse (MoE)"),
    Key("intermediate_size_mlp", int, ge=1, le=MAX_INTERMEDIATE, doc="Llama-4: the dense layers' width"),
    Key("shared_expert_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE, doc="Qwen MoE: the shared expert's width"),
    Key("moe_shared_expert_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE,
        doc="NemotronH: the shared expert's width; Ling: each shared expert's (PER_SHARED_EXPERT_WIDTH_TYPES)"),
    Key("topk_method", str),
    Key("use_routing_bias", bool, default=False, doc="MiniMax: the router's per-expert correction bias "
                                                     "(e_score_correction_bias, as DeepSeek's noaux_tc)"),
    # NemotronH (Mamba-2 hybrid)
    Key("hybrid_override_pattern", str, doc="one character per block: M Mamba-2, * attention, - MLP, E MoE"),
    Key("layers_block_type", list[str], doc="one word per block: mamba, attention, mlp, moe"),
    Key("mamba_num_heads", int, ge=1, le=MAX_HEADS),
    Key("mamba_head_dim", int, ge=1, le=MAX_HEAD_DIM),
    Key("ssm_state_size", int, ge=1, le=MAX_HEAD_DIM),
    Key("n_groups", int, ge=1, le=MAX_HEADS, aliases=("mamba_n_groups",)),
    Key("conv_kernel", int, ge=1, le=1024, aliases=("mamba_d_conv",)),
    Key("use_conv_bias", bool, default=True),
    Key("use_bias", bool, default=False, aliases=("mamba_proj_bias",),
        doc="NemotronH: biases on the Mamba projections"),
    Key("mamba_ssm_cache_dtype", str, aliases=("mamba_ssm_dtype",),
        doc="the recurrent (SSM / delta-rule) state's dtype, as vLLM sets its mamba_ssm_cache_dtype from it; "
            "one of DTYPE_BYTES, default the model's"),
    # Gated delta net (linear attention)
    Key("linear_num_key_heads", int, ge=1, le=MAX_HEADS),
    Key("linear_num_value_heads", int, ge=1, le=MAX_HEADS),
    Key("linear_key_head_dim", int, ge=1, le=MAX_HEAD_DIM),
    Key("linear_value_head_dim", int, ge=1, le=MAX_HEAD_DIM),
    Key("linear_conv_kernel_dim", int, ge=1, le=1024),
    # Llama-Nemotron (DeciLM): per-layer blocks
    Key("block_configs", list[dict], doc="one entry per layer: attention and ffn blocks"),
    # multi-token prediction heads (vLLM loads them only for speculative decoding)
    Key("num_nextn_predict_layers", int, ge=0, le=MAX_LAYERS, aliases=("mtp_num_hidden_layers",), default=0),
    # MiniMax-M2: num_mtp_modules modules of mtp_transformer_layers layers each, beside the decoder layers (vLLM's
    # MiniMaxM2ForCausalLM builds the num_hidden_layers decoder layers only): not counted, as the above
    Key("num_mtp_modules", int, ge=0, le=MAX_LAYERS, default=0),
    Key("mtp_transformer_layers", int, ge=0, le=MAX_LAYERS, default=1),
    Key("quantization_config", dict, aliases=("compression_config",), doc="llm-compressor's older spelling"),
    Key("rope_scaling", dict, aliases=("rope_parameters",), doc="transformers v5's spelling; vLLM derives the "
        "longest context from its type and factor (model_spec.vllm_context)"),
    Key("original_max_position_embeddings", int, ge=1, le=MAX_POSITIONS,
        doc="the length RoPE was trained at: yarn scales it (before rope_scaling's own); LongRoPE's default context"),
    Key("text_config", dict),
    Key("vision_config", dict),
    Key("audio_config", dict, doc="an audio encoder: not modelled (refused when present)"),
    Key("language_model_only", bool, default=False, doc="the checkpoint holds no vision tower"),
    Key("_sizer", dict, doc="the catalog's own metadata"),
)}

KNOWN_SPELLINGS = frozenset(spelling for key in KEYS.values() for spelling in key.keys)

# Routing keys: experts per token, in every spelling configs use (KEYS' num_experts_per_tok and its aliases;
# Hunyuan's moe_topk, Ernie's moe_k)
TOP_K_KEYS = (*KEYS["num_experts_per_tok"].keys, "moe_topk", "moe_k")
# Mixture-of-experts keys sizer reads or knows: stated on a model with no experts, they are named in the plan's notes
# (model_spec._unused_expert_keys)
EXPERT_KEYS = (*KEYS["num_local_experts"].keys, *TOP_K_KEYS, *(spelling for name in (
    "moe_intermediate_size", "moe_latent_size", "n_shared_experts", "first_k_dense_replace", "moe_layer_freq",
    "decoder_sparse_step", "mlp_only_layers", "interleave_moe_layer_step", "moe_layers", "mlp_layer_types",
    "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size", "topk_method", "enable_moe_block")
    for spelling in KEYS[name].keys))

# Bytes per value of the torch dtypes configs name (torch_dtype, mamba_ssm_cache_dtype); others are refused
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}

# The model_types (transformers' names: the key the family rules below and in model_layers.py go by) sizer has
# been checked on: the families of the catalog and tests/data/models configs sizer reads, and those the rules below
# name. Another decoder's layers are read from its config's keys as attention and MLP (or expert) blocks, a key
# that would change them refused, and the plan says its family was not checked (`model_spec._check_family`);
# the families below that are no such decoder are refused by name. Expert keys in a dense family sizer knows are
# refused: its models (vLLM's, transformers') ignore them, so a Llama stating 8 experts is not sized as a Mixtral.
DENSE_TYPES = (
    "llama", "mistral", "phi", "phi3", "mimo", "olmo2", "gemma", "gemma2", "gemma3", "gemma3_text", "qwen2", "qwen3",
    "qwen3_5", "qwen3_5_text", "qwen3_vl", "qwen3_vl_text", "nemotron", "nemotron-nas", "starcoder2", "gpt_neox",
    "gpt_bigcode", "falcon", "gpt2", "apertus", "exaone4", "cohere", "cohere2",
)
MOE_TYPES = (
    "mixtral", "llama4", "llama4_text", "gemma4", "gemma4_text", "qwen3_moe", "qwen3_next", "qwen3_5_moe",
    "qwen3_5_moe_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25",
    "glm_moe_dsa", "gpt_oss", "nemotron_h", "bailing_moe", "minimax_m2",
)
MODEL_TYPES = DENSE_TYPES + MOE_TYPES
# MoE families every model of which has experts (gemma4 and nemotron_h have dense models too): one stating no
# experts is refused, not sized dense (transformers' classes default to experts: Mixtral's 8, Qwen3-MoE's 128)
EXPERT_ONLY_TYPES = tuple(t for t in MOE_TYPES if t not in ("gemma4", "gemma4_text", "nemotron_h"))
# Families that are not the attention-and-MLP decoders sizer places: encoders, encoder-decoders, state-space and
# recurrent models (a Mamba config's Llama-looking keys would size it as a Llama)
NOT_DECODER_TYPES = (
    "bert", "roberta", "xlm-roberta", "distilbert", "deberta", "deberta-v2", "electra", "albert", "modernbert",
    "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper",
    "mamba", "mamba2", "falcon_mamba", "rwkv", "rwkv5", "rwkv6", "rwkv7", "xlstm", "recurrent_gemma",
)

# model_type prefixes whose attention has an output gate, q/k norms; MLPs without a gate (up, down only)
GATED_ATTENTION_TYPES = ("qwen3_next", "qwen3_5")
QK_NORM_TYPES = ("qwen3", "gemma3", "olmo2", "apertus", "exaone4", "minimax_m2")
# model_types whose q / k norms span every head (one weight per q and per k channel), not one head: MiniMax-M2
# (vLLM models/minimax_m2.py: q_norm over head_dim x num_attention_heads, k_norm over head_dim x num_key_value_heads)
QK_NORM_ACROSS_HEADS_TYPES = ("minimax_m2",)
# model_types whose decoder layers hold four hidden-size norms, the attention's and the MLP's each before and after
# (transformers Gemma2DecoderLayer / Gemma3DecoderLayer: input, post_attention, pre_feedforward and
# post_feedforward layernorms; vLLM's gemma2.py and gemma3.py alike), where the others hold two
SANDWICH_NORM_TYPES = ("gemma2", "gemma3", "gemma3_text")
# model_types whose attention adds a learned sink logit per head (weights `self_attn.sinks`, not a config key):
# gpt-oss (transformers models/gpt_oss/modeling_gpt_oss.py GptOssAttention.sinks; vLLM models/gpt_oss.py)
SINK_TYPES = ("gpt_oss",)
# model_types whose attention_bias biases o_proj as well as q, k and v (transformers LlamaAttention, GptOssAttention,
# Qwen3Attention, Qwen3MoeAttention, Olmo2Attention: o_proj bias=config.attention_bias); Qwen2's never does, and a
# family not checked keeps q, k and v's alone (GLM-4.5's attention_bias leaves o_proj unbiased)
O_PROJ_BIAS_TYPES = ("llama", "gpt_oss", "qwen3", "qwen3_moe", "olmo2")
# model_types whose shared experts are one MLP num_shared_experts times as wide as one shared expert,
# moe_shared_expert_intermediate_size (else moe_intermediate_size) each: Ling (vLLM models/bailing_moe.py
# BailingMoE); NemotronH's moe_shared_expert_intermediate_size is the whole width
PER_SHARED_EXPERT_WIDTH_TYPES = ("bailing_moe",)
# model_types whose routed experts and router carry biases (transformers GptOssExperts gate_up_proj_bias and
# down_proj_bias, GptOssTopKRouter bias; vLLM models/gpt_oss.py loads them)
EXPERT_BIAS_TYPES = ("gpt_oss",)
# Apertus: up_proj and down_proj around xIELU (transformers models/apertus/modular_apertus.py ApertusMLP(NemotronMLP);
# vLLM models/apertus.py ApertusMLP), and q_norm / k_norm over each head (QK_NORM_TYPES)
NON_GATED_MLP_TYPES = ("nemotron", "starcoder2", "phi", "gpt_neox", "gpt_bigcode", "falcon", "gpt2", "apertus")
# model_type prefixes whose output head is the input embedding unless the config says otherwise: transformers'
# Gemma configs and CohereConfig / Cohere2Config default tie_word_embeddings to true, and vLLM's Cohere model
# (models/commandr.py) computes the logits through model.embed_tokens (Command-A's config states no tie)
TIED_EMBEDDING_TYPES = ("gemma", "cohere")
# What a checked family's count leaves out, named in its plans: phi (vLLM models/phi.py) biases its q, k, v, dense,
# fc1, fc2 and lm_head and its LayerNorms, which sizer does not count (phi-2: 791,040 parameters, 0.03%)
FAMILY_NOTES = {"phi": "phi's biases (q, k, v, dense, fc1, fc2, lm_head and the LayerNorms': 0.03% of phi-2's "
                       "parameters) are not counted"}
# model_types whose decoder layer runs attention and the MLP side by side from one norm (vLLM models/commandr.py
# CohereDecoderLayer: input_layernorm only; transformers' CohereDecoderLayer alike), where the others hold two
PARALLEL_BLOCK_TYPES = ("cohere", "cohere2")

# Keys of real configs that change no parameter, memory or FLOP figure sizer gives (token ids,
# activations, dropout, initialisation, RoPE variants, router training losses, softcapping, and the
# like). Any other key sizer does not read is listed in the plan's assumptions, or refused when its
# name has one of ARCHITECTURE_WORDS: such a key likely shapes layers sizer would then count wrong.
HARMLESS_KEYS = frozenset((
    "_name_or_path", "_attn_implementation_autoset", "for_llm_compressor", "auto_map", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id",
    "initializer_range", "initializer_factor", "hidden_act", "hidden_activation", "mlp_hidden_act",
    "mamba_hidden_act", "activation_function", "attention_dropout", "hidden_dropout", "dropout",
    "attention_probs_dropout_prob", "hidden_dropout_prob", "embedding_dropout", "output_dropout", "embd_pdrop",
    "resid_pdrop", "use_cache",
    "rope_type", "partial_rotary_factor", "rope_interleave", "indexer_rope_interleave", "rope_local_base_freq",
    "attn_logit_softcapping",
    "final_logit_softcapping", "query_pre_attn_scalar", "cache_implementation", "router_aux_loss_coef",
    "output_router_logits", "norm_topk_prob", "routed_scaling_factor", "scoring_func", "topk_group", "n_group",
    "swiglu_limit", "initial_context_length", "aux_loss_alpha", "seq_aux", "ep_size", "pretraining_tp",
    "router_jitter_noise", "use_qk_norm", "attn_temperature_tuning", "attn_scale", "floor_scale",
    "tokenizer_class", "use_mamba_kernels", "mamba_chunk_size",
    "chunk_size", "time_step_min", "time_step_max", "time_step_floor", "time_step_limit", "time_step_rank",
    "rescale_prenorm_residual", "residual_in_fp32", "layer_norm_epsilon", "norm_eps", "expand",
    "num_logits_to_keep", "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id",
    "image_token_index", "boi_token_index", "eoi_token_index", "media_placeholder_token_id",
    "model_type", "torch_dtype", "dtype", "architectures", "name_or_path", "tie_encoder_decoder",
    "embedding_multiplier", "residual_multiplier", "logits_scaling", "attention_multiplier",
    "moe_router_topk_scaling_factor", "moe_router_dtype", "moe_aux_loss_coeff", "router_temperature",
    "sliding_window_size",
    "moe_shared_expert_overlap", "mtp_layers_block_type", "mtp_hybrid_override_pattern", "mtp_use_dedicated_embeddings",
    "use_bidirectional_attention", "output_gate_type",
    # a LayerNorm's epsilon (phi-2, Cohere's Command-R7B and Command-A, MiMo-V2-Flash: layer_norm_epsilon's other
    # spellings), and the width RoPE rotates in each head (MiniMax-M2's rotary_dim 64 of 128; partial_rotary_factor's
    # other form): no weight, cache or FLOP count changes with either
    "layer_norm_eps", "layernorm_epsilon", "rotary_dim",
    "vocab_size_per_layer_input", "ignore_index", "use_unified_vision_chunk", "video_placeholder",
    "vision_soft_tokens_per_image", "_attn_implementation",
    # transformers' PretrainedConfig generation and bookkeeping attributes, saved by some exporters
    "bad_words_ids", "begin_suppress_tokens", "chunk_size_feed_forward",
    "cross_attention_hidden_size", "diversity_penalty", "do_sample", "early_stopping", "encoder_no_repeat_ngram_size",
    "exponential_decay_length_penalty", "finetuning_task", "id2label", "label2id", "is_decoder", "length_penalty",
    "max_length", "min_length", "no_repeat_ngram_size", "num_beam_groups", "num_beams", "num_return_sequences",
    "output_attentions", "output_hidden_states", "output_scores", "prefix", "problem_type", "pruned_heads",
    "remove_invalid_values", "repetition_penalty", "return_dict", "return_dict_in_generate", "suppress_tokens",
    "task_specific_params", "temperature", "tf_legacy_loss", "top_k", "top_p", "torchscript", "typical_p",
    "use_bfloat16",
))
HARMLESS_SUFFIXES = ("_token_id", "_token_index", "_token_ids")
ARCHITECTURE_WORDS = ("layer", "expert", "head", "hidden_size", "intermediate", "block", "mixer", "pattern",
                      "mamba", "ssm", "window", "chunk", "moe", "kv_", "lora", "rank", "mlp", "ffn", "vocab",
                      "conv", "state", "_dim", "num_", "shared", "sparse", "dense", "tower", "_config")

# Words that mark a key as a count or a width (a size, a number of layers, experts or modules, a dimension): its
# integer 0 states that the feature is not there, as false does for a flag (model_spec.switched_off)
COUNT_WORDS = ("size", "num_", "_layers", "_experts", "_modules", "_dim", "count")

# Keys sizer does not read (nor does vLLM) whose usual value describes the model sizer builds, in the families named
# (None: any): that value is listed with the keys not read, as the usual one; another is listed there with what it
# would change, not refused (model_spec._usual_value): key -> (families, the usual value, what it is, what another
# value means, given the value)
USUAL_VALUES: dict[str, tuple[tuple[str, ...] | None, Any, str, Callable[[Any], str]]] = {
    "order_of_interleaved_layers": (
        ("cohere2",), "local_attn_first", "Cohere2's order of each group's layers: the sliding ones first, then the "
        "global one, as sliding_window_pattern and layer_types place them",
        lambda value: "not read: sizer places the layers as sliding_window_pattern or layer_types say, as vLLM's "
                      "commandr.py does; the counts are the same, the global layer's place in each group is not"),
    "use_parallel_block": (
        ("cohere", "cohere2"), True, "Cohere's decoder layer: attention and the MLP side by side from one norm",
        lambda value: "not read: vLLM's commandr.py builds the parallel layer whatever this says, and sizer counts "
                      "it so"),
    # LLaVA-style multimodal configs (mistral3's Mistral-Small-3.1 and 3.2 state -1): the tower layer whose output
    # the projector takes; vLLM builds the tower up to that layer only (models/llava.py _get_num_hidden_layers)
    "vision_feature_layer": (
        None, -1, "the vision tower's last layer feeds the projector, so vLLM builds the whole tower, as sizer "
        "counts it", lambda value: _vision_layers_past(value)),
}


def _vision_layers_past(value: Any) -> str:
    """What sizer counts too many of a tower whose features come from layer `value` (vLLM's _get_layer_index: a
    negative index counts from the end, -1 the last layer; a list, its deepest)."""
    layers = value if isinstance(value, list) else [value]
    if layers and all(isinstance(i, int) and not isinstance(i, bool) and i < 0 for i in layers):
        past = -1 - max(layers)
        return (f"not read: vLLM builds the vision tower only up to its layer {max(layers)}, so sizer, which counts "
                f"the whole tower, counts {past} ViT layer{'s' if past != 1 else ''} too many")
    return ("not read: vLLM builds the vision tower only up to the layer this names, so sizer, which counts the "
            "whole tower, counts the layers past it too")


META_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("id", str),
    Key("params_official_total", float, ge=0),
    Key("params_official_active", float, ge=0),
    Key("source", str),
)}


# Llama-Nemotron block_configs: each entry's attention and ffn blocks
BLOCK_ATTENTION_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("no_op", bool, default=False),
    Key("replace_with_linear", bool, default=False),
    Key("n_heads_in_group", int, ge=1, le=MAX_HEADS),
    Key("window_length", int, ge=1, le=MAX_POSITIONS),
    Key("sparsify", list),
    Key("num_sink_tokens", int, ge=0, le=MAX_POSITIONS),
    Key("unshifted_sink", bool, default=False),
    Key("use_prefill_window_in_sink_attention", bool, default=False),
)}
BLOCK_FFN_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("no_op", bool, default=False),
    Key("replace_with_linear", bool, default=False),
    Key("ffn_mult", float, gt=0, le=1000),
    Key("sparsify", list),
)}
# vision_config: the ViT encoder vLLM loads beside the language model
VISION_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("depth", int, ge=1, le=MAX_LAYERS, aliases=("num_hidden_layers", "vt_num_hidden_layers")),
    Key("hidden_size", int, ge=1, le=MAX_HIDDEN, aliases=("embed_dim", "vt_hidden_size")),
    Key("intermediate_size", int, ge=1, le=MAX_INTERMEDIATE, aliases=("vt_intermediate_size",)),
    # read for its type only: a ViT's head count changes no parameter count
    Key("num_heads", int, ge=1, le=MAX_HEADS, aliases=("num_attention_heads", "vt_num_attention_heads")),
    Key("patch_size", int, ge=1, le=4096),
    Key("temporal_patch_size", int, ge=1, le=64),
    Key("in_channels", int, ge=1, le=64, aliases=("num_channels",)),
    Key("out_hidden_size", int, ge=1, le=MAX_HIDDEN, aliases=("projector_output_dim", "text_hidden_size")),
    Key("spatial_merge_size", int, ge=1, le=64),
    Key("merge_kernel_size", list[int], doc="Kimi: patches merged per token, [h, w]"),
    Key("pixel_shuffle_ratio", float, gt=0, le=1),
    Key("num_position_embeddings", int, ge=0, le=MAX_POSITIONS),
    Key("deepstack_visual_indexes", list[int], doc="Qwen3-VL: layers feeding an extra merger each"),
    Key("hidden_act", str),
)}
GATED_VISION_ACTS = ("silu", "swiglu")
# and a tower's RoPE, which places its patches (the language model's context is not the tower's)
VISION_SPELLINGS = frozenset(spelling for key in VISION_KEYS.values() for spelling in key.keys) | {
    "rope_scaling", "rope_parameters"}


# Features whose non-default value sizer does not model: (key, the default, what it is)
UNMODELLED = (("num_kv_shared_layers", 0, "KV shared across layers"),
              ("hidden_size_per_layer_input", 0, "per-layer input embeddings"),
              ("use_double_wide_mlp", False, "double-wide MLP layers"),
              ("audio_config", None, "an audio encoder"),
              ("is_encoder_decoder", False, "an encoder-decoder model"),
              ("add_cross_attention", False, "cross-attention layers"))
