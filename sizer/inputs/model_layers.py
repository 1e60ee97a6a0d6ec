"""The layer-by-layer description of a model, from the config.json keys each family uses.

`build_layers(c, ...)` takes the declared keys as read (config_keys.KEYS, checked in model_spec) and
returns one `Layer` per decoder layer. Families and the keys that place their layers:

- which mixer:   `layer_types` (full/sliding/chunked/linear attention), `full_attention_interval`
                 (Qwen3-Next), `hybrid_override_pattern` / `layers_block_type` (NemotronH: Mamba-2,
                 attention, MLP and MoE blocks), `block_configs` (Llama-Nemotron: per-layer heads,
                 no-op and linear replacements), `no_rope_layers` + `attention_chunk_size` (Llama-4:
                 RoPE layers attend within their chunk), `sliding_window` patterns (Mistral, Gemma,
                 Cohere2; EXAONE-4's letters);
- which FFN:     `first_k_dense_replace` + `moe_layer_freq` (DeepSeek; a 0 / 1 a layer: MiniMax-M3,
                 MiMo-V2-Flash), `decoder_sparse_step` +
                 `mlp_only_layers` (Qwen MoE), `interleave_moe_layer_step` / `moe_layers` (Llama-4);
                 shared experts from `n_shared_experts` (Ling's `num_shared_experts`),
                 `shared_expert_intermediate_size` or `moe_shared_expert_intermediate_size` (Ling: each
                 shared expert's width); Llama-4's dense layers are `intermediate_size_mlp`
                 wide and its one shared expert is as wide as a routed one.
An entry naming a layer kind sizer does not model is refused, naming the key and the entry.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from sizer.errors import InputError
from sizer.inputs.config_keys import PER_SHARED_EXPERT_WIDTH_TYPES
from sizer.inputs.layers import (
    CHUNKED,
    FFN,
    FULL,
    SLIDING,
    Attention,
    DenseFFN,
    GatedDeltaNet,
    LatentAttention,
    Layer,
    LinearFFN,
    LinearMixer,
    Mamba2,
    Mixer,
    MoEFFN,
    NoFFN,
    NoMixer,
    VisionTower,
)
from validation.errors import excerpt

# layer_types entries, by the attention span they mean (Hugging Face spellings)
LAYER_TYPES = {"full_attention": FULL, "attention": FULL, "global": FULL, "global_attention": FULL,
               "sliding_attention": SLIDING, "local": SLIDING, "local_attention": SLIDING,
               "chunked_attention": CHUNKED, "linear_attention": "linear"}
# sliding_window_pattern's letters (EXAONE-4): L a local (sliding-window) layer, G a global one
PATTERN_LETTERS = {"L": SLIDING, "G": FULL}
# GLM-5.x per-layer lists: indexer_types (full: the layer's own DSA indexer; shared: an earlier layer's top-k) and
# mlp_layer_types (dense MLP or sparse MoE)
INDEXER_TYPES, MLP_LAYER_TYPES = ("full", "shared"), ("dense", "sparse")
# NemotronH block kinds: hybrid_override_pattern characters and layers_block_type words
NEMOTRON_H_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def attention_for(c: dict[str, Any], span: str, window: int | None, kv_heads: int | None = None) -> Attention:
    """Attention of one span; Gemma-4's global layers have their own head size and KV heads, and K as V."""
    head_dim, kv, k_eq_v = c["head_dim"], kv_heads or c["num_key_value_heads"], False
    if span == FULL and c["global_head_dim"]:
        head_dim, kv = c["global_head_dim"], c["num_global_key_value_heads"] or kv
        k_eq_v = c["attention_k_eq_v"]
    return Attention(span, c["num_attention_heads"], kv, head_dim, window if span != FULL else None,
                     bias=c["attention_bias"], o_bias=c["o_proj_bias"], output_gate=c["attn_output_gate"],
                     qk_norm=c["qk_norm"], qk_norm_across_heads=c["qk_norm_across_heads"], k_eq_v=k_eq_v,
                     sinks=c["attention_sinks"])


