"""Model architecture, read from a Hugging Face `config.json` (a checkpoint, a path, a cached
Hugging Face id) or the bundled catalog, into a `ModelSpec`: one `Layer` per decoder layer
(sizer/inputs/layers.py, placed per family by model_layers.py), the towers beside them, and
the checkpoint's quantization.

Every key sizer reads is declared once in `KEYS` with its type and bounds; a key sizer does not
read is refused when its name says it shapes the architecture, else listed in the plan's
assumptions; a family that is no decoder (`NOT_DECODER_TYPES`) is refused, one outside `MODEL_TYPES` noted
(docs/models.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sizer.errors import InputError
from sizer.inputs.checkpoint import Checkpoint, read_checkpoint
from sizer.inputs.config_keys import (
    ARCHITECTURE_WORDS,
    BLOCK_ATTENTION_KEYS,
    BLOCK_FFN_KEYS,
    COUNT_WORDS,
    DENSE_TYPES,
    DTYPE_BYTES,
    EXPERT_BIAS_TYPES,
    EXPERT_KEYS,
    EXPERT_ONLY_TYPES,
    FAMILY_NOTES,
    GATED_ATTENTION_TYPES,
    GATED_VISION_ACTS,
    HARMLESS_KEYS,
    HARMLESS_SUFFIXES,
    KEYS,
    KNOWN_SPELLINGS,
    MAX_POSITIONS,
    MAX_ROPE_FACTOR,
    META_KEYS,
    MODEL_TYPES,
    NON_GATED_MLP_TYPES,
    NOT_DECODER_TYPES,
    O_PROJ_BIAS_TYPES,
    PARALLEL_BLOCK_TYPES,
    QK_NORM_ACROSS_HEADS_TYPES,
    QK_NORM_TYPES,
    SANDWICH_NORM_TYPES,
    SINK_TYPES,
    TIED_EMBEDDING_TYPES,
    TOP_K_KEYS,
    UNMODELLED,
    USUAL_VALUES,
    VISION_KEYS,
    VISION_SPELLINGS,
)
from sizer.inputs.layers import FULL, Attention, DenseFFN, LatentAttention, Layer, Mixer, MoEFFN, VisionTower
from sizer.inputs.model_layers import build_layers, nemotron_block, vision_tower
from sizer.inputs.quantization import Quantization, parse_quantization
from validation.errors import excerpt
from validation.schema import Key, read_key

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
    mtp_layers: int = 0                    # multi-token-prediction layers (num_nextn_predict_layers): speculative mtp
    rope_scaled_positions: int = 0         # the longest context vLLM derives from the RoPE scaling where it differs
                                           # from max_position_embeddings (vllm_context); 0: it does not
    rope_default_positions: int = 0        # vLLM's default max_model_len where it is shorter (LongRoPE's original)

    def state_bytes_per_seq(self, mixer: Mixer) -> int:
        """A Mamba-2 / linear-attention layer's state for one sequence: the convolution window in the
        model's dtype, the recurrent state in `recurrent_state_dtype` (vLLM's mamba_ssm_cache_dtype)."""
        return (mixer.conv_state_values_per_seq * DTYPE_BYTES[self.torch_dtype]
                + mixer.recurrent_state_values_per_seq * DTYPE_BYTES[self.recurrent_state_dtype or self.torch_dtype])

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
    m = replace(m, notes=m.notes + ckpt.notes)
    if ckpt.quantization is not None and m.quantization is not None:
        m = replace(m, notes=m.notes + (f"the checkpoint folder's hf_quant_config.json ({ckpt.quantization.summary}) "
                                        "is not used: config.json's quantization_config comes first, as in vLLM",))
    q = m.quantization or ckpt.quantization or ckpt.sidecar    # the sidecar is read only where neither states one
    if q is None and ckpt.packed:     # packed integer weights, and no word of how: vLLM would build a 16-bit model
        tensor, file = ckpt.packed.split(" in ", 1)
        q = Quantization("", "", source=file, why_not=(
            f"safetensors hold packed integer weights ({tensor}) but config.json states no quantization_config "
            "and no quantize_config.json or quant_config.json is beside it: vLLM would build the model unquantised "
            "and fail to load them"))
    return replace(m, quantization=q, notes=m.notes + (q.notes if q is not m.quantization and q else ()))


def load_model(reference: str, file: str | None = None, field_path: str = "model") -> ModelSpec:
    return checkpoint_model(load_config(reference, file, field_path))


def _read(keys: dict[str, Key], data: dict, file: str | None, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """Every declared key of `data`: name -> (value or default, the key it was read from)."""
    return {name: read_key(spec, data, file, prefix) for name, spec in keys.items()}


def _check_meta(meta: dict, file: str | None) -> None:
    _read(META_KEYS, meta, file, "_sizer.")
    notes = meta.get("notes")
    if notes is not None and not isinstance(notes, str) and not (
            isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        raise InputError(file, "_sizer.notes", f"expected a string or a list of strings, got {excerpt(notes)}")




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
                 everything: bool = False, model_type: str | None = None) -> list[str]:
    """Keys of `data` sizer does not read: refused when their name says they shape the architecture
    (sizer would be silently wrong) and `refuse` (every unknown key when `everything`), unless their value
    switches the feature off (`switched_off`) or the key is one of USUAL_VALUES in the family `model_type`
    (`_usual_value`); else returned for the plan's assumptions."""
    unread = []
    for key in data:
        if not isinstance(key, str) or key in known or key in HARMLESS_KEYS or key.endswith(HARMLESS_SUFFIXES):
            continue
        usual = _usual_value(key, data[key], model_type) if model_type is not None else None
        if usual:
            unread.append(prefix + usual)
            continue
        if switched_off(data[key], key):  # e.g. "qkv_bias": false: a feature turned off shapes nothing
            unread.append(f"{prefix}{key} = {excerpt(data[key])} (switched off)")
            continue
        if refuse and (everything or any(word in key.lower() for word in ARCHITECTURE_WORDS)):
            raise InputError(file, prefix + excerpt(key, quote=False),
                             "architecture feature not modelled (sizer does not know this key, and it may "
                             "change parameters, memory or FLOPs)")
        unread.append(prefix + key)
    return unread


