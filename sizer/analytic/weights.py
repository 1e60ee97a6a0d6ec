"""Parameters by module, derived from the architecture, and their bytes in each weight format.

Every linear layer is listed with its shape, so a format's scales and zeros are counted per
matrix and per group exactly, and modules a format leaves unconverted (embeddings, lm_head,
norms, routers, biases) are counted at the model's own precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simulator.errors import excerpt
from sizer.errors import InputError
from sizer.inputs.layers import (
    ATTENTION,
    EXPERT,
    LM_HEAD,
    MLP,
    RECURRENT,
    REPLICATED,
    ROUTER,
    SHARED_EXPERT,
    VISION,
    Linear,
)
from sizer.inputs.model_spec import ModelSpec


@dataclass(frozen=True)
class LinearGroup:
    """`count` matrices of shape in_features x out_features (per model, all layers listed in `layers`)."""
    name: str                    # the module path inside a layer ("self_attn.q_proj"), or "lm_head"
    kind: str                    # role for sharding and quantisation (sizer.inputs.layers)
    in_features: int
    out_features: int
    count: int
    kv_heads: int = 0            # k/v projections: KV heads they produce (replicated when TP exceeds them)
    layers: tuple[int, ...] = ()  # decoder layers holding it (empty: lm_head, vision tower)

    @property
    def params(self) -> int:
        return self.in_features * self.out_features * self.count


@dataclass(frozen=True)
class ParamCount:
    total: int
    active: int                  # per token: MoE counts only the routed top-k experts; towers not at all
    embedding: int
    lm_head: int
    linear: int                  # all linear layers except lm_head (experts and towers included)
    norms_and_biases: int
    towers: int                  # vision encoders and projectors (their linear layers are in `linear`)


def linear_groups(m: ModelSpec) -> list[LinearGroup]:
    """Every matrix of the model, grouped: one group per (module, shape) across the layers holding it."""
    h = m.hidden_size
    by_shape: dict[Linear, list[int]] = {}
    for i, layer in enumerate(m.layers):
        for lin in layer.linears(h):
            by_shape.setdefault(lin, []).append(i)
    groups = [LinearGroup(lin.module, lin.role, lin.in_features, lin.out_features, lin.count * len(idx),
                          lin.kv_heads, tuple(idx)) for lin, idx in by_shape.items()]
    for tower in m.towers:
        groups += [LinearGroup(lin.module, lin.role, lin.in_features, lin.out_features, lin.count)
                   for lin in tower.linears()]
    if not m.tie_word_embeddings:
        groups.append(LinearGroup("lm_head", LM_HEAD, h, m.vocab_size, 1))
    return groups


def _norms_and_biases(m: ModelSpec) -> int:
    """Vectors and small tensors: each layer's norms, biases, convolutions; the final norm; the towers'."""
    h = m.hidden_size
    return h + sum(layer.extra_params(h) for layer in m.layers) + sum(t.extra_params() for t in m.towers)


def _routed_inactive(m: ModelSpec, groups: list[LinearGroup]) -> int:
    """Expert parameters a token does not use: all but top-k of each MoE layer's routed experts."""
    inactive = 0
    for g in groups:
        if g.kind == EXPERT:
            moe = m.layers[g.layers[0]].ffn
            inactive += g.params - g.params * moe.top_k // moe.num_experts
    return inactive


def parameter_count(m: ModelSpec) -> ParamCount:
    groups = linear_groups(m)
    embedding = m.vocab_size * m.hidden_size
    lm_head = sum(g.params for g in groups if g.kind == LM_HEAD)
    linear = sum(g.params for g in groups if g.kind != LM_HEAD)
    other = _norms_and_biases(m)
    towers = sum(g.params for g in groups if g.kind == VISION) + sum(t.extra_params() for t in m.towers)
    total = embedding + lm_head + linear + other
    active = total - _routed_inactive(m, groups) - towers
    return ParamCount(total, active, embedding, lm_head, linear, other, towers)


@dataclass(frozen=True)
class LayerKind:
    """One row of the per-layer-kind breakdown: the layers with one mixer or FFN kind, and what they hold."""
    part: str                    # "mixer", "ffn", or "model" (embedding, lm_head, final norm, towers)
    kind: str                    # "full attention", "Mamba-2", "MoE 6 of 128 experts (width 1856)", ...
    layers: int
    parameters: int              # norms of a layer are counted with its mixer
    kv_values_per_token: int     # values these layers cache per token (x KV dtype bytes = KV bytes)
    state_bytes_per_seq: int     # Mamba-2 / linear attention: bytes of state per sequence


