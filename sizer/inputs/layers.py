"""One decoder layer as its token mixer and its feed-forward block, and the matrices each holds.

A model is a sequence of layers (`ModelSpec.layers`); parameters, active parameters, weight bytes,
KV and recurrent-state bytes and FLOPs are all summed from these descriptions, so a hybrid model
(Mamba-2 or linear-attention layers among attention layers, MoE every other layer, layers
without attention) is counted layer by layer. Each mixer and FFN kind states:

- `linears(hidden)`: its matrices, named as in Hugging Face checkpoints (quantisation ignore
  lists match these names), with the role that decides how tensor parallelism splits them;
- `extra_params(hidden)`: vectors and small tensors (biases, norms, convolutions, decay terms);
- mixers only: `kv_values_per_token` (values cached per token, K and V or the MLA latent),
  `window_tokens` (a sliding window or local-attention chunk caps what is kept),
  `conv_state_values_per_seq` and `recurrent_state_values_per_seq` (Mamba-2 / linear
  attention: a fixed state per sequence, the convolution window and the recurrent state, kept
  in different dtypes) and `flops_per_pair` (attention FLOPs per
  query-key pair, all heads).
"""

from __future__ import annotations

from dataclasses import dataclass

# How tensor parallelism treats a matrix (see analytic.parallel.shard_fraction).
ATTENTION, MLP, EXPERT, SHARED_EXPERT, ROUTER, LM_HEAD, VISION = (
    "attention", "mlp", "expert", "shared_expert", "router", "lm_head", "vision")
RECURRENT = "recurrent"     # Mamba-2 / linear-attention projections: split by heads like attention
REPLICATED = "replicated"   # whole on every TP rank (MLA's down-projections, as vLLM's ReplicatedLinear)


@dataclass(frozen=True)
class Linear:
    """`count` matrices of in_features x out_features in one layer (count > 1: experts)."""
    module: str            # path inside the layer as checkpoints name it, e.g. "self_attn.q_proj"
    role: str
    in_features: int
    out_features: int
    count: int = 1
    kv_heads: int = 0      # k/v projections: KV heads they produce (replicated when TP exceeds them)

    @property
    def params(self) -> int:
        return self.in_features * self.out_features * self.count


# ---- token mixers ------------------------------------------------------------------------------

FULL, SLIDING, CHUNKED = "full", "sliding", "chunked"
INDEX_QUANT_BLOCK = 128      # DSA's indexer keys: one fp32 scale per 128 FP8 values


