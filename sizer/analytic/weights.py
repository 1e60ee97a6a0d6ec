"""Parameters by module, derived from the architecture.

Every linear layer is listed with its shape and the layers holding it, so a format's scales and
zeros are counted per matrix and per group exactly, and modules a format leaves unconverted are
found by name (their bytes: sizer.analytic.formats).
"""

from __future__ import annotations

from dataclasses import dataclass

from sizer.inputs.layers import EXPERT, LM_HEAD, VISION, LatentAttention, Linear
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
    index_key_bytes_per_token: int = 0   # DSA's indexer keys: FP8 with scales, whatever the KV dtype


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
            kv = state = index = 0
            if part == "mixer":
                params += sum(layer.norms for layer in layers) * h
                kv, state = sum(b.kv_values_per_token for b in block), sum(m.state_bytes_per_seq(b) for b in block)
                index = sum(b.index_key_bytes_per_token for b in block if isinstance(b, LatentAttention))
            rows.append(LayerKind(part, label, len(layers), params, kv, state, index))
    norms_without_mixer = sum(layer.norms for layer in m.layers if layer.mixer.label == "none") * h
    counts = parameter_count(m)
    rows.append(LayerKind("model", "embedding, lm_head, final norm", 0,
                          counts.embedding + counts.lm_head + h + norms_without_mixer, 0, 0))
    if counts.towers:
        rows.append(LayerKind("model", "vision encoder and projector", 0, counts.towers, 0, 0))
    return rows