def _usual_value(key: str, value: Any, model_type: str) -> str | None:
    """A key of USUAL_VALUES in one of its families as the keys not read list it: its usual value named as such,
    another with what it would change (not refused: vLLM does not read it either); None for any other key."""
    if key not in USUAL_VALUES:
        return None
    families, usual, what, otherwise = USUAL_VALUES[key]
    if families is not None and model_type not in families:
        return None
    if value == usual and type(value) is type(usual):
        return f"{key} = {excerpt(value)} (the usual value: {what})"
    return f"{key} = {excerpt(value)} ({otherwise(value)}; the usual {excerpt(usual)}: {what})"


def switched_off(value: Any, key: str = "") -> bool:
    """A value that turns a feature off or states nothing: false, null, or an empty string, list or mapping; and the
    integer 0 for a key whose name marks a count or a width (COUNT_WORDS: MiniMax-M2's "shared_intermediate_size": 0,
    no shared expert). Whatever the key, such a value adds no layer, parameter or cache, so sizer reads it and notes
    it. A 0 under another name (a flag, an index, a ratio) is no such statement: it is read as any other value."""
    if value is False or value is None or (isinstance(value, (str, list, dict)) and not value):
        return True
    return (type(value) is int and value == 0 and isinstance(key, str)
            and any(word in key.lower() for word in COUNT_WORDS))


