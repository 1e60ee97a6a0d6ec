"""Model architecture, read from a Hugging Face `config.json` (a path) or the bundled catalog.

Only the fields that decide memory and compute are kept. Llama/Mistral/Qwen/Gemma/Phi/
DeepSeek/gpt-oss style keys are understood: GQA and MQA (`num_key_value_heads`), MLA
(`kv_lora_rank`), sliding-window layer patterns, MoE expert counts, tied embeddings and
`quantization_config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.errors import excerpt
from sizer.errors import InputError
from sizer.inputs.safe_load import load_json
from sizer.inputs.schema import Key, read_key

CATALOG_DIR = Path(__file__).parent / "catalog" / "models"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    torch_dtype: str = "bfloat16"
    attention_bias: bool = False
    # Mixture of experts (num_experts == 0 means dense).
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0          # leading layers with a dense MLP (DeepSeek first_k_dense_replace)
    # Multi-head latent attention (kv_lora_rank == 0 means standard attention).
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Per-layer attention kind: "full" or "sliding" (window of `sliding_window` tokens).
    layer_attention: tuple[str, ...] = ()
    sliding_window: int | None = None
    quantization: dict[str, Any] | None = None
    params_official_total: float | None = None
    params_official_active: float | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for kind in self.layer_attention if kind == "sliding")

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0


def catalog_names() -> list[str]:
    return sorted(p.stem for p in CATALOG_DIR.glob("*.json"))


def load_config(name_or_path: str, file: str | None = None,
                field_path: str = "model") -> tuple[dict[str, Any], str, str]:
    """The config.json of a catalog name (`llama-3.1-8b`) or a path (a file or a folder holding one).

    Returns (config, model name, where it was read from).
    """
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix != ".json" and not path.exists():
        path = CATALOG_DIR / f"{str(name_or_path).lower()}.json"
        if not path.exists():
            known = ", ".join(catalog_names())
            raise InputError(file, field_path, f"unknown model {excerpt(name_or_path)}; "
                                               f"expected a catalog name ({known}) or a path to a config.json")
    if not path.exists():
        raise InputError(file, field_path, f"config file {excerpt(str(path))} does not exist")
    config = load_json(path)
    if not isinstance(config, dict):
        raise InputError(str(path), None, "expected a JSON object")
    meta = read_key(KEYS["_sizer"], config, str(path))[0] or {}
    _check_meta(meta, str(path))
    name = meta.get("id") or (path.parent.name if path.name == "config.json" else path.stem)
    return config, name, str(path)


def load_model(name_or_path: str, file: str | None = None, field_path: str = "model") -> ModelSpec:
    config, name, where = load_config(name_or_path, file, field_path)
    return from_hf_config(config, name=name, file=where)


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
MAX_BITS = 32

KEYS: dict[str, Key] = {k.name: k for k in (
    Key("architectures", list[str], doc="the first entry names the architecture"),
    Key("model_type", str),
    Key("hidden_size", int, ge=1, le=MAX_HIDDEN, nullable=False),
    Key("num_attention_heads", int, ge=1, le=MAX_HEADS, nullable=False),
    Key("num_hidden_layers", int, ge=1, le=MAX_LAYERS, nullable=False),
    # null is "not stated" in Hugging Face's own configs only for heterogeneous models (issue 10)
    Key("num_key_value_heads", int, ge=1, le=MAX_HEADS, nullable=False, doc="must divide num_attention_heads"),
    Key("multi_query", bool, doc="Falcon-style MQA: one KV head when num_key_value_heads is absent"),
    Key("head_dim", int, ge=1, le=MAX_HEAD_DIM, doc="default hidden_size / num_attention_heads"),
    Key("intermediate_size", int, ge=1, le=MAX_INTERMEDIATE, nullable=False, doc="default 4 x hidden_size"),
    Key("vocab_size", int, ge=1, le=MAX_VOCAB, nullable=False),
    Key("max_position_embeddings", int, ge=0, le=MAX_POSITIONS, nullable=False, default=0),
    Key("tie_word_embeddings", bool, doc="default true for Gemma, else false"),
    Key("rms_norm_eps", float, gt=0, le=1, nullable=False, default=1e-5),
    Key("rope_theta", float, gt=0, nullable=False, default=10000.0),
    Key("torch_dtype", str, aliases=("dtype",), default="bfloat16"),
    Key("attention_bias", bool, doc="default true for Qwen2, else false"),
    # Mixture of experts: 0 (or no key) is a dense model
    Key("num_local_experts", int, ge=0, le=MAX_EXPERTS, aliases=("n_routed_experts", "num_experts"), default=0),
    Key("num_experts_per_tok", int, ge=0, le=MAX_EXPERTS, aliases=("experts_per_token",),
        doc="required with experts; at most the number of experts"),
    Key("moe_intermediate_size", int, ge=0, le=MAX_INTERMEDIATE, default=0, doc="0: intermediate_size"),
    Key("n_shared_experts", int, ge=0, le=MAX_EXPERTS, default=0),
    Key("first_k_dense_replace", int, ge=0, le=MAX_LAYERS, default=0, doc="at most num_hidden_layers"),
    # Multi-head latent attention: kv_lora_rank 0 (or no key) is standard attention
    Key("kv_lora_rank", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("q_lora_rank", int, ge=0, le=MAX_HIDDEN, default=0),
    Key("qk_rope_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("qk_nope_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    Key("v_head_dim", int, ge=0, le=MAX_HEAD_DIM, default=0),
    # Sliding-window attention
    Key("sliding_window", int, ge=1, le=MAX_POSITIONS, doc="tokens; null: no window"),
    Key("use_sliding_window", bool),
    Key("sliding_window_pattern", int, ge=1, le=MAX_LAYERS, doc="Gemma 3: every n-th layer is global"),
    Key("layer_types", list[str], doc="one entry per layer"),
    Key("quantization_config", dict),
    Key("text_config", dict),
    Key("_sizer", dict, doc="the catalog's own metadata"),
)}

# quantization_config, by quant_method ("_marlin" suffix removed). Bits each method's kernels
# store: GPTQ 2, 3, 4 or 8; AWQ 4 only; the float and 8-bit formats their own width.
QUANT_BITS = {"gptq": (2, 3, 4, 8), "awq": (4,), "fp8": (8,), "int8": (8,), "nvfp4": (4,), "mxfp4": (4,)}
QUANT_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("quant_method", str),
    Key("bits", int, ge=1, le=MAX_BITS, aliases=("w_bit",)),
    # -1 is GPTQ's per-channel quantisation: one scale per output row (see weights.scale_bytes)
    Key("group_size", int, ge=-1, le=MAX_HIDDEN, aliases=("q_group_size",), doc="-1 or >= 1"),
    Key("weight_block_size", list[int]),
    Key("modules_to_not_convert", list[str]),
    Key("quant_algo", str),
    Key("config_groups", dict),
)}
# llm-compressor (compressed-tensors): each config group's weight scheme
CT_WEIGHT_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("num_bits", int, ge=1, le=MAX_BITS),
    Key("type", str),
    Key("group_size", int, ge=-1, le=MAX_HIDDEN, doc="-1 or >= 1"),
)}
META_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("id", str),
    Key("params_official_total", float, ge=0),
    Key("params_official_active", float, ge=0),
    Key("source", str),
)}


def _read(keys: dict[str, Key], data: dict, file: str | None, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """Every declared key of `data`: name -> (value or default, the key it was read from)."""
    return {name: read_key(spec, data, file, prefix) for name, spec in keys.items()}


def _group_size(value: int | None, path: str, file: str | None) -> None:
    if value == 0:
        raise InputError(file, path, "expected -1 (per channel) or an integer >= 1, got 0")


def _check_quantization(q: dict, file: str | None, prefix: str) -> None:
    """The quantization_config keys weights.py reads: types, bits in the method's set, group sizes."""
    got = _read(QUANT_KEYS, q, file, prefix)
    method = str(got["quant_method"][0] or "").lower().removesuffix("_marlin")
    bits, bits_key = got["bits"]
    if bits is not None and method in QUANT_BITS and bits not in QUANT_BITS[method]:
        allowed = ", ".join(map(str, QUANT_BITS[method]))
        raise InputError(file, prefix + bits_key, f"expected one of {allowed} for {method}, got {excerpt(bits)}")
    _group_size(got["group_size"][0], prefix + got["group_size"][1], file)
    block = got["weight_block_size"][0]
    if block is not None and not (len(block) == 2 and all(0 < b <= MAX_HIDDEN for b in block)):
        raise InputError(file, prefix + "weight_block_size", f"expected two positive integers, got {excerpt(block)}")
    for name, group in (got["config_groups"][0] or {}).items():
        path = f"{prefix}config_groups.{excerpt(name, quote=False)}"
        if not isinstance(group, dict):
            raise InputError(file, path, f"expected a JSON object, got {excerpt(group)}")
        weights, _ = read_key(Key("weights", dict), group, file, path + ".")
        if weights is not None:
            ct = _read(CT_WEIGHT_KEYS, weights, file, path + ".weights.")
            _group_size(ct["group_size"][0], path + ".weights.group_size", file)


