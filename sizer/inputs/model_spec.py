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

from sizer.errors import InputError
from sizer.inputs.safe_load import excerpt, load_json

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
    meta = config.get("_sizer", {})
    name = meta.get("id") or (path.parent.name if path.name == "config.json" else path.stem)
    return config, name, str(path)


def load_model(name_or_path: str, file: str | None = None, field_path: str = "model") -> ModelSpec:
    config, name, where = load_config(name_or_path, file, field_path)
    return from_hf_config(config, name=name, file=where)


def _int(config: dict, key: str, file: str | None, default: int | None = None, positive: bool = False) -> int:
    value = config.get(key, default)
    if value is None:
        raise InputError(file, key, "missing; expected a positive integer")
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        kind = "positive" if positive else "non-negative"
        raise InputError(file, key, f"expected a {kind} integer, got {excerpt(value)}")
    return value


def _mapping(config: dict, key: str, file: str | None) -> dict | None:
    value = config.get(key)
    if value is not None and not isinstance(value, dict):
        raise InputError(file, key, f"expected a JSON object, got {excerpt(value)}")
    return value


def _layer_pattern(config: dict, num_layers: int, file: str | None) -> tuple[tuple[str, ...], int | None]:
    """Which layers use a sliding window: explicit `layer_types`, Gemma's pattern, or all/none."""
    window = config.get("sliding_window")
    if config.get("use_sliding_window") is False and config.get("model_type", "").startswith("qwen"):
        window = None  # Qwen configs carry a window value that is switched off
    layer_types = config.get("layer_types")
    if layer_types:
        if len(layer_types) != num_layers:
            raise InputError(file, "layer_types", f"expected {num_layers} entries, got {len(layer_types)}")
        kinds = tuple("sliding" if "sliding" in str(t) else "full" for t in layer_types)
        return kinds, window if "sliding" in kinds else None
    if not window:
        return ("full",) * num_layers, None
    pattern = config.get("sliding_window_pattern")
    model_type = config.get("model_type", "")
    if pattern:  # Gemma 3: every pattern-th layer is global, the rest slide
        kinds = tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(num_layers))
    elif model_type == "gemma2":  # Gemma 2 alternates, starting with a sliding layer
        kinds = tuple("sliding" if i % 2 == 0 else "full" for i in range(num_layers))
    elif window >= config.get("max_position_embeddings", 0):
        kinds = ("full",) * num_layers  # a window as long as the context is no window
    else:
        kinds = ("sliding",) * num_layers  # Mistral-7B-v0.1 style: every layer slides
    return kinds, window if "sliding" in kinds else None


def from_hf_config(config: dict[str, Any], name: str, file: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the keys of a Hugging Face config.json; bad values raise InputError."""
    if "text_config" in config and "hidden_size" not in config:
        config = {**(_mapping(config, "text_config", file) or {}), "_sizer": config.get("_sizer", {})}
    meta = config.get("_sizer", {})
    hidden = _int(config, "hidden_size", file, positive=True)
    heads = _int(config, "num_attention_heads", file, positive=True)
    layers = _int(config, "num_hidden_layers", file, positive=True)
    kv_heads = _int(config, "num_key_value_heads", file, default=1 if config.get("multi_query") else heads,
                    positive=True)
    if heads % kv_heads:
        raise InputError(file, "num_key_value_heads", f"{kv_heads} does not divide the {heads} attention heads")
    head_dim = _int(config, "head_dim", file, positive=True) if config.get("head_dim") is not None else hidden // heads
    if head_dim < 1:
        raise InputError(file, "hidden_size", f"{hidden} / {heads} heads leaves no head dimension")
    num_experts = config.get("num_local_experts") or config.get("n_routed_experts") or config.get("num_experts") or 0
    if num_experts:
        _int(config, "num_experts_per_tok", file, default=config.get("experts_per_token"), positive=True)
    window = config.get("sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
        raise InputError(file, "sliding_window", f"expected an integer or null, got {excerpt(window)}")
    block = (_mapping(config, "quantization_config", file) or {}).get("weight_block_size")
    if block is not None and not (isinstance(block, list) and len(block) == 2
                                  and all(isinstance(b, int) and b > 0 for b in block)):
        raise InputError(file, "quantization_config.weight_block_size",
                         f"expected two positive integers, got {excerpt(block)}")
    kinds, window = _layer_pattern(config, layers, file)
    architectures = config.get("architectures") or [config.get("model_type", "unknown")]
    return ModelSpec(
        name=name,
        architecture=architectures[0],
        hidden_size=hidden,
        intermediate_size=_int(config, "intermediate_size", file, default=4 * hidden, positive=True),
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=_int(config, "vocab_size", file, positive=True),
        max_position_embeddings=_int(config, "max_position_embeddings", file, default=0),
        tie_word_embeddings=bool(config.get("tie_word_embeddings",
                                            str(config.get("model_type", "")).startswith("gemma"))),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-5)),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        torch_dtype=str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"),
        attention_bias=bool(config.get("attention_bias", config.get("model_type") == "qwen2")),
        num_experts=int(num_experts),
        num_experts_per_tok=int(config.get("num_experts_per_tok") or config.get("experts_per_token") or 0),
        moe_intermediate_size=int(config.get("moe_intermediate_size")
                                  or (config.get("intermediate_size", 0) if num_experts else 0)),
        num_shared_experts=int(config.get("n_shared_experts") or 0),
        num_dense_layers=int(config.get("first_k_dense_replace") or 0),
        kv_lora_rank=int(config.get("kv_lora_rank") or 0),
        q_lora_rank=int(config.get("q_lora_rank") or 0),
        qk_rope_head_dim=int(config.get("qk_rope_head_dim") or 0),
        qk_nope_head_dim=int(config.get("qk_nope_head_dim") or 0),
        v_head_dim=int(config.get("v_head_dim") or 0),
        layer_attention=kinds,
        sliding_window=window,
        quantization=config.get("quantization_config"),
        params_official_total=meta.get("params_official_total"),
        params_official_active=meta.get("params_official_active"),
        source=str(meta.get("source", file or "")),
        notes=tuple(meta.get("notes", []) if isinstance(meta.get("notes"), list)
                    else [meta["notes"]] if meta.get("notes") else []),
    )