def layer_kinds(m: ModelSpec) -> list[LayerKind]:
    """Parameters, KV and state by mixer kind and FFN kind; the rows sum to parameter_count(m).total."""
    h, rows = m.hidden_size, []
    for part, of in (("mixer", lambda layer: layer.mixer), ("ffn", lambda layer: layer.ffn)):
        kinds: dict[str, list] = {}
        for layer in m.layers:
            kinds.setdefault(of(layer).label, []).append(layer)
        for label, layers in kinds.items():
            if label == "none":
                continue
            block = [of(layer) for layer in layers]
            params = sum(sum(lin.params for lin in b.linears(h)) + b.extra_params(h) for b in block)
            kv = state = 0
            if part == "mixer":
                params += sum(layer.norms for layer in layers) * h
                kv, state = sum(b.kv_values_per_token for b in block), sum(m.state_bytes_per_seq(b) for b in block)
            rows.append(LayerKind(part, label, len(layers), params, kv, state))
    norms_without_mixer = sum(layer.norms for layer in m.layers if layer.mixer.label == "none") * h
    counts = parameter_count(m)
    rows.append(LayerKind("model", "embedding, lm_head, final norm", 0,
                          counts.embedding + counts.lm_head + h + norms_without_mixer, 0, 0))
    if counts.towers:
        rows.append(LayerKind("model", "vision encoder and projector", 0, counts.towers, 0, 0))
    return rows


# ---- weight formats -------------------------------------------------------------------


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: int                    # bits per stored value of a converted matrix
    compute: str                 # which peak FLOP/s the GEMMs run at (when the GPU has it)
    description: str


FORMATS = {
    "bf16": WeightFormat("bf16", 16, "bf16", "bfloat16, 2 bytes per value"),
    "fp16": WeightFormat("fp16", 16, "fp16", "float16, 2 bytes per value"),
    "fp32": WeightFormat("fp32", 32, "fp32", "float32, 4 bytes per value"),
    "fp8": WeightFormat("fp8", 8, "fp8", "FP8 E4M3 weights and activations; "
                        "fp32 scale per tensor (or per 128x128 block when the checkpoint says so)"),
    "int8": WeightFormat("int8", 8, "int8", "INT8 weights and activations (W8A8); fp32 scale per output channel"),
    "awq": WeightFormat("awq", 4, "bf16", "AWQ 4-bit weights; fp16 scale and 4-bit zero per group along the input; "
                        "activations 16-bit"),
    "gptq": WeightFormat("gptq", 4, "bf16", "GPTQ 4-bit weights; fp16 scale and 4-bit zero per group along the input; "
                         "activations 16-bit"),
    "nvfp4": WeightFormat("nvfp4", 4, "fp4", "NVFP4: 4-bit floats in blocks of 16 with an FP8 (E4M3) scale each, "
                          "plus fp32 per-tensor scales"),
    "mxfp4": WeightFormat("mxfp4", 4, "fp4",
                          "MXFP4: 4-bit floats in blocks of 32 with a power-of-two (E8M0, 1 byte) scale each"),
}

# vLLM's dtype=auto serves float32 checkpoints in float16, bfloat16 ones in bfloat16.
DTYPE_FORMATS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16", "half": "fp16"}
UNCONVERTED_KINDS = {ROUTER, LM_HEAD}   # kept at model precision by every format here


def _compressed_tensors_format(q: dict) -> tuple[str, int | None]:
    """llm-compressor's config: the first config group's weight scheme."""
    groups = q.get("config_groups") or {}
    weights = next(iter(groups.values()), {}).get("weights") or {} if isinstance(groups, dict) else {}
    bits, kind = weights.get("num_bits"), str(weights.get("type", "int"))
    if bits == 4:
        return ("nvfp4" if kind == "float" else "gptq"), weights.get("group_size")
    if bits == 8:
        return ("fp8" if kind == "float" else "int8"), None
    return "", None


def checkpoint_format(m: ModelSpec) -> str:
    """The format the checkpoint ships in: its quantization_config, else its torch_dtype ("" if not modelled)."""
    return _checkpoint(m)[0]