def _check_meta(meta: dict, file: str | None) -> None:
    _read(META_KEYS, meta, file, "_sizer.")
    notes = meta.get("notes")
    if notes is not None and not isinstance(notes, str) and not (
            isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        raise InputError(file, "_sizer.notes", f"expected a string or a list of strings, got {excerpt(notes)}")


def _layer_pattern(c: dict[str, Any], num_layers: int, prefix: str,
                   file: str | None) -> tuple[tuple[str, ...], int | None]:
    """Which layers use a sliding window: explicit `layer_types`, Gemma's pattern, or all/none."""
    window = c["sliding_window"]
    if c["use_sliding_window"] is False and c["model_type"].startswith("qwen"):
        window = None  # Qwen configs carry a window value that is switched off
    layer_types = c["layer_types"]
    if layer_types:
        if len(layer_types) != num_layers:
            raise InputError(file, prefix + "layer_types", f"expected {num_layers} entries, got {len(layer_types)}")
        kinds = tuple("sliding" if "sliding" in t else "full" for t in layer_types)
        return kinds, window if "sliding" in kinds else None
    if not window:
        return ("full",) * num_layers, None
    pattern = c["sliding_window_pattern"]
    if pattern:  # Gemma 3: every pattern-th layer is global, the rest slide
        kinds = tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(num_layers))
    elif c["model_type"] == "gemma2":  # Gemma 2 alternates, starting with a sliding layer
        kinds = tuple("sliding" if i % 2 == 0 else "full" for i in range(num_layers))
    elif window >= c["max_position_embeddings"]:
        kinds = ("full",) * num_layers  # a window as long as the context is no window
    else:
        kinds = ("sliding",) * num_layers  # Mistral-7B-v0.1 style: every layer slides
    return kinds, window if "sliding" in kinds else None