def _mixers(c: dict[str, Any], n: int, where, file: str | None) -> list[Mixer] | None:
    """Each layer's mixer from layer_types / full_attention_interval / sliding-window patterns / Llama-4's
    chunked layers; None when NemotronH's or Nemotron's per-block keys decide it."""
    if c["kv_lora_rank"]:
        mla = LatentAttention(c["num_attention_heads"], c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"],
                              c["qk_rope_head_dim"], c["v_head_dim"], c["index_n_heads"], c["index_head_dim"],
                              c["index_topk"])
        kinds = _per_layer(c, "indexer_types", INDEXER_TYPES, n, where, file)
        if kinds is None:
            return [mla] * n
        # a shared layer attends to the top-k an earlier layer's indexer picked: no indexer, no index keys
        shared = replace(mla, index_heads=0, index_head_dim=0)
        return [mla if kind == "full" else shared for kind in kinds]
    spans = _spans(c, n, where, file)
    out: list[Mixer] = []
    linear = None
    for span in spans:
        if span == "linear":
            linear = linear or _gated_delta_net(c, where, file)
            out.append(linear)
        else:
            window = c["attention_chunk_size"] if span == CHUNKED else c["sliding_window"]
            out.append(attention_for(c, span, window))
    return out


def _spans(c: dict[str, Any], n: int, where, file: str | None) -> list[str]:
    if c["attn_type_list"] is not None:   # MiniMax: 1 softmax attention (as the window keys place it), 0 lightning
        kinds = c["attn_type_list"]
        if len(kinds) != n:
            raise InputError(file, where("attn_type_list"), f"expected {n} entries, got {len(kinds)}")
        for i, kind in enumerate(kinds):
            if kind != 1:
                raise InputError(file, f"{where('attn_type_list')}[{i}]", f"attention type {excerpt(kind)} is not "
                                 "modelled; expected 1 (softmax attention; 0 is MiniMax's lightning attention)")
    layer_types = c["layer_types"]
    if layer_types:
        if len(layer_types) != n:
            raise InputError(file, where("layer_types"), f"expected {n} entries, got {len(layer_types)}")
        spans = []
        for i, t in enumerate(layer_types):
            if t not in LAYER_TYPES:
                raise InputError(file, f"{where('layer_types')}[{i}]",
                            f"layer type {excerpt(t)} is not modelled; expected one of {', '.join(LAYER_TYPES)}")
            spans.append(LAYER_TYPES[t])
        if SLIDING in spans and not c["sliding_window"]:
            raise InputError(file, where("sliding_window"),
                             "expected a window (tokens) for the sliding_attention layers")
        if CHUNKED in spans and not c["attention_chunk_size"]:
            raise InputError(file, where("attention_chunk_size"),
                             "expected a chunk size for the chunked_attention layers")
        # a pattern stated beside layer_types (Gemma 3, Cohere2, EXAONE-4 state both) must place the layers alike:
        # vLLM reads layer_types, TensorRT-LLM's EXAONE-4 the pattern; two placements in one config are refused
        placed = pattern_spans(c, n, where, file) if c["sliding_window"] else None
        if placed is not None and placed != spans:
            i = next(i for i, (a, b) in enumerate(zip(placed, spans, strict=True)) if a != b)
            raise InputError(file, where("sliding_window_pattern"),
                             f"{excerpt(c['sliding_window_pattern'])} makes layer {i} {placed[i]} where "
                             f"layer_types[{i}] is {excerpt(layer_types[i])}: expected the two to agree")
        return spans
    if c["full_attention_interval"]:   # Qwen3-Next: every interval-th layer full, the rest linear attention
        return [FULL if (i + 1) % c["full_attention_interval"] == 0 else "linear" for i in range(n)]
    if c["attention_chunk_size"] and c["model_type"].startswith("llama4"):
        # Llama-4: no_rope_layers[i] is 1 where layer i uses RoPE; those attend within their chunk (vLLM's
        # ChunkedLocalAttention), the NoPE layers attend to everything. Empty: every interval-th layer is NoPE
        # (transformers' Llama4TextConfig default).
        interval = c["no_rope_layer_interval"]
        flags = c["no_rope_layers"] or [int((i + 1) % interval != 0) for i in range(n)]
        if len(flags) != n:
            raise InputError(file, where("no_rope_layers"), f"expected {n} entries, got {len(flags)}")
        return [CHUNKED if flag else FULL for flag in flags]
    return _sliding_pattern(c, n, where, file)


