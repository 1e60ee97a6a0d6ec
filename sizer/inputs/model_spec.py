"""Model architecture, read from a Hugging Face `config.json` (a checkpoint, a path, a cached
Hugging Face id) or the bundled catalog, into a `ModelSpec`: one `Layer` per decoder layer
(sizer/inputs/layers.py, placed per family by model_layers.py), the towers beside them, and
the checkpoint's quantization.

Every key sizer reads is declared once in `KEYS` with its type and bounds; a key sizer does not
read is refused when its name says it shapes the architecture, else listed in the plan's
assumptions (docs/models.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator.errors import excerpt
from simulator.schema import Key, read_key
from sizer.errors import InputError
from sizer.inputs.checkpoint import Checkpoint, read_checkpoint
from sizer.inputs.layers import FULL, Attention, DenseFFN, LatentAttention, Layer, Mixer, MoEFFN, VisionTower
from sizer.inputs.model_layers import build_layers, nemotron_block, vision_tower
from sizer.inputs.quantization import Quantization, parse_quantization

CATALOG_DIR = Path(__file__).parent / "catalog" / "models"


@dataclass(frozen=True)
class ModelSpec:
    """A language model as a sequence of layers (sizer.inputs.layers), plus what surrounds them."""
    name: str
    architecture: str
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int
    layers: tuple[Layer, ...]
    towers: tuple[VisionTower, ...] = ()
    tie_word_embeddings: bool = False
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    torch_dtype: str = "bfloat16"
    quantization: Quantization | None = None
    params_official_total: float | None = None
    params_official_active: float | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    unread_keys: tuple[str, ...] = ()      # config keys sizer neither models nor knows to be harmless
    recurrent_state_dtype: str = ""        # Mamba-2 / delta-rule state (mamba_ssm_cache_dtype); "": torch_dtype

    def state_bytes_per_seq(self, mixer: Mixer) -> int:
        """A Mamba-2 / linear-attention layer's state for one sequence: the convolution window in the
        model's dtype, the recurrent state in `recurrent_state_dtype` (vLLM's mamba_ssm_cache_dtype)."""
        return (mixer.conv_state_values_per_seq * DTYPE_BYTES.get(self.torch_dtype, 2)
                + mixer.recurrent_state_values_per_seq
                * DTYPE_BYTES.get(self.recurrent_state_dtype or self.torch_dtype, 2))

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def mixers(self, kind: type) -> list:
        return [layer.mixer for layer in self.layers if isinstance(layer.mixer, kind)]

    def ffns(self, kind: type) -> list:
        return [layer.ffn for layer in self.layers if isinstance(layer.ffn, kind)]

    @property
    def is_moe(self) -> bool:
        return any(isinstance(layer.ffn, MoEFFN) for layer in self.layers)

    @property
    def is_mla(self) -> bool:
        return any(isinstance(layer.mixer, LatentAttention) for layer in self.layers)

    @property
    def num_moe_layers(self) -> int:
        return len(self.ffns(MoEFFN))

    @property
    def attention(self) -> Attention | LatentAttention | None:
        """The first attention layer's shapes (the model's attention, for a model whose layers agree)."""
        found = self.mixers(Attention) or self.mixers(LatentAttention)
        return found[0] if found else None

    @property
    def moe(self) -> MoEFFN | None:
        found = self.ffns(MoEFFN)
        return found[0] if found else None

    # The shapes of a uniform decoder (what the bundled engine builds and the plan summarises); for a
    # model whose layers differ these describe its first attention layer and first dense / MoE FFN.
    @property
    def num_attention_heads(self) -> int:
        return self.attention.num_heads if self.attention else 0

    @property
    def num_kv_heads(self) -> int:
        a = self.attention
        return a.num_kv_heads if isinstance(a, Attention) else 0

    @property
    def head_dim(self) -> int:
        a = self.attention
        return a.head_dim if isinstance(a, Attention) else 0

    @property
    def attention_bias(self) -> bool:
        a = self.attention
        return isinstance(a, Attention) and a.bias

    @property
    def intermediate_size(self) -> int:
        dense = self.ffns(DenseFFN)
        return dense[0].width if dense else (self.moe.expert_width if self.moe else 0)

    @property
    def num_experts(self) -> int:
        return self.moe.num_experts if self.moe else 0

    @property
    def num_experts_per_tok(self) -> int:
        return self.moe.top_k if self.moe else 0

    @property
    def moe_intermediate_size(self) -> int:
        return self.moe.expert_width if self.moe else 0

    @property
    def num_shared_experts(self) -> int:
        return self.moe.shared_width // self.moe.expert_width if self.moe else 0

    @property
    def num_dense_layers(self) -> int:
        """Leading layers with a dense MLP before the MoE ones."""
        if not self.is_moe:
            return 0
        return next(i for i, layer in enumerate(self.layers) if isinstance(layer.ffn, MoEFFN))

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for a in self.mixers(Attention) if a.span != FULL)

    @property
    def is_uniform_decoder(self) -> bool:
        """Every layer is the same softmax attention, and the FFNs are one dense kind then one MoE kind
        (what the bundled engine builds): no hybrid mixers, windows, towers or per-layer widths."""
        first = self.layers[0]
        if not all(isinstance(layer.mixer, Attention) and layer.mixer == first.mixer and layer.mixer.span == FULL
                   for layer in self.layers):
            return False
        dense = {layer.ffn for layer in self.layers if isinstance(layer.ffn, DenseFFN)}
        moe = {layer.ffn for layer in self.layers if isinstance(layer.ffn, MoEFFN)}
        leading = [isinstance(layer.ffn, DenseFFN) for layer in self.layers]
        ordered = leading == sorted(leading, reverse=True)      # dense layers first, then MoE
        return (len(dense) <= 1 and len(moe) <= 1 and len(dense) + len(moe) == len({x.ffn for x in self.layers})
                and ordered and all(f.gated for f in dense | moe) and not self.towers)


def catalog_names() -> list[str]:
    return sorted(p.stem for p in CATALOG_DIR.glob("*.json"))


def load_config(reference: str, file: str | None = None, field_path: str = "model") -> Checkpoint:
    """The checkpoint of a catalog name (`llama-3.1-8b`), a path (a config.json or a folder holding one) or a
    Hugging Face id in the local cache (sizer.inputs.checkpoint), its name from the catalog's `_sizer.id`."""
    ckpt = read_checkpoint(str(reference), CATALOG_DIR, file, field_path)
    meta = read_key(KEYS["_sizer"], ckpt.config, ckpt.config_file)[0] or {}
    _check_meta(meta, ckpt.config_file)
    return replace(ckpt, name=meta.get("id") or ckpt.name)