@dataclass(frozen=True)
class Attention:
    """Softmax attention with grouped KV heads: full, sliding-window or chunked-local."""
    span: str                    # FULL, SLIDING (last `window_tokens`) or CHUNKED (own chunk of `window_tokens`)
    num_heads: int
    num_kv_heads: int
    head_dim: int
    window_tokens: int | None = None
    bias: bool = False           # q/k/v biases (Qwen2)
    o_bias: bool = False         # o_proj's bias too (attention_bias in Llama, gpt-oss, Qwen3; never Qwen2's)
    output_gate: bool = False    # q_proj also yields a per-head sigmoid gate (Qwen3-Next, Qwen3.5)
    qk_norm: bool = False        # RMSNorm over q and k per head (Qwen3, Gemma 3)
    qk_norm_across_heads: bool = False   # ... over all of q and all of k instead, a weight a channel (MiniMax-M2)
    k_eq_v: bool = False         # no v_proj: K serves as V (Gemma-4's global layers); the cache still holds both
    sinks: bool = False          # a learned sink logit per head in the softmax (gpt-oss): parameters, no cache

    @property
    def label(self) -> str:
        sinks = " with sinks" if self.sinks else ""
        if self.span == SLIDING:
            return f"sliding-window attention{sinks} (window {self.window_tokens})"
        if self.span == CHUNKED:
            return f"chunked local attention (chunk {self.window_tokens})"
        return f"full attention{sinks}"

    def linears(self, hidden: int) -> list[Linear]:
        q_out = self.num_heads * self.head_dim * (2 if self.output_gate else 1)
        kv_out = self.num_kv_heads * self.head_dim
        v = [] if self.k_eq_v else [Linear("self_attn.v_proj", ATTENTION, hidden, kv_out, kv_heads=self.num_kv_heads)]
        return [Linear("self_attn.q_proj", ATTENTION, hidden, q_out),
                Linear("self_attn.k_proj", ATTENTION, hidden, kv_out, kv_heads=self.num_kv_heads),
                *v, Linear("self_attn.o_proj", ATTENTION, self.num_heads * self.head_dim, hidden)]

    def extra_params(self, hidden: int) -> int:
        biases = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim if self.bias else 0
        biases += hidden if self.o_bias else 0
        qk_norms = 0
        if self.qk_norm:
            qk_norms = (self.num_heads + self.num_kv_heads) * self.head_dim if self.qk_norm_across_heads \
                else 2 * self.head_dim
        return biases + qk_norms + (self.num_heads if self.sinks else 0)

    @property
    def kv_values_per_token(self) -> int:
        return 2 * self.num_kv_heads * self.head_dim

    conv_state_values_per_seq = 0
    recurrent_state_values_per_seq = 0

    @property
    def flops_per_pair(self) -> int:
        return 4 * self.num_heads * self.head_dim      # QK^T and PV, 2 FLOPs per multiply-add