def pattern_spans(c: dict[str, Any], n: int, where, file: str | None) -> list[str] | None:
    """The spans `sliding_window_pattern` places, None when not stated. An integer p (Gemma 3, Cohere2): every p-th
    layer is global, the rest slide (transformers' Gemma3TextConfig / Cohere2Config layer_types). A string of L (local,
    sliding) and G (global) letters (EXAONE-4's "LLLG"): layer i takes letter i mod its length, and the last layer is
    global whatever its letter (TensorRT-LLM models/modeling_exaone4.py check_is_sliding; transformers'
    Exaone4Config documents the same and derives layer_types from an integer only)."""
    pattern = c["sliding_window_pattern"]
    if not pattern:
        return None
    if isinstance(pattern, int):
        return [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(n)]
    if set(pattern) - set(PATTERN_LETTERS):
        raise InputError(file, where("sliding_window_pattern"), "expected a positive integer or a string of L "
                                                                "(local) and G (global) letters, got "
                                                                f"{excerpt(pattern)}")
    return [SLIDING if PATTERN_LETTERS[pattern[i % len(pattern)]] == SLIDING and i != n - 1 else FULL
            for i in range(n)]


def _sliding_pattern(c: dict[str, Any], n: int, where, file: str | None) -> list[str]:
    """Which layers slide: sliding_window_pattern (`pattern_spans`), Gemma 2's alternation, or all/none."""
    window = c["sliding_window"]
    if not window:
        return [FULL] * n
    placed = pattern_spans(c, n, where, file)
    if placed is not None:
        return placed
    if c["model_type"] == "gemma2":  # Gemma 2 alternates, starting with a sliding layer
        return [SLIDING if i % 2 == 0 else FULL for i in range(n)]
    if c["model_type"].startswith("qwen") and c["max_window_layers"] is not None:
        # Qwen2/Qwen3 with use_sliding_window: layers from max_window_layers on slide, the first ones are full
        # (transformers' Qwen2Config.layer_types: sliding where i >= max_window_layers; vLLM's Qwen2 attention alike)
        return [SLIDING if i >= c["max_window_layers"] else FULL for i in range(n)]
    if window >= c["max_position_embeddings"]:
        return [FULL] * n  # a window as long as the context is no window
    return [SLIDING] * n  # Mistral-7B-v0.1 style: every layer slides


def _gated_delta_net(c: dict[str, Any], where, file: str | None) -> GatedDeltaNet:
    keys = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
            "linear_conv_kernel_dim")
    for key in keys:
        if not c[key]:
            raise InputError(file, where(key), "missing; expected a positive integer for the linear-attention layers")
    return GatedDeltaNet(*(c[key] for key in keys))


def _mamba(c: dict[str, Any], where, file: str | None) -> Mamba2:
    keys = ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")
    for key in keys:
        if not c[key]:
            raise InputError(file, where(key), "missing; expected a positive integer for the Mamba-2 layers")
    return Mamba2(*(c[key] for key in keys), conv_bias=c["use_conv_bias"], proj_bias=c["use_bias"])


def moe_layer_flags(c: dict[str, Any], n: int, where, file: str | None) -> list[bool] | None:
    """moe_layer_freq as a list (MiniMax-M3, MiMo-V2-Flash): one 0 or 1 a layer, 1 where the layer is MoE (vLLM's
    mimo_v2_flash.py and transformers' MiMoV2Flash: `config.moe_layer_freq[layer_idx]`), its leading dense layers
    agreeing with first_k_dense_replace; None for the integer form (every n-th layer, at least 1: DeepSeek's)."""
    freq = c["moe_layer_freq"]
    if not isinstance(freq, list):
        if freq is not None and freq < 1:
            raise InputError(file, where("moe_layer_freq"), f"expected an integer >= 1 or a list of 0 and 1 a layer, "
                                                            f"got {excerpt(freq)}")
        return None
    if len(freq) != n:
        raise InputError(file, where("moe_layer_freq"), f"expected {n} entries (num_hidden_layers), got {len(freq)}")
    for i, flag in enumerate(freq):
        if flag not in (0, 1):
            raise InputError(file, f"{where('moe_layer_freq')}[{i}]", f"expected 0 (dense) or 1 (MoE), got "
                                                                       f"{excerpt(flag)}")
        if flag and i < c["first_k_dense_replace"]:
            raise InputError(file, f"{where('moe_layer_freq')}[{i}]", f"1 (MoE) where first_k_dense_replace "
                             f"{c['first_k_dense_replace']} makes layer {i} dense: expected the two to agree")
    return [flag == 1 for flag in freq]