def from_hf_config(config: dict[str, Any], name: str, file: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the keys of a Hugging Face config.json (declared in KEYS, checked there
    and by the cross-key rules below); bad values raise InputError naming the key."""
    meta = read_key(KEYS["_sizer"], config, file)[0] or {}
    _check_meta(meta, file)
    top, prefix = config, ""
    _check_one_language_model(config, file)
    # a multimodal config: the language model's part (vLLM's get_hf_text_config takes text_config whenever there is
    # one; a config stating the language model beside it too must agree: _check_one_language_model)
    if "text_config" in config and not ("hidden_size" in config and "num_attention_heads" in config):
        config, prefix = read_key(KEYS["text_config"], config, file)[0] or {}, "text_config."
    got = _read({k: v for k, v in KEYS.items() if k not in ("_sizer", "text_config")}, config, file, prefix)
    c = {key: value for key, (value, _) in got.items()}
    q_path = prefix + got["quantization_config"][1]
    _one_value_per_key(config, prefix, file)
    if prefix:
        _one_value_per_key(top, "", file)
    if c["quantization_config"] is None and prefix:   # quantization stated beside text_config applies to it
        c["quantization_config"], q_path = read_key(KEYS["quantization_config"], top, file)
    vision_path = prefix + "vision_config."
    if c["vision_config"] is None and prefix:
        c["vision_config"], vision_path = read_key(KEYS["vision_config"], top, file)[0], "vision_config."
    model_type_path = prefix + "model_type"
    if prefix:   # the name stated beside text_config names the model (checked as in text_config)
        c["architectures"] = c["architectures"] or read_key(KEYS["architectures"], top, file)[0]
        if not c["model_type"]:
            c["model_type"], model_type_path = read_key(KEYS["model_type"], top, file)[0], "model_type"
    c["model_type"] = c["model_type"] or ""

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
    if not c["kv_lora_rank"] and c["v_head_dim"] and c["v_head_dim"] != c["head_dim"]:
        # MiMo-V2-Flash: keys and queries of 192, values of 128 a head; sizer's attention has one head size
        raise InputError(file, where("v_head_dim"), f"value heads of {c['v_head_dim']} beside query and key heads of "
                                                    f"{c['head_dim']} are not modelled without kv_lora_rank (MLA): "
                                                    "expected v_head_dim equal to head_dim, or none")
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    if c["qk_head_dim"] is not None and c["qk_head_dim"] != qk:
        raise InputError(file, where("qk_head_dim"), f"expected qk_nope_head_dim + qk_rope_head_dim = {qk}, "
                                                     f"got {excerpt(c['qk_head_dim'])}")
    quantization = (parse_quantization(c["quantization_config"], file, q_path + ".")
                    if c["quantization_config"] is not None else None)
    if c["use_sliding_window"] is False:
        # Qwen configs carry a window value that is switched off; vLLM reads the switch for every family
        # (ModelConfig.get_hf_config_sliding_window: use_sliding_window false -> no window)
        c["sliding_window"] = None
    c["rope_theta"] = _rope_theta(config, c, prefix, file)
    if c["intermediate_size"] is None and "intermediate_size" in config and c["block_configs"] is None:
        raise InputError(file, where("intermediate_size"), "expected a positive integer (null only with "
                                                           "block_configs, which state it per layer)")
    c["intermediate_size"] = c["intermediate_size"] or 4 * hidden
    _refuse_unmodelled(c, top if prefix else None, where, file)
    for key in ("torch_dtype", "mamba_ssm_cache_dtype"):
        if c[key] is not None and c[key] not in DTYPE_BYTES:
            raise InputError(file, where(key), f"dtype {excerpt(c[key])} is not modelled; expected one of "
                                               f"{', '.join(DTYPE_BYTES)} (a quantised checkpoint states its format "
                                               "in quantization_config)")
    if c["attn_output_gate"] is None:
        c["attn_output_gate"] = c["model_type"].startswith(GATED_ATTENTION_TYPES)
    c["qk_norm"] = c["model_type"].startswith(QK_NORM_TYPES)
    c["qk_norm_across_heads"] = c["model_type"] in QK_NORM_ACROSS_HEADS_TYPES
    c["attention_sinks"] = c["model_type"] in SINK_TYPES
    c["norms_per_layer"] = (4 if c["model_type"] in SANDWICH_NORM_TYPES
                            else 1 if c["model_type"] in PARALLEL_BLOCK_TYPES else 2)
    c["expert_biases"] = c["model_type"] in EXPERT_BIAS_TYPES
    c["non_gated_mlp"] = c["model_type"] in NON_GATED_MLP_TYPES
    c["o_proj_bias"] = bool(c["attention_bias"]) and c["model_type"] in O_PROJ_BIAS_TYPES
    if c["attention_bias"] is None:
        c["attention_bias"] = c["model_type"] == "qwen2"
    if c["mlp_bias"]:
        raise InputError(file, where("mlp_bias"), "architecture feature MLP biases are not modelled")
    layers = build_layers(c, _blocks(config, c, file, prefix), where, file)
    towers = () if c["language_model_only"] or read_key(KEYS["language_model_only"], top, file)[0] \
        else _towers(c, file, vision_path)
    # a dense family's routing keys in other spellings (Hunyuan's moe_topk) are named with the others it states
    known = KNOWN_SPELLINGS | (frozenset(TOP_K_KEYS) if c["model_type"] in DENSE_TYPES else frozenset())
    unread = _unread_keys(top, "", known, file, model_type=c["model_type"])
    if prefix:
        unread += _unread_keys(config, prefix, known, file, model_type=c["model_type"])
        unread += _beside_text_config(top, config)
    if towers:   # the tower's size is an estimate from its main shapes: other keys are listed, not refused
        unread += _unread_keys(c["vision_config"], vision_path, VISION_SPELLINGS, file, refuse=False)
    family = _check_family(c, model_type_path, where, file)   # after the keys: a family's features are named first
    notes = list([meta["notes"]] if isinstance(meta.get("notes"), str) else meta.get("notes") or [])
    if family:
        notes.append(family)
    notes += quantization.notes if quantization else ()
    if not any(isinstance(layer.ffn, MoEFFN) for layer in layers):
        notes += _unused_expert_keys(config, prefix, c["model_type"], c["architectures"], file)
    mtp = mtp_note(c)
    notes += [mtp] if mtp else []
    context = vllm_context(c, where("rope_scaling"), file)
    return ModelSpec(
        name=name,
        architecture=(c["architectures"] or [c["model_type"] or "unknown"])[0],
        hidden_size=hidden,
        vocab_size=c["vocab_size"],
        max_position_embeddings=c["max_position_embeddings"],
        layers=tuple(layers),
        towers=towers,
        tie_word_embeddings=(c["tie_word_embeddings"] if c["tie_word_embeddings"] is not None
                             else c["model_type"].startswith(TIED_EMBEDDING_TYPES)),
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
        mtp_layers=c["num_nextn_predict_layers"],
        rope_scaled_positions=context[0], rope_default_positions=context[1],
    )


def mtp_note(c: dict[str, Any]) -> str:
    """The multi-token-prediction layers a checkpoint holds beside its decoder layers, not counted (vLLM builds the
    num_hidden_layers decoder layers; DeepSeek's MTP layers load only as a speculative draft, method mtp): DeepSeek's
    num_nextn_predict_layers, or MiniMax-M2's num_mtp_modules modules of mtp_transformer_layers layers; "" for none."""
    layers, stated, loads = c["num_nextn_predict_layers"], "", "loads them only as a speculative-decoding draft"
    if not layers and c["num_mtp_modules"]:
        layers = c["num_mtp_modules"] * c["mtp_transformer_layers"]
        stated = f" (num_mtp_modules {c['num_mtp_modules']} x mtp_transformer_layers {c['mtp_transformer_layers']})"
        loads = "does not load them (it has no mtp draft for this model)"
    if not layers:
        return ""
    return f"{layers} multi-token-prediction layer(s) in the checkpoint{stated} are not counted: vLLM {loads}"


# RoPE types whose max_position_embeddings already counts the scaling: vLLM derives no longer context from them
ROPE_TYPES_PRESCALED = ("su", "longrope", "llama3")
# The RoPE types whose factor sizer reads as vLLM does (transformers' ROPE_INIT_FUNCTIONS, vLLM's get_rope and
# patch_rope_scaling; Gemma-4's proportional): a factor under another type is refused, not applied as vLLM applies
# an unknown one's
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "su", "llama3", "llama4", "mrope", "deepseek_yarn",
              "ntk", "proportional")


def _rope_type(rope: dict[str, Any], at: str, file: str | None) -> str:
    """A RoPE set's type (rope_type, or its older spelling type; "default" when neither is stated): the two
    spellings must agree (vLLM refuses a set where they differ), and a set that scales (a factor) must state a type
    sizer knows (vLLM refuses a set without one)."""
    stated = [(key, rope[key]) for key in ("rope_type", "type") if rope.get(key) is not None]
    for key, value in stated:
        if not isinstance(value, str):
            raise InputError(file, at + key, f"expected a string (the RoPE type), got {excerpt(value)}")
    if len(stated) == 2 and stated[0][1] != stated[1][1]:
        raise InputError(file, at + "type", f"{excerpt(stated[1][1])} beside rope_type {excerpt(stated[0][1])}: "
                                            "expected one RoPE type (vLLM refuses the two)")
    rope_type = stated[0][1] if stated else None
    if "factor" in rope and rope_type not in ROPE_TYPES:
        if rope_type is None:
            raise InputError(file, at + "rope_type", "missing beside a factor: expected the RoPE type the factor "
                                                     f"scales ({', '.join(ROPE_TYPES)})")
        raise InputError(file, at + stated[0][0], f"RoPE type {excerpt(rope_type)} is not modelled; expected one "
                                                  f"of {', '.join(ROPE_TYPES)}")
    return rope_type or "default"
ROPE_FACTOR = Key("factor", float, gt=0, le=MAX_ROPE_FACTOR, nullable=False)
ROPE_THETA = Key("rope_theta", float, gt=0, nullable=False)
# RoPE types whose scaling needs a factor: transformers' rope_config_validation refuses them without one (and so
# vLLM, which validates the config through it); a null factor is no factor
ROPE_TYPES_WITH_FACTOR = ("linear", "dynamic", "yarn", "llama3", "deepseek_yarn")


def _rope_theta(config: dict[str, Any], c: dict[str, Any], prefix: str, file: str | None) -> float:
    """The RoPE base: rope_theta, or, where the config states none (transformers v5 moved it), its RoPE set's
    (rope_parameters.rope_theta; the first set's where there is one per layer type); 10,000 where neither does."""
    sets = c["rope_scaling"] if isinstance(c["rope_scaling"], dict) else {}
    if config.get("rope_theta") is not None:
        return c["rope_theta"]
    at = next((k for k in KEYS["rope_scaling"].keys if isinstance(config.get(k), dict)), "rope_parameters")
    if sets and all(isinstance(v, dict) for v in sets.values()):
        layer_type, sets = next(iter(sets.items()))
        at = f"{at}.{excerpt(layer_type, quote=False)}"
    if "rope_theta" in config and sets.get("rope_theta") is None:      # null here and not stated there
        raise InputError(file, prefix + "rope_theta", "expected a number > 0, got null (and no rope_parameters "
                                                      "rope_theta stands for it)")
    return read_key(ROPE_THETA, sets, file, f"{prefix}{at}.")[0] if sets.get("rope_theta") is not None \
        else c["rope_theta"]
ORIGINAL_POSITIONS = Key("original_max_position_embeddings", int, ge=1, le=MAX_POSITIONS, nullable=False)


def vllm_context(c: dict[str, Any], path: str, file: str | None) -> tuple[int, int]:
    """(the longest context, the default max_model_len) vLLM derives from a config's RoPE scaling where they differ
    from max_position_embeddings, else 0 for each (vllm/config/model.py, _get_and_verify_max_len).
    The longest: max_position_embeddings x factor, counted from original_max_position_embeddings for yarn (Qwen's
    recipe for 128k: `{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`; the
    config's top-level original_max_position_embeddings first, as transformers v5 and vLLM's patch_rope_parameters
    take it, else the scaling's own, else max_position_embeddings); no change for llama3, longrope and Gemma-3, whose
    max_position_embeddings counts the scaling already. transformers v5's rope_parameters may hold one set per layer
    type (one factor for all, as vLLM assumes). The default: the longest, but LongRoPE's original length (vLLM
    serves short contexts unscaled by default)."""
    scaling = c["rope_scaling"]
    if not scaling:
        return 0, 0
    per_layer_type = [isinstance(v, dict) for v in scaling.values()]
    if any(per_layer_type) and not all(per_layer_type):
        key = next(k for k, v in scaling.items() if not isinstance(v, dict))
        raise InputError(file, f"{path}.{excerpt(key, quote=False)}",
                         "beside a set per layer type: expected one RoPE set or a set (a mapping) per layer type")
    sets = scaling.items() if all(per_layer_type) else [("", scaling)]
    positions, factor, longrope = c["max_position_embeddings"], 1.0, False
    for layer_type, rope in sets:
        at = f"{path}.{layer_type}." if layer_type else f"{path}."
        rope_type = _rope_type(rope, at, file)
        longrope |= rope_type == "longrope"
        if rope_type in ROPE_TYPES_PRESCALED or "gemma3" in c["model_type"]:
            continue
        if rope.get("factor") is not None:
            factor = read_key(ROPE_FACTOR, rope, file, at)[0]
        elif rope_type in ROPE_TYPES_WITH_FACTOR:
            raise InputError(file, at + "factor", f"missing; a {rope_type} RoPE scaling states its factor "
                                                  "(transformers' rope_config_validation requires it)")
        if rope_type == "yarn":
            positions = c["original_max_position_embeddings"] or (
                read_key(ORIGINAL_POSITIONS, rope, file, at)[0] if ORIGINAL_POSITIONS.name in rope else positions)
    scaled = int(positions * factor)           # each within its bounds: within 2^40 positions
    if scaled > MAX_POSITIONS:
        raise InputError(file, path, f"scales the context to {scaled:,} positions; expected at most {MAX_POSITIONS:,}")
    limit = 0 if scaled == c["max_position_embeddings"] else scaled
    default = c["original_max_position_embeddings"] if longrope else 0
    return limit, default if default and default != (limit or c["max_position_embeddings"]) else 0


# Keys of a multimodal config that describe the whole model, not its language model: stated beside text_config
# (the others are the language model's, which a config may state there too: Qwen2.5-VL's keep both, alike)
WRAPPER_KEYS = ("architectures", "model_type", "text_config", "vision_config", "audio_config", "language_model_only",
                "_sizer")
# read from beside text_config where text_config does not state them (from_hf_config, _refuse_unmodelled)
FROM_BESIDE = ("quantization_config", *(key for key, _, _ in UNMODELLED))


def _stated(spec: Key, data: dict) -> tuple[str, Any] | None:
    """(the spelling, the value) of the first spelling of `spec` that `data` states (not null), else None."""
    return next(((key, data[key]) for key in spec.keys if data.get(key) is not None), None)


def _one_value_per_key(data: dict[str, Any], prefix: str, file: str | None) -> None:
    """A key stated under two of its spellings (quantization_config and llm-compressor's compression_config,
    rope_scaling and rope_parameters, torch_dtype and dtype, ...) must state one value: the second is refused,
    not dropped."""
    for spec in KEYS.values():
        stated = [key for key in spec.keys if data.get(key) is not None]
        if len(stated) > 1 and any(data[key] != data[stated[0]] for key in stated[1:]):
            other = next(key for key in stated[1:] if data[key] != data[stated[0]])
            raise InputError(file, prefix + other, f"{excerpt(data[other])} beside {stated[0]} "
                                                   f"{excerpt(data[stated[0]])}, another spelling of the same key: "
                                                   "expected one value")


def _check_one_language_model(config: dict[str, Any], file: str | None) -> None:
    """A language-model key stated both beside text_config and in it must agree: two language models (or two
    quantisations, RoPE scalings, windows...) in one config are refused, not sized by whichever is read."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return
    for name, spec in KEYS.items():
        beside, inside = _stated(spec, config), _stated(spec, text)
        if name not in WRAPPER_KEYS and beside and inside and beside[1] != inside[1]:
            raise InputError(file, beside[0], f"{excerpt(beside[1])} here, {excerpt(inside[1])} in text_config: "
                                              "expected one language model (the same value in both, or the key in "
                                              "text_config alone)")


def _beside_text_config(top: dict[str, Any], text: dict[str, Any]) -> list[str]:
    """Language-model keys stated beside text_config and not in it, turning something on: not read (the language
    model's keys are text_config's, as vLLM reads them), so listed with the keys sizer does not read."""
    return [f"{spelling} (beside text_config, which does not state it)"
            for name, spec in KEYS.items() if name not in WRAPPER_KEYS + FROM_BESIDE
            for spelling, value in [_stated(spec, top) or ("", None)]
            if spelling and not switched_off(value, spelling) and _stated(spec, text) is None]


def _refuse_unmodelled(c: dict[str, Any], top: dict | None, where, file: str | None) -> None:
    """Refuse the features of UNMODELLED switched on; `top`: a multimodal config, whose keys beside text_config
    apply to the whole model."""
    for key, default, what in UNMODELLED:
        value, path = c[key], where(key)
        if value in (default, None, {}) and top is not None:
            value, path = read_key(KEYS[key], top, file)
        if value not in (default, None, {}):
            raise InputError(file, path, f"architecture feature {what} is not modelled")


def _check_family(c: dict[str, Any], model_type_path: str, where, file: str | None) -> str | None:
    """Refuse a family that is no decoder sizer places (NOT_DECODER_TYPES) and experts stated in a dense family
    sizer knows (DENSE_TYPES); a note for a family sizer was not checked on (not in MODEL_TYPES), whose layers
    are read from the keys, or for what a checked family's count leaves out (FAMILY_NOTES)."""
    model_type = c["model_type"]
    if model_type in NOT_DECODER_TYPES:
        raise InputError(file, model_type_path, f"model type {excerpt(model_type)} is not modelled: sizer places "
                                                "decoder layers (attention, Mamba-2 or linear attention, and MLP or "
                                                "experts), not an encoder's, an encoder-decoder's or a state-space "
                                                "or recurrent model's")
    if c["num_local_experts"] and model_type in DENSE_TYPES:
        raise InputError(file, where("num_local_experts"),
                         f"{c['num_local_experts']} experts in a {model_type} model, a dense family whose models "
                         "ignore the key; expected no experts, or the model_type of a mixture-of-experts family "
                         "(mixtral, qwen3_moe, ...: config_keys.MOE_TYPES)")
    if model_type in EXPERT_ONLY_TYPES and not c["num_local_experts"]:
        raise InputError(file, where("num_local_experts"), f"missing; a {model_type} model has routed experts "
                                                           "(num_local_experts, n_routed_experts or num_experts)")
    if model_type in MODEL_TYPES:
        return FAMILY_NOTES.get(model_type)
    family = f"model_type {excerpt(model_type)} is not a family" if model_type else "no model_type: not a family"
    return (f"{family} sizer was checked on (docs/models.md): its layers are read from the config's keys as "
            "attention and MLP (or expert) blocks; a key that would change them is refused")


def _unused_expert_keys(config: dict[str, Any], prefix: str, model_type: str, architectures: list[str] | None,
                        file: str | None) -> list[str]:
    """Mixture-of-experts keys (top-k routing, expert widths, which layers are MoE) on a model sized with no experts:
    named in a note for a dense family sizer knows (vLLM's model class for it, e.g. LlamaForCausalLM, reads none of
    them, so they route nothing); a top-k stated with no expert count in a family sizer was not checked on is
    refused (its config class may default to experts, as transformers' MixtralConfig does to 8)."""
    stated = [(key, config[key]) for key in EXPERT_KEYS if key in config]
    routing = [(key, value) for key, value in stated if key in TOP_K_KEYS and not switched_off(value) and value != 0]
    counted = any(config.get(key) is not None for key in KEYS["num_local_experts"].keys)    # 0 states dense
    if routing and not counted and model_type not in MODEL_TYPES:
        key, value = routing[0]
        raise InputError(file, prefix + key, f"{excerpt(value)} experts per token but no expert count, in a "
                                             f"model_type ({excerpt(model_type)}) sizer was not checked on, whose "
                                             "config may default to experts: expected the expert count "
                                             "(num_local_experts, num_experts or n_routed_experts; 0: dense)")
    if not stated:
        return []
    model = (architectures or [model_type or "this"])[0]
    listed = ", ".join(f"{prefix}{k} = {'null' if v is None else excerpt(v)}" for k, v in stated)
    why = (f"vLLM's {model} reads none of them" if model_type in DENSE_TYPES
           else "with no experts they route nothing")
    return [f"mixture-of-experts keys on a model with no experts, not used: {listed} ({why}; sized as a dense model)"]


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