def checkpoint_model(ckpt: Checkpoint, overrides: dict[str, Any] | None = None) -> ModelSpec:
    """The ModelSpec of a checkpoint (with config key overrides). Its quantisation is config.json's
    quantization_config when it states one (as vLLM reads it), else the folder's hf_quant_config.json."""
    config = {**ckpt.config, **overrides} if overrides else ckpt.config
    name = ckpt.name + (" (with overrides)" if overrides else "")
    m = from_hf_config(config, name=name, file=ckpt.config_file)
    if ckpt.quantization is None:
        return m
    if m.quantization is None:
        return replace(m, quantization=ckpt.quantization)
    return replace(m, notes=m.notes + (f"the checkpoint folder's hf_quant_config.json ({ckpt.quantization.summary}) "
                                       "is not used: config.json's quantization_config comes first, as in vLLM",))


def load_model(reference: str, file: str | None = None, field_path: str = "model") -> ModelSpec:
    return checkpoint_model(load_config(reference, file, field_path))


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
    Key("max_position_embeddings", int, ge=0, le=MAX_POSITIONS, nullable=False, default=0),
    Key("tie_word_embeddings", bool, doc="default true for Gemma, else false"),
    Key("rms_norm_eps", float, gt=0, le=1, nullable=False, default=1e-5),
    Key("rope_theta", float, gt=0, nullable=False, default=10000.0),
    Key("torch_dtype", str, aliases=("dtype",), default="bfloat16"),
    Key("attention_bias", bool, doc="default true for Qwen2, else false"),
    # Mixture of experts: 0 (or no key) is a dense model
    Key("num_local_experts", int, ge=0, le=MAX_EXPERTS, aliases=("n_routed_experts", "num_experts"), default=0),
    Key("num_experts_per_tok", int, ge=0, le=MAX_EXPERTS, aliases=("experts_per_token", "top_k_experts"),
        doc="required with experts; at most the number of experts"),
    Key("moe_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE, aliases=("expert_intermediate_size",), default=0,
        doc="0: intermediate_size"),
    Key("moe_latent_size", int, ge=1, le=MAX_HIDDEN, doc="NemotronH: routed experts work in this latent width"),
    Key("enable_moe_block", bool, doc="Gemma-4: routed experts beside each layer's dense MLP"),
    Key("n_shared_experts", int, ge=0, le=MAX_EXPERTS, default=0),
    Key("first_k_dense_replace", int, ge=0, le=MAX_LAYERS, default=0, doc="at most num_hidden_layers"),
    # Multi-head latent attention: kv_lora_rank 0 (or no key) is standard attention
    Key("kv_lora_rank", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("q_lora_rank", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("qk_rope_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("qk_nope_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("v_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    # DeepSeek-V3.2 sparse attention: an indexer picks the top-k cached tokens each query attends to
    Key("index_n_heads", int, ge=0, le=MAX_HEADS, default=0),
    Key("index_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("index_topk", int, ge=0, le=MAX_POSITIONS, default=0),
    # Sliding-window and chunked attention; per-layer kinds
    Key("sliding_window", int, ge=1, le=MAX_POSITIONS, doc="tokens; null: no window"),
    Key("use_sliding_window", bool),
    Key("sliding_window_pattern", int, ge=1, le=MAX_LAYERS, doc="Gemma 3: every n-th layer is global"),
    Key("layer_types", list[str], doc="one entry per layer: full/sliding/chunked/linear attention"),
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
    # which layers are MoE, and shared experts
    Key("moe_layer_freq", int, ge=1, le=MAX_LAYERS, default=1, doc="DeepSeek: every n-th layer after the dense ones"),
    Key("decoder_sparse_step", int, ge=1, le=MAX_LAYERS, doc="Qwen MoE: every n-th layer is MoE"),
    Key("mlp_only_layers", list[int], doc="Qwen MoE: layers with a dense MLP"),
    Key("interleave_moe_layer_step", int, ge=1, le=MAX_LAYERS, doc="Llama-4: every n-th layer is MoE"),
    Key("moe_layers", list[int], doc="Llama-4: the MoE layers, listed"),
    Key("intermediate_size_mlp", int, ge=1, le=MAX_INTERMEDIATE, doc="Llama-4: the dense layers' width"),
    Key("shared_expert_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE, doc="Qwen MoE: the shared expert's width"),
    Key("moe_shared_expert_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE,
        doc="NemotronH: the shared expert's width"),
    Key("topk_method", str),
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
            "default the model's"),
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
    Key("quantization_config", dict, aliases=("compression_config",), doc="llm-compressor's older spelling"),
    Key("text_config", dict),
    Key("vision_config", dict),
    Key("audio_config", dict, doc="an audio encoder: not modelled (refused when present)"),
    Key("language_model_only", bool, default=False, doc="the checkpoint holds no vision tower"),
    Key("_sizer", dict, doc="the catalog's own metadata"),
)}

KNOWN_SPELLINGS = frozenset(spelling for key in KEYS.values() for spelling in key.keys)

# Bytes per value of the torch dtypes configs name; others are taken as 16-bit
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}

# model_type prefixes whose attention has an output gate, q/k norms; MLPs without a gate (up, down only)
GATED_ATTENTION_TYPES = ("qwen3_next", "qwen3_5")
QK_NORM_TYPES = ("qwen3", "gemma3", "olmo2")
NON_GATED_MLP_TYPES = ("nemotron", "starcoder2", "phi", "gpt_neox", "gpt_bigcode", "falcon", "gpt2")

# Keys of real configs that change no parameter, memory or FLOP figure sizer gives (token ids,
# activations, dropout, initialisation, RoPE variants, router training losses, softcapping, and the
# like). Any other key sizer does not read is listed in the plan's assumptions, or refused when its
# name has one of ARCHITECTURE_WORDS: such a key likely shapes layers sizer would then count wrong.
HARMLESS_KEYS = frozenset((
    "_name_or_path", "_attn_implementation_autoset", "for_llm_compressor", "auto_map", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id",
    "initializer_range", "initializer_factor", "hidden_act", "hidden_activation", "mlp_hidden_act",
    "mamba_hidden_act", "activation_function", "attention_dropout", "hidden_dropout", "dropout",
    "attention_probs_dropout_prob", "hidden_dropout_prob", "use_cache", "rope_scaling", "rope_parameters",
    "rope_type", "partial_rotary_factor", "rope_local_base_freq", "attn_logit_softcapping",
    "final_logit_softcapping", "query_pre_attn_scalar", "cache_implementation", "router_aux_loss_coef",
    "output_router_logits", "norm_topk_prob", "routed_scaling_factor", "scoring_func", "topk_group", "n_group",
    "swiglu_limit", "initial_context_length", "aux_loss_alpha", "seq_aux", "ep_size", "pretraining_tp",
    "router_jitter_noise", "use_qk_norm", "attn_temperature_tuning", "attn_scale", "floor_scale",
    "max_window_layers", "is_encoder_decoder", "tokenizer_class", "use_mamba_kernels", "mamba_chunk_size",
    "chunk_size", "time_step_min", "time_step_max", "time_step_floor", "time_step_limit", "time_step_rank",
    "rescale_prenorm_residual", "residual_in_fp32", "layer_norm_epsilon", "norm_eps", "expand",
    "num_logits_to_keep", "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id",
    "image_token_index", "boi_token_index", "eoi_token_index", "media_placeholder_token_id",
    "model_type", "torch_dtype", "dtype", "architectures", "name_or_path", "tie_encoder_decoder",
    "embedding_multiplier", "residual_multiplier", "logits_scaling", "attention_multiplier",
    "moe_router_topk_scaling_factor", "moe_aux_loss_coeff", "router_temperature", "sliding_window_size",
    "moe_shared_expert_overlap", "mtp_layers_block_type", "mtp_hybrid_override_pattern", "mtp_use_dedicated_embeddings",
    "use_bidirectional_attention", "output_gate_type",
    "vocab_size_per_layer_input", "ignore_index", "use_unified_vision_chunk", "video_placeholder",
    "vision_soft_tokens_per_image", "_attn_implementation",
    # transformers' PretrainedConfig generation and bookkeeping attributes, saved by some exporters
    "add_cross_attention", "bad_words_ids", "begin_suppress_tokens", "chunk_size_feed_forward",
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

META_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("id", str),
    Key("params_official_total", float, ge=0),
    Key("params_official_active", float, ge=0),
    Key("source", str),
)}


def _read(keys: dict[str, Key], data: dict, file: str | None, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """Every declared key of `data`: name -> (value or default, the key it was read from)."""
    return {name: read_key(spec, data, file, prefix) for name, spec in keys.items()}


def _check_meta(meta: dict, file: str | None) -> None:
    _read(META_KEYS, meta, file, "_sizer.")
    notes = meta.get("notes")
    if notes is not None and not isinstance(notes, str) and not (
            isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        raise InputError(file, "_sizer.notes", f"expected a string or a list of strings, got {excerpt(notes)}")


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
VISION_SPELLINGS = frozenset(spelling for key in VISION_KEYS.values() for spelling in key.keys)


def _blocks(config: dict, c: dict[str, Any], file: str | None, prefix: str) -> list | None:
    entries = c["block_configs"]
    if entries is None:
        return None
    blocks = []
    for i, entry in enumerate(entries):
        path = f"{prefix}block_configs[{i}]."
        attention = read_key(Key("attention", dict, nullable=False, default={}), entry, file, path)[0]
        ffn = read_key(Key("ffn", dict, nullable=False, default={}), entry, file, path)[0]
        a = {k: v for k, (v, _) in _read(BLOCK_ATTENTION_KEYS, attention, file, path + "attention.").items()}
        f = {k: v for k, (v, _) in _read(BLOCK_FFN_KEYS, ffn, file, path + "ffn.").items()}
        _unread_keys(attention, path + "attention.", frozenset(BLOCK_ATTENTION_KEYS), file, everything=True)
        _unread_keys(ffn, path + "ffn.", frozenset(BLOCK_FFN_KEYS), file, everything=True)
        for kind, block, feature in (("attention", a, "window_length"), ("attention", a, "sparsify"),
                                     ("attention", a, "num_sink_tokens"), ("attention", a, "unshifted_sink"),
                                     ("attention", a, "use_prefill_window_in_sink_attention"), ("ffn", f, "sparsify")):
            if block[feature]:
                raise InputError(file, f"{path}{kind}.{feature}",
                                 f"architecture feature {feature} is not modelled")
        if not (a["no_op"] or a["replace_with_linear"]):
            group = a["n_heads_in_group"]
            if not group or c["num_attention_heads"] % group:
                raise InputError(file, path + "attention.n_heads_in_group",
                                 f"expected a divisor of the {c['num_attention_heads']} attention heads, "
                                 f"got {excerpt(group)}")
        if not (f["no_op"] or f["replace_with_linear"]) and not f["ffn_mult"]:
            raise InputError(file, path + "ffn.ffn_mult", "missing; expected a number > 0")
        blocks.append(nemotron_block(c, a, f))
    return blocks


def _towers(c: dict[str, Any], file: str | None, path: str) -> tuple[VisionTower, ...]:
    v = c["vision_config"]
    if not v:
        return ()
    got = {k: value for k, (value, _) in _read(VISION_KEYS, v, file, path).items()}
    for key in ("depth", "hidden_size"):
        if not got[key]:
            raise InputError(file, path + key, "missing; expected a positive integer")
    got["gated"] = str(got["hidden_act"] or "").lower() in GATED_VISION_ACTS
    kernel = got["merge_kernel_size"]
    if got["spatial_merge_size"] is None and kernel:
        got["spatial_merge_size"] = max(kernel)
    return (vision_tower(got, c["hidden_size"]),)


def _unread_keys(data: dict, prefix: str, known: frozenset, file: str | None, refuse: bool = True,
                 everything: bool = False) -> list[str]:
    """Keys of `data` sizer does not read: refused when their name says they shape the architecture
    (sizer would be silently wrong) and `refuse` (every unknown key when `everything`), else returned
    for the plan's assumptions."""
    unread = []
    for key in data:
        if not isinstance(key, str) or key in known or key in HARMLESS_KEYS or key.endswith(HARMLESS_SUFFIXES):
            continue
        if refuse and (everything or any(word in key.lower() for word in ARCHITECTURE_WORDS)):
            raise InputError(file, prefix + excerpt(key, quote=False),
                             "architecture feature not modelled (sizer does not know this key, and it may "
                             "change parameters, memory or FLOPs)")
        unread.append(prefix + key)
    return unread


def from_hf_config(config: dict[str, Any], name: str, file: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the keys of a Hugging Face config.json (declared in KEYS, checked there
    and by the cross-key rules below); bad values raise InputError naming the key."""
    meta = read_key(KEYS["_sizer"], config, file)[0] or {}
    _check_meta(meta, file)
    top, prefix = config, ""
    if "text_config" in config and "hidden_size" not in config:  # a multimodal config: the language model's part
        config, prefix = read_key(KEYS["text_config"], config, file)[0] or {}, "text_config."
    got = _read({k: v for k, v in KEYS.items() if k not in ("_sizer", "text_config")}, config, file, prefix)
    c = {key: value for key, (value, _) in got.items()}
    q_path = prefix + got["quantization_config"][1]
    if c["quantization_config"] is None and prefix:   # quantization stated beside text_config applies to it
        c["quantization_config"], q_path = read_key(KEYS["quantization_config"], top, file)
    vision_path = prefix + "vision_config."
    if c["vision_config"] is None and prefix:
        c["vision_config"], vision_path = read_key(KEYS["vision_config"], top, file)[0], "vision_config."
    if c["audio_config"] is None and prefix:
        c["audio_config"] = read_key(KEYS["audio_config"], top, file)[0]
    c["model_type"] = c["model_type"] or str(top.get("model_type") or "")

    def where(key: str) -> str:
        return prefix + got[key][1] if key in got else prefix + key

    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    if c["num_hidden_layers"] is None and c["layers_block_type"] is not None:   # NemotronH may list blocks only
        c["num_hidden_layers"] = len(c["layers_block_type"])
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size"):
        if c[key] is None:
            raise InputError(file, where(key), "missing; expected a positive integer")
    kv_heads = c["num_key_value_heads"]
    if kv_heads is None:
        if "num_key_value_heads" in config and c["block_configs"] is None:
            raise InputError(file, where("num_key_value_heads"), "expected a positive integer (null only with "
                                                                 "block_configs, which state it per layer)")
        kv_heads = 1 if c["multi_query"] else heads
    elif heads % kv_heads:
        raise InputError(file, where("num_key_value_heads"),
                         f"{kv_heads} does not divide the {heads} attention heads")
    c["num_key_value_heads"] = kv_heads
    c["head_dim"] = c["head_dim"] if c["head_dim"] is not None else hidden // heads
    if c["head_dim"] < 1:
        raise InputError(file, where("hidden_size"), f"{hidden} / {heads} heads leaves no head dimension")
    _check_experts(c, where, file)
    if c["kv_lora_rank"] and not c["v_head_dim"]:
        raise InputError(file, where("v_head_dim"), "expected an integer >= 1 with kv_lora_rank (MLA)")
    quantization = (parse_quantization(c["quantization_config"], file, q_path + ".")
                    if c["quantization_config"] is not None else None)
    if c["use_sliding_window"] is False and c["model_type"].startswith("qwen"):
        c["sliding_window"] = None  # Qwen configs carry a window value that is switched off
    if c["intermediate_size"] is None and "intermediate_size" in config and c["block_configs"] is None:
        raise InputError(file, where("intermediate_size"), "expected a positive integer (null only with "
                                                           "block_configs, which state it per layer)")
    c["intermediate_size"] = c["intermediate_size"] or 4 * hidden
    _refuse_unmodelled(c, where, file)
    if c["attn_output_gate"] is None:
        c["attn_output_gate"] = c["model_type"].startswith(GATED_ATTENTION_TYPES)
    c["qk_norm"] = c["model_type"].startswith(QK_NORM_TYPES)
    c["non_gated_mlp"] = c["model_type"] in NON_GATED_MLP_TYPES
    if c["attention_bias"] is None:
        c["attention_bias"] = c["model_type"] == "qwen2"
    if c["mlp_bias"]:
        raise InputError(file, where("mlp_bias"), "architecture feature MLP biases are not modelled")
    layers = build_layers(c, _blocks(config, c, file, prefix), where, file)
    towers = () if c["language_model_only"] or read_key(KEYS["language_model_only"], top, file)[0] \
        else _towers(c, file, vision_path)
    unread = _unread_keys(top, "", KNOWN_SPELLINGS, file)
    if prefix:
        unread += _unread_keys(config, prefix, KNOWN_SPELLINGS, file)
    if towers:   # the tower's size is an estimate from its main shapes: other keys are listed, not refused
        unread += _unread_keys(c["vision_config"], vision_path, VISION_SPELLINGS, file, refuse=False)
    notes = list([meta["notes"]] if isinstance(meta.get("notes"), str) else meta.get("notes") or [])
    if c["num_nextn_predict_layers"]:
        notes.append(f"{c['num_nextn_predict_layers']} multi-token-prediction layer(s) in the checkpoint are not "
                     "counted: vLLM loads them only as a speculative-decoding draft")
    return ModelSpec(
        name=name,
        architecture=(c["architectures"] or top.get("architectures") or [c["model_type"] or "unknown"])[0],
        hidden_size=hidden,
        vocab_size=c["vocab_size"],
        max_position_embeddings=c["max_position_embeddings"],
        layers=tuple(layers),
        towers=towers,
        tie_word_embeddings=(c["tie_word_embeddings"] if c["tie_word_embeddings"] is not None
                             else c["model_type"].startswith("gemma")),
        rms_norm_eps=c["rms_norm_eps"],
        rope_theta=c["rope_theta"],
        torch_dtype=c["torch_dtype"] or "bfloat16",
        quantization=quantization,
        params_official_total=meta.get("params_official_total"),
        params_official_active=meta.get("params_official_active"),
        source=str(meta.get("source") or file or ""),
        notes=tuple(n for n in notes if n),
        unread_keys=tuple(unread),
        recurrent_state_dtype=c["mamba_ssm_cache_dtype"] or "",
    )


# Features whose non-default value sizer does not model: (key, the default, what it is)
UNMODELLED = (("num_kv_shared_layers", 0, "KV shared across layers"),
              ("hidden_size_per_layer_input", 0, "per-layer input embeddings"),
              ("use_double_wide_mlp", False, "double-wide MLP layers"),
              ("audio_config", None, "an audio encoder"))


def _refuse_unmodelled(c: dict[str, Any], where, file: str | None) -> None:
    for key, default, what in UNMODELLED:
        if c[key] not in (default, None, {}):
            raise InputError(file, where(key), f"architecture feature {what} is not modelled")


def _check_experts(c: dict[str, Any], where, file: str | None) -> None:
    num_experts, top_k, layers = c["num_local_experts"], c["num_experts_per_tok"], c["num_hidden_layers"]
    if num_experts:
        if not top_k:
            raise InputError(file, where("num_experts_per_tok"),
                             f"expected an integer in [1, {num_experts}] with {num_experts} experts, "
                             f"got {'nothing' if top_k is None else excerpt(top_k)}")
        if top_k > num_experts:
            raise InputError(file, where("num_experts_per_tok"),
                             f"expected at most the {num_experts} experts, got {excerpt(top_k)}")
    if c["first_k_dense_replace"] > layers:
        raise InputError(file, where("first_k_dense_replace"),
                         f"expected at most the {layers} layers, got {excerpt(c['first_k_dense_replace'])}")
    for key in ("mlp_only_layers", "moe_layers"):
        for i, layer in enumerate(c[key] or ()):
            if not 0 <= layer < layers:
                raise InputError(file, f"{where(key)}[{i}]", f"expected a layer index in [0, {layers - 1}], "
                                                             f"got {excerpt(layer)}")
