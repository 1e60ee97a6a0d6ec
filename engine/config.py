"""The engine's view of a model: the shapes one device holds after the TP split and scaling.

The engine runs dense and MoE Llama/Mistral/Qwen-style decoders (RMSNorm, RoPE, GQA/MQA,
SwiGLU) whose layers are all alike. Multi-head latent attention, sliding-window layers and
hybrid models (Mamba-2 or linear-attention layers, per-layer widths, vision towers) change the
kernels and the cache layout, so they are refused with a clear message rather than run wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from validation.errors import FieldError


class ModelShape(Protocol):
    """What the engine reads of a model description (sizer's ModelSpec has these fields)."""
    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    num_shared_experts: int
    num_dense_layers: int
    is_mla: bool
    is_moe: bool
    num_sliding_layers: int
    is_uniform_decoder: bool        # every layer the same attention; dense layers, then one MoE kind


@dataclass(frozen=True)
class EngineConfig:
    name: str
    hidden_size: int
    intermediate_size: int          # dense MLP width on this device
    num_layers: int                 # layers the engine builds (after --scale)
    model_num_layers: int           # layers the real model has
    num_heads: int                  # query heads on this device
    num_kv_heads: int               # KV heads on this device (replicated when TP > KV heads)
    head_dim: int
    vocab_size: int                 # lm_head rows on this device (vocab split by TP)
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool = False
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0  # per expert, on this device
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    tp: int = 1

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def layer_is_moe(self, layer: int) -> bool:
        return self.is_moe and layer >= self.num_dense_layers

    @property
    def num_moe_layers(self) -> int:
        return sum(self.layer_is_moe(i) for i in range(self.num_layers))

    @property
    def qkv_size(self) -> int:
        return (self.num_heads + 2 * self.num_kv_heads) * self.head_dim


@dataclass(frozen=True)
class EngineBuild:
    """How the engine is built for a replay (`sizer validate`): as the calibration that prices it ran."""
    kernels: str                    # 'triton' or 'torch'
    tp: int
    scale: float                    # share of the model's layers built
    source: str                     # the file these come from (errors name it)


def engine_config(spec: ModelShape, tp: int = 1, scale: float = 1.0, file: str | None = None,
                  fields: tuple[str, str] = ("tp", "scale")) -> EngineConfig:
    """Shapes for one of `tp` devices; `scale` in (0, 1] keeps that share of the layers. A FieldError
    names `file` and `fields`, where the caller read tp and scale (`--tp`, `--scale` for calibrate)."""
    tp_field, scale_field = fields
    if spec.is_mla:
        raise FieldError(file, "model", f"{spec.name} uses multi-head latent attention; "
                                        "the bundled engine does not support MLA yet")
    if spec.num_sliding_layers:
        raise FieldError(file, "model", f"{spec.name} has sliding-window layers; "
                                        "the bundled engine does not support sliding-window attention yet")
    if not spec.is_uniform_decoder:
        raise FieldError(file, "model", f"{spec.name} has layers of different kinds (hybrid mixers, per-layer "
                                        "widths or a vision tower); the bundled engine builds uniform decoders only")
    if tp < 1 or spec.num_attention_heads % tp:
        raise FieldError(file, tp_field, f"TP {tp} must divide the {spec.num_attention_heads} attention heads")
    if spec.num_kv_heads >= tp and spec.num_kv_heads % tp:
        raise FieldError(file, tp_field, f"TP {tp} must divide the {spec.num_kv_heads} KV heads")
    if not 0 < scale <= 1:
        raise FieldError(file, scale_field, f"expected a share of the layers in (0, 1], got {scale}")
    widths = [spec.intermediate_size] + ([spec.moe_intermediate_size] if spec.is_moe else [])
    if any(w % tp for w in widths) or spec.vocab_size % tp:
        raise FieldError(file, tp_field,
                         f"TP {tp} must divide the MLP widths {widths} and the vocabulary {spec.vocab_size}")
    return EngineConfig(
        name=spec.name,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size // tp,
        num_layers=max(1, round(spec.num_layers * scale)),
        model_num_layers=spec.num_layers,
        num_heads=spec.num_attention_heads // tp,
        num_kv_heads=max(1, spec.num_kv_heads // tp),
        head_dim=spec.head_dim,
        vocab_size=spec.vocab_size // tp,
        rms_norm_eps=spec.rms_norm_eps,
        rope_theta=spec.rope_theta,
        attention_bias=spec.attention_bias,
        num_experts=spec.num_experts,
        num_experts_per_tok=spec.num_experts_per_tok,
        moe_intermediate_size=spec.moe_intermediate_size // tp,
        num_shared_experts=spec.num_shared_experts,
        num_dense_layers=min(spec.num_dense_layers, spec.num_layers),
        tp=tp,
    )