@dataclass(frozen=True)
class LatentAttention:
    """DeepSeek's multi-head latent attention: the cache holds one latent + rope key per token.

    With an indexer (DeepSeek sparse attention, DSA: DeepSeek-V3.2, GLM-5) a small set of index heads scores
    every cached token and each query attends to the top `index_topk` of them; the indexer caches its own key per
    token, in FP8 with a scale (`index_key_bytes_per_token`), beside the latent."""
    num_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    window_tokens: None = None

    @property
    def label(self) -> str:
        if self.index_topk and not self.index_heads:
            return f"multi-head latent attention, sparse (top {self.index_topk} tokens by an earlier layer's indexer)"
        if self.index_topk:
            return f"multi-head latent attention, sparse (top {self.index_topk} tokens by an indexer)"
        return "multi-head latent attention"

    def linears(self, hidden: int) -> list[Linear]:
        h, H = hidden, self.num_heads
        qk_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        q = ([Linear("self_attn.q_a_proj", REPLICATED, h, self.q_lora_rank),
              Linear("self_attn.q_b_proj", ATTENTION, self.q_lora_rank, H * qk_dim)] if self.q_lora_rank
             else [Linear("self_attn.q_proj", ATTENTION, h, H * qk_dim)])
        indexer = []
        if self.index_heads:
            indexer = [Linear("self_attn.indexer.wq_b", REPLICATED, self.q_lora_rank or h,
                              self.index_heads * self.index_head_dim),
                       Linear("self_attn.indexer.wk", REPLICATED, h, self.index_head_dim),
                       Linear("self_attn.indexer.weights_proj", REPLICATED, h, self.index_heads)]
        return q + [Linear("self_attn.kv_a_proj_with_mqa", REPLICATED, h, self.kv_lora_rank + self.qk_rope_head_dim),
                    Linear("self_attn.kv_b_proj", ATTENTION, self.kv_lora_rank,
                           H * (self.qk_nope_head_dim + self.v_head_dim)),
                    *indexer, Linear("self_attn.o_proj", ATTENTION, H * self.v_head_dim, h)]

    def extra_params(self, hidden: int) -> int:
        # the latents' norms; the indexer's key LayerNorm (weight and bias)
        return self.kv_lora_rank + self.q_lora_rank + 2 * self.index_head_dim

    @property
    def kv_values_per_token(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim        # latent + rope key, at the KV cache's dtype

    @property
    def index_key_bytes_per_token(self) -> int:
        """The indexer's cached key: FP8 values plus one fp32 scale per 128 of them, whatever the KV dtype
        (vLLM vllm/model_executor/models/deepseek_v2.py, Indexer: DeepseekV32IndexerCache of uint8, head_dim
        index_head_dim + index_head_dim // 128 * 4: 132 bytes for DeepSeek-V3.2's and GLM-5's 128)."""
        if not self.index_heads:
            return 0
        return self.index_head_dim + -(-self.index_head_dim // INDEX_QUANT_BLOCK) * 4

    @property
    def attended_tokens(self) -> int | None:
        """The most cached tokens one query attends to (DSA's top-k); None: all of them."""
        return self.index_topk or None

    conv_state_values_per_seq = 0
    recurrent_state_values_per_seq = 0

    @property
    def flops_per_pair(self) -> int:
        # absorbed MLA: scores over the latent + rope part, values over the latent (pairs attended: the top-k
        # with DSA)
        return 2 * self.num_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)

    @property
    def index_flops_per_pair(self) -> int:
        """DSA's indexer: every index head scores every cached token (a multiply-add per index dimension)."""
        return 2 * self.index_heads * self.index_head_dim


class RecurrentMixer:
    """What Mamba-2 and gated delta net share: no KV cache and no attention pairs, but a depthwise
    convolution whose last `conv_kernel - 1` inputs each sequence keeps (beside its recurrent state)."""
    conv_kernel: int
    conv_channels: int           # each subclass's property: the channels its convolution runs over
    window_tokens = None
    kv_values_per_token = 0
    flops_per_pair = 0

    @property
    def conv_state_values_per_seq(self) -> int:
        return self.conv_channels * (self.conv_kernel - 1)


@dataclass(frozen=True)
class Mamba2(RecurrentMixer):
    """Mamba-2 selective state-space mixer (NemotronH, as vLLM's MambaMixer2)."""
    num_heads: int
    head_dim: int
    state_size: int              # d_state
    n_groups: int
    conv_kernel: int
    conv_bias: bool = True
    proj_bias: bool = False
    label = "Mamba-2"

    @property
    def inner(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        return self.inner + 2 * self.n_groups * self.state_size

    @property
    def in_proj_width(self) -> int:
        return self.inner + self.conv_channels + self.num_heads   # the gate z; x, B, C; one dt per head

    def linears(self, hidden: int) -> list[Linear]:
        return [Linear("mixer.in_proj", RECURRENT, hidden, self.in_proj_width),
                Linear("mixer.out_proj", RECURRENT, self.inner, hidden)]

    def extra_params(self, hidden: int) -> int:
        conv = self.conv_channels * self.conv_kernel + (self.conv_channels if self.conv_bias else 0)
        biases = self.in_proj_width + hidden if self.proj_bias else 0
        return conv + 3 * self.num_heads + self.inner + biases      # A_log, D, dt_bias; gated norm

    @property
    def recurrent_state_values_per_seq(self) -> int:
        return self.num_heads * self.head_dim * self.state_size  # SSM state: heads x head_dim x d_state


@dataclass(frozen=True)
class GatedDeltaNet(RecurrentMixer):
    """Gated delta-rule linear attention (Qwen3-Next, Qwen3.5: `linear_attention` layers)."""
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    label = "gated delta net (linear attention)"

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def linears(self, hidden: int) -> list[Linear]:
        return [Linear("linear_attn.in_proj_qkvz", RECURRENT, hidden, 2 * self.key_dim + 2 * self.value_dim),
                Linear("linear_attn.in_proj_ba", RECURRENT, hidden, 2 * self.num_value_heads),
                Linear("linear_attn.out_proj", RECURRENT, self.value_dim, hidden)]

    def extra_params(self, hidden: int) -> int:
        # depthwise convolution, dt_bias and A_log per value head, the gated norm over a value head
        return self.conv_channels * self.conv_kernel + 2 * self.num_value_heads + self.value_head_dim

    @property
    def recurrent_state_values_per_seq(self) -> int:
        return self.num_value_heads * self.key_head_dim * self.value_head_dim   # a key x value matrix per head


@dataclass(frozen=True)
class LinearMixer:
    """A single hidden x hidden matrix where attention was distilled away (Nemotron `replace_with_linear`)."""
    window_tokens: None = None
    label = "linear (attention replaced)"

    def linears(self, hidden: int) -> list[Linear]:
        return [Linear("self_attn.linear_attn", ATTENTION, hidden, hidden)]

    def extra_params(self, hidden: int) -> int:
        return 0

    kv_values_per_token = 0
    conv_state_values_per_seq = 0
    recurrent_state_values_per_seq = 0
    flops_per_pair = 0


@dataclass(frozen=True)
class NoMixer:
    """The layer has no token mixer (NemotronH MLP/MoE blocks, Nemotron `no_op` attention)."""
    window_tokens: None = None
    label = "none"

    def linears(self, hidden: int) -> list[Linear]:
        return []

    def extra_params(self, hidden: int) -> int:
        return 0

    kv_values_per_token = 0
    conv_state_values_per_seq = 0
    recurrent_state_values_per_seq = 0
    flops_per_pair = 0


Mixer = Attention | LatentAttention | Mamba2 | GatedDeltaNet | LinearMixer | NoMixer


# ---- feed-forward blocks -------------------------------------------------------------------------

@dataclass(frozen=True)
class DenseFFN:
    width: int
    gated: bool = True           # SwiGLU-style gate + up (False: up only, e.g. NemotronH's squared ReLU)

    @property
    def label(self) -> str:
        return f"dense MLP (width {self.width})"

    def linears(self, hidden: int) -> list[Linear]:
        return [Linear("mlp.gate_up_proj" if self.gated else "mlp.up_proj", MLP, hidden,
                       (2 if self.gated else 1) * self.width),
                Linear("mlp.down_proj", MLP, self.width, hidden)]

    def extra_params(self, hidden: int) -> int:
        return 0


@dataclass(frozen=True)
class MoEFFN:
    """Routed experts (top-k of `num_experts` per token) plus shared experts every token uses."""
    num_experts: int
    top_k: int
    expert_width: int
    shared_width: int = 0        # all shared experts together (0: none)
    shared_gate: bool = False    # a sigmoid gate on the shared expert's output (Qwen2-MoE, Qwen3-Next)
    gated: bool = True
    router_bias: bool = False    # per-expert correction bias (DeepSeek-V3's e_score_correction_bias)
    latent: int = 0              # routed experts work in this width, projected from and to hidden (NemotronH Ultra)
    biases: bool = False         # the routed experts' and the router's biases (gpt-oss)

    @property
    def label(self) -> str:
        shared = f" + shared (width {self.shared_width})" if self.shared_width else ""
        return f"MoE {self.top_k} of {self.num_experts} experts (width {self.expert_width}){shared}"

    def linears(self, hidden: int) -> list[Linear]:
        up = 2 if self.gated else 1
        width = self.latent or hidden
        out = [Linear("mlp.experts.gate_up_proj" if self.gated else "mlp.experts.up_proj", EXPERT, width,
                      up * self.expert_width, self.num_experts),
               Linear("mlp.experts.down_proj", EXPERT, self.expert_width, width, self.num_experts),
               Linear("mlp.gate", ROUTER, hidden, self.num_experts)]
        if self.latent:
            out += [Linear("mlp.fc1_latent_proj", SHARED_EXPERT, hidden, self.latent),
                    Linear("mlp.fc2_latent_proj", SHARED_EXPERT, self.latent, hidden)]
        if self.shared_width:
            out += [Linear("mlp.shared_experts.gate_up_proj" if self.gated else "mlp.shared_experts.up_proj",
                           SHARED_EXPERT, hidden, up * self.shared_width),
                    Linear("mlp.shared_experts.down_proj", SHARED_EXPERT, self.shared_width, hidden)]
        if self.shared_gate:
            out.append(Linear("mlp.shared_expert_gate", ROUTER, hidden, 1))
        return out

    def extra_params(self, hidden: int) -> int:
        biases = 0
        if self.biases:     # gate_up_proj_bias, down_proj_bias per expert and the router's own (transformers GptOssMLP)
            biases = self.num_experts * ((2 if self.gated else 1) * self.expert_width + (self.latent or hidden) + 1)
        return biases + (self.num_experts if self.router_bias else 0)


@dataclass(frozen=True)
class LinearFFN:
    """A single hidden x hidden matrix where the MLP was distilled away (Nemotron `replace_with_linear`)."""
    label = "linear (MLP replaced)"

    def linears(self, hidden: int) -> list[Linear]:
        return [Linear("mlp.linear_mlp", MLP, hidden, hidden)]

    def extra_params(self, hidden: int) -> int:
        return 0


@dataclass(frozen=True)
class NoFFN:
    label = "none"

    def linears(self, hidden: int) -> list[Linear]:
        return []

    def extra_params(self, hidden: int) -> int:
        return 0


FFN = DenseFFN | MoEFFN | LinearFFN | NoFFN


@dataclass(frozen=True)
class Layer:
    mixer: Mixer
    ffn: FFN
    norms: int = 2               # hidden-size norm vectors (pre-mixer and pre-FFN; NemotronH blocks have one)

    def linears(self, hidden: int) -> list[Linear]:
        return self.mixer.linears(hidden) + self.ffn.linears(hidden)

    def extra_params(self, hidden: int) -> int:
        return self.norms * hidden + self.mixer.extra_params(hidden) + self.ffn.extra_params(hidden)


# ---- towers that run beside the language model ----------------------------------------------------

@dataclass(frozen=True)
class VisionTower:
    """A ViT encoder and its projector into the language model (vLLM loads and runs it)."""
    depth: int
    hidden: int
    intermediate: int
    patch_values: int            # pixels x channels a patch embeds (patch^2 x channels x temporal patch)
    out_hidden: int              # the language model's hidden size the projector maps to
    merge_values: int            # vision features the projector takes per output token (spatial merge^2 x hidden)
    gated: bool = False
    position_embeddings: int = 0
    mergers: int = 1             # projectors (Qwen3-VL adds one per deepstack layer)

    def linears(self) -> list[Linear]:
        h = self.hidden
        up = (2 if self.gated else 1) * self.intermediate
        blocks = [Linear("visual.blocks.attn.qkv", VISION, h, 3 * h, self.depth),
                  Linear("visual.blocks.attn.proj", VISION, h, h, self.depth),
                  Linear("visual.blocks.mlp.up", VISION, h, up, self.depth),
                  Linear("visual.blocks.mlp.down", VISION, self.intermediate, h, self.depth)]
        return blocks + [Linear("visual.patch_embed", VISION, self.patch_values, h),
                         Linear("visual.merger.fc1", VISION, self.merge_values, self.merge_values, self.mergers),
                         Linear("visual.merger.fc2", VISION, self.merge_values, self.out_hidden, self.mergers)]

    def extra_params(self) -> int:
        h = self.hidden
        # per block: 2 norms (weight+bias), qkv/proj/MLP biases; the patch embedding's bias, position
        # embeddings, and each merger's norm (weight+bias) and biases
        per_block = 4 * h + 3 * h + h + (2 if self.gated else 1) * self.intermediate + h
        per_merger = 2 * self.merge_values + self.merge_values + self.out_hidden
        return self.depth * per_block + h + self.position_embeddings * h + self.mergers * per_merger