def from_hf_config(config: dict[str, Any], name: str, file: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the keys of a Hugging Face config.json (declared in KEYS, checked there
    and by the cross-key rules below); bad values raise InputError naming the key."""
    meta = read_key(KEYS["_sizer"], config, file)[0] or {}
    _check_meta(meta, file)
    prefix = ""
    if config.get("num_key_value_heads", 0) is None:  # heterogeneous configs (issue 10) state it per layer
        raise InputError(file, "num_key_value_heads", "missing; expected a positive integer")
    if "text_config" in config and "hidden_size" not in config:  # a multimodal config: the language model's part
        config, prefix = read_key(KEYS["text_config"], config, file)[0] or {}, "text_config."
    got = _read({k: v for k, v in KEYS.items() if k not in ("_sizer", "text_config")}, config, file, prefix)
    c = {key: value for key, (value, _) in got.items()}
    c["model_type"] = c["model_type"] or ""

    def where(key: str) -> str:
        return prefix + got[key][1]

    hidden, heads, layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size"):
        if c[key] is None:
            raise InputError(file, where(key), "missing; expected a positive integer")
    kv_heads = c["num_key_value_heads"]
    if kv_heads is None:
        kv_heads = 1 if c["multi_query"] else heads
    elif heads % kv_heads:
        raise InputError(file, where("num_key_value_heads"),
                         f"{kv_heads} does not divide the {heads} attention heads")
    head_dim = c["head_dim"] if c["head_dim"] is not None else hidden // heads
    if head_dim < 1:
        raise InputError(file, where("hidden_size"), f"{hidden} / {heads} heads leaves no head dimension")
    num_experts, top_k = c["num_local_experts"], c["num_experts_per_tok"]
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
    if c["kv_lora_rank"] and not c["v_head_dim"]:
        raise InputError(file, where("v_head_dim"), "expected an integer >= 1 with kv_lora_rank (MLA)")
    quantization = c["quantization_config"]
    if quantization is not None:
        _check_quantization(quantization, file, where("quantization_config") + ".")
    kinds, window = _layer_pattern(c, layers, prefix, file)
    intermediate = c["intermediate_size"] or 4 * hidden
    notes = meta.get("notes")
    return ModelSpec(
        name=name,
        architecture=(c["architectures"] or [c["model_type"] or "unknown"])[0],
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=c["vocab_size"],
        max_position_embeddings=c["max_position_embeddings"],
        tie_word_embeddings=(c["tie_word_embeddings"] if c["tie_word_embeddings"] is not None
                             else c["model_type"].startswith("gemma")),
        rms_norm_eps=c["rms_norm_eps"],
        rope_theta=c["rope_theta"],
        torch_dtype=c["torch_dtype"] or "bfloat16",
        attention_bias=(c["attention_bias"] if c["attention_bias"] is not None else c["model_type"] == "qwen2"),
        num_experts=num_experts,
        num_experts_per_tok=top_k or 0,
        moe_intermediate_size=c["moe_intermediate_size"] or (intermediate if num_experts else 0),
        num_shared_experts=c["n_shared_experts"],
        num_dense_layers=c["first_k_dense_replace"],
        kv_lora_rank=c["kv_lora_rank"],
        q_lora_rank=c["q_lora_rank"],
        qk_rope_head_dim=c["qk_rope_head_dim"],
        qk_nope_head_dim=c["qk_nope_head_dim"],
        v_head_dim=c["v_head_dim"],
        layer_attention=kinds,
        sliding_window=window,
        quantization=quantization,
        params_official_total=meta.get("params_official_total"),
        params_official_active=meta.get("params_official_active"),
        source=str(meta.get("source") or file or ""),
        notes=tuple([notes] if isinstance(notes, str) and notes else notes or ()),
    )