def _is_moe_layer(c: dict[str, Any], i: int) -> bool:
    """DeepSeek (first_k_dense_replace, moe_layer_freq), Qwen (decoder_sparse_step, mlp_only_layers),
    Llama-4 (interleave_moe_layer_step or an explicit moe_layers list); moe_layer_freq's list form is read by
    `moe_layer_flags`."""
    if c["moe_layers"] is not None:
        return i in c["moe_layers"]
    if i < c["first_k_dense_replace"] or i in (c["mlp_only_layers"] or ()):
        return False
    step = c["interleave_moe_layer_step"] or c["decoder_sparse_step"] or 1
    if c["interleave_moe_layer_step"] or c["decoder_sparse_step"]:
        return (i + 1) % step == 0
    return (i - c["first_k_dense_replace"]) % (c["moe_layer_freq"] or 1) == 0


def moe_ffn(c: dict[str, Any], gated: bool = True) -> MoEFFN:
    width = c["moe_intermediate_size"] or c["intermediate_size"]
    shared = (c["shared_expert_intermediate_size"] or c["moe_shared_expert_intermediate_size"]
              or c["n_shared_experts"] * width)
    if c["model_type"] in PER_SHARED_EXPERT_WIDTH_TYPES:     # Ling: n shared experts of their own width each
        shared = c["n_shared_experts"] * (c["moe_shared_expert_intermediate_size"] or width)
    if c["model_type"].startswith("llama4"):   # one shared expert, as wide as a routed one
        shared = width
    if c["enable_moe_block"]:                  # Gemma-4: the layer's dense MLP runs beside the experts
        shared = c["intermediate_size"]
    return MoEFFN(c["num_local_experts"], c["num_experts_per_tok"], width, shared,
                  shared_gate=bool(c["shared_expert_intermediate_size"]), gated=gated,
                  router_bias=c["topk_method"] == "noaux_tc" or c["use_routing_bias"], latent=c["moe_latent_size"] or 0,
                  biases=c["expert_biases"])


def _per_layer(c: dict[str, Any], key: str, allowed: tuple[str, ...], n: int, where, file: str | None) -> list | None:
    """A per-layer list of kinds (GLM-5.x's indexer_types, mlp_layer_types), checked; None when not stated."""
    kinds = c[key]
    if not kinds:
        return None
    if len(kinds) != n:
        raise InputError(file, where(key), f"expected {n} entries (num_hidden_layers), got {len(kinds)}")
    for i, kind in enumerate(kinds):
        if kind not in allowed:
            raise InputError(file, f"{where(key)}[{i}]", f"expected one of {', '.join(allowed)}, got {excerpt(kind)}")
    return kinds


def _ffns(c: dict[str, Any], n: int, where, file: str | None) -> list[FFN]:
    dense = DenseFFN(c["intermediate_size_mlp"] or c["intermediate_size"], gated=not c["non_gated_mlp"])
    if not c["num_local_experts"]:
        return [dense] * n
    moe = moe_ffn(c)
    kinds = _per_layer(c, "mlp_layer_types", MLP_LAYER_TYPES, n, where, file)
    if kinds is not None:      # GLM-5.x: each layer's MLP named, dense or sparse (MoE)
        return [moe if kind == "sparse" else dense for kind in kinds]
    flags = moe_layer_flags(c, n, where, file)
    if flags is not None:      # MiniMax-M3, MiMo-V2-Flash: each layer's 0 (dense) or 1 (MoE)
        return [moe if flag else dense for flag in flags]
    return [moe if _is_moe_layer(c, i) else dense for i in range(n)]