def _checkpoint(m: ModelSpec) -> tuple[str, int | None, int | None]:
    """(format name, bits, group size) of the checkpoint's quantization_config; name "" if not modelled."""
    q = m.quantization
    if not q:
        return DTYPE_FORMATS.get(m.torch_dtype, "bf16"), None, None
    method = str(q.get("quant_method", "")).lower().removesuffix("_marlin")
    if method in FORMATS:
        return method, q.get("bits") or q.get("w_bit"), q.get("group_size") or q.get("q_group_size")
    if method == "compressed-tensors":
        name, group = _compressed_tensors_format(q)
        return name, None, group
    if method == "modelopt":
        return ("nvfp4" if "fp4" in str(q.get("quant_algo", "")).lower() else "fp8"), None, None
    return "", None, None


def weight_format(m: ModelSpec, requested: str, group_size: int, file: str | None = None) -> tuple[WeightFormat, int]:
    """The format to size and its group size: the requested one, or for `auto` the checkpoint's
    own (its bits and group size from quantization_config)."""
    if requested != "auto":
        return FORMATS[requested], group_size
    name, bits, group = _checkpoint(m)
    if not name:
        method = (m.quantization or {}).get("quant_method")
        raise InputError(file, "deployment.quantization",
                         f"the checkpoint's quant_method {excerpt(method)} is not modelled; "
                         "name a format (bf16, fp8, int8, awq, gptq, nvfp4, mxfp4)")
    fmt = FORMATS[name]
    if bits and int(bits) != fmt.bits:
        fmt = replace(fmt, bits=int(bits), description=fmt.description.replace("4-bit", f"{int(bits)}-bit"))
    return fmt, int(group or group_size)


def plain_bytes_per_value(fmt: WeightFormat) -> float:
    """Bytes per value of what `fmt` leaves unconverted (embeddings, norms, lm_head, routers):
    the format's own width when it is a plain float format, else 16-bit as quantised checkpoints keep them."""
    return fmt.bits / 8 if fmt.bits >= 16 else 2


def is_converted(g: LinearGroup, fmt: WeightFormat, m: ModelSpec) -> bool:
    if fmt.bits >= 16 or g.kind in UNCONVERTED_KINDS:
        return False
    keep = [str(x) for x in (m.quantization or {}).get("modules_to_not_convert") or []]
    if keep and checkpoint_format(m) == fmt.name:
        kind_words = {ATTENTION: ("attn", "attention"), REPLICATED: ("attn", "attention"), MLP: ("mlp",),
                      EXPERT: ("experts",), SHARED_EXPERT: ("shared",), RECURRENT: ("mixer", "linear_attn"),
                      VISION: ("visual", "vision")}
        return not any(word in k for k in keep for word in kind_words.get(g.kind, ()))
    return True


def scale_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int, m: ModelSpec) -> float:
    """Bytes of scales and zeros the format stores for `g`, all `count` matrices."""
    k, n, c = g.in_features, g.out_features, g.count
    if fmt.name == "fp8":
        block = (m.quantization or {}).get("weight_block_size") if checkpoint_format(m) == "fp8" else None
        if block:
            return math.ceil(k / block[0]) * math.ceil(n / block[1]) * 4 * c
        return 2 * 4 * c                       # weight and input scale, fp32, per tensor
    if fmt.name == "int8":
        return n * 4 * c
    if fmt.name in ("awq", "gptq"):
        # group_size -1 is GPTQ's per-channel quantisation: one
        # scale and zero per output row, i.e. a single group spanning the whole input dimension.
        per_group = k if group_size == -1 else group_size
        groups = math.ceil(k / per_group) * n
        return groups * (2 + 0.5) * c          # fp16 scale + packed 4-bit zero
    if fmt.name == "nvfp4":
        return (k * n / 16) * 1 * c + 2 * 4 * c
    if fmt.name == "mxfp4":
        return (k * n / 32) * 1 * c
    return 0.0


def group_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int, m: ModelSpec) -> tuple[float, float, bool]:
    """(value bytes, scale bytes, converted?) of group `g` stored in `fmt`."""
    if is_converted(g, fmt, m):
        return g.params * fmt.bits / 8, scale_bytes(g, fmt, group_size, m), True
    return g.params * plain_bytes_per_value(fmt), 0.0, False