def _nemotron_h(c: dict[str, Any], n: int, where, file: str | None) -> list[Layer]:
    """NemotronH: each block is one of Mamba-2, attention, MLP or MoE, with one norm."""
    pattern, key = c["hybrid_override_pattern"], "hybrid_override_pattern"
    if pattern is not None:
        kinds = []
        for i, ch in enumerate(pattern):
            if ch not in NEMOTRON_H_BLOCKS:
                raise InputError(file, where(key), f"block {ch!r} at position {i} is not modelled; expected one of "
                            + ", ".join(f"{k!r} ({v})" for k, v in NEMOTRON_H_BLOCKS.items()))
            kinds.append(NEMOTRON_H_BLOCKS[ch])
    else:
        key, kinds = "layers_block_type", list(c["layers_block_type"])
        for i, kind in enumerate(kinds):
            if kind not in NEMOTRON_H_BLOCKS.values():
                raise InputError(file, f"{where(key)}[{i}]", f"block type {excerpt(kind)} is not modelled; "
                            f"expected one of {', '.join(NEMOTRON_H_BLOCKS.values())}")
    if len(kinds) != n:
        raise InputError(file, where(key), f"expected {n} blocks (num_hidden_layers), got {len(kinds)}")
    layers = []
    for kind in kinds:
        if kind == "mamba":
            layers.append(Layer(_mamba(c, where, file), NoFFN(), norms=1))
        elif kind == "attention":
            layers.append(Layer(attention_for(c, FULL, None), NoFFN(), norms=1))
        elif kind == "mlp":
            layers.append(Layer(NoMixer(), DenseFFN(c["intermediate_size"], gated=False), norms=1))
        else:
            if not c["num_local_experts"]:
                raise InputError(file, where("n_routed_experts"), "expected the expert count for the MoE blocks")
            layers.append(Layer(NoMixer(), moe_ffn(c, gated=False), norms=1))
    return layers


def build_layers(c: dict[str, Any], blocks: list[tuple[Mixer, FFN]] | None, where, file: str | None) -> list[Layer]:
    """One Layer per decoder layer. `blocks`: Llama-Nemotron's per-layer block_configs, already read."""
    n = c["num_hidden_layers"]
    if c["hybrid_override_pattern"] is not None or c["layers_block_type"] is not None:
        return _nemotron_h(c, n, where, file)
    if blocks is not None:
        if len(blocks) != n:
            raise InputError(file, where("block_configs"),
                             f"expected {n} entries (num_hidden_layers), got {len(blocks)}")
        return [Layer(mixer, ffn) for mixer, ffn in blocks]
    mixers = _mixers(c, n, where, file)
    return [Layer(mixer, ffn, norms=c["norms_per_layer"]) for mixer, ffn in zip(mixers, _ffns(c, n, where, file),
                                                                                  strict=True)]


def nemotron_block(c: dict[str, Any], attention: dict[str, Any], ffn: dict[str, Any]) -> tuple[Mixer, FFN]:
    """One Llama-Nemotron (DeciLM) block: heads from n_heads_in_group, width from ffn_mult."""
    if attention["no_op"]:
        mixer: Mixer = NoMixer()
    elif attention["replace_with_linear"]:
        mixer = LinearMixer()
    else:
        heads = c["num_attention_heads"]
        mixer = attention_for(c, FULL, None, heads // attention["n_heads_in_group"])
    if ffn["no_op"]:
        block_ffn: FFN = NoFFN()
    elif ffn["replace_with_linear"]:
        block_ffn = LinearFFN()
    else:
        block_ffn = DenseFFN(ffn_mult_width(ffn["ffn_mult"], c["hidden_size"]))
    return mixer, block_ffn


def ffn_mult_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's `_ffn_mult_to_intermediate_size`: 2/3 x mult x hidden, rounded up to a multiple of 256."""
    width = int(2 * ffn_mult * hidden / 3)
    return math.ceil(width / 256) * 256


def vision_tower(v: dict[str, Any], text_hidden: int) -> VisionTower:
    """A ViT from `vision_config` (Qwen-VL, Llama-4, Gemma, Kimi): blocks, patch embedding, projector."""
    hidden = v["hidden_size"]
    patch = v["patch_size"] or 14
    patch_values = patch * patch * (v["in_channels"] or 3) * (v["temporal_patch_size"] or 1)
    merge = v["spatial_merge_size"] or 1
    pixel_shuffle = v["pixel_shuffle_ratio"]
    merge_values = hidden * merge * merge
    if pixel_shuffle:   # Llama-4: pixel shuffle folds 1/ratio^2 patches into one token
        merge_values = round(hidden / (pixel_shuffle * pixel_shuffle))
    return VisionTower(v["depth"], hidden, v["intermediate_size"] or 4 * hidden, patch_values,
                       v["out_hidden_size"] or text_hidden, merge_values,
                       gated=v["gated"], position_embeddings=v["num_position_embeddings"] or 0,
                       mergers=1 + len(v["deepstack_visual_indexes"] or ()))
