"""A decoder-only transformer (Llama/Mistral/Qwen style) over the paged KV cache.

RMSNorm, RoPE, GQA/MQA attention, SwiGLU MLP or a top-k routed mixture of experts. Weights
are random, of the right shapes (scaled by 1/sqrt(fan-in) so activations stay O(1) through
the layers), or loaded from a local safetensors checkpoint (engine/weights.py). Linear
weights keep Hugging Face's `[out, in]` layout, with q/k/v and gate/up fused.

One `forward` runs one engine step: any mix of prefill chunks and decodes, packed, as laid
out by engine/batch.py. The pieces are module-level functions so that the microbenchmarks
time exactly what the forward pass calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.batch import StepInputs
from engine.config import EngineConfig
from engine.kernels import Kernels
from engine.kv_cache import PagedKVCache


@dataclass
class LayerWeights:
    input_norm: torch.Tensor                 # [hidden]
    qkv: torch.Tensor                        # [(H + 2 KV) D, hidden]
    o: torch.Tensor                          # [hidden, H D]
    post_norm: torch.Tensor                  # [hidden]
    gate_up: torch.Tensor | None = None      # dense: [2 I, hidden]
    down: torch.Tensor | None = None         # dense: [hidden, I]
    router: torch.Tensor | None = None       # MoE: [experts, hidden]
    experts_gate_up: torch.Tensor | None = None   # [experts, 2 I_moe, hidden]
    experts_down: torch.Tensor | None = None      # [experts, hidden, I_moe]
    shared_gate_up: torch.Tensor | None = None    # [2 I_shared, hidden]
    shared_down: torch.Tensor | None = None       # [hidden, I_shared]
    qkv_bias: torch.Tensor | None = None          # [(H + 2 KV) D] (Qwen2-style attention bias)


def rope_tables(head_dim: int, max_positions: int, theta: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, [max_positions, head_dim / 2] in float32 (rotate-half convention)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)
    angles = torch.arange(max_positions, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def dense_mlp(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    return F.linear(swiglu(F.linear(x, gate_up)), down)


def moe_mlp(x: torch.Tensor, w: LayerWeights, top_k: int) -> torch.Tensor:
    """Top-k routed experts (weights renormalised over the chosen k), plus shared experts."""
    probs = torch.softmax(F.linear(x, w.router).float(), dim=-1)
    weights, experts = probs.topk(top_k, dim=-1)
    weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
    out = torch.zeros_like(x)
    flat = experts.flatten()
    order = flat.argsort()
    counts = torch.bincount(flat, minlength=w.router.shape[0]).tolist()
    start = 0
    for e, n in enumerate(counts):
        if n:
            picks = order[start:start + n]
            tokens = picks // top_k
            y = dense_mlp(x[tokens], w.experts_gate_up[e], w.experts_down[e])
            out.index_add_(0, tokens, y * weights.flatten()[picks, None])
            start += n
    if w.shared_gate_up is not None:
        out += dense_mlp(x, w.shared_gate_up, w.shared_down)
    return out


def attention(q: torch.Tensor, layer: int, step: StepInputs, kv: PagedKVCache, kernels: Kernels,
              scale: float) -> torch.Tensor:
    """Decode kernel for the first `num_decode_tokens` rows, prefill kernel for the rest."""
    k_cache, v_cache = kv.layer(layer)
    d = step.num_decode_tokens
    if d == q.shape[0]:
        return kernels.decode_attention(q, k_cache, v_cache, step.decode_block_tables, step.decode_seq_lens,
                                        scale, step.decode_max_len)
    if d == 0:
        return kernels.prefill_attention(q, k_cache, v_cache, step.prefill_block_tables, step.prefill_cu_q,
                                         step.prefill_ctx_lens, scale, step.prefill_max_q)
    return torch.cat((
        kernels.decode_attention(q[:d], k_cache, v_cache, step.decode_block_tables, step.decode_seq_lens,
                                 scale, step.decode_max_len),
        kernels.prefill_attention(q[d:], k_cache, v_cache, step.prefill_block_tables, step.prefill_cu_q,
                                  step.prefill_ctx_lens, scale, step.prefill_max_q),
    ))


class Transformer:
    """The weights of one device's shard and the forward pass of one engine step."""

    def __init__(self, cfg: EngineConfig, dtype: torch.dtype, device: torch.device | str, kernels: Kernels,
                 max_positions: int, seed: int = 0):
        self.cfg, self.dtype, self.device, self.kernels = cfg, dtype, torch.device(device), kernels
        gen = torch.Generator(device=self.device).manual_seed(seed)

        def rand(*shape: int) -> torch.Tensor:
            x = torch.randn(*shape, generator=gen, device=self.device, dtype=torch.float32)
            return (x * shape[-1] ** -0.5).to(dtype)

        def norm() -> torch.Tensor:
            return (1.0 + 0.1 * torch.randn(cfg.hidden_size, generator=gen, device=self.device)).to(dtype)

        h, hd = cfg.hidden_size, cfg.head_dim
        self.embed = rand(cfg.vocab_size, h) * h ** 0.5
        self.layers: list[LayerWeights] = []
        for i in range(cfg.num_layers):
            w = LayerWeights(norm(), rand(cfg.qkv_size, h), rand(h, cfg.num_heads * hd), norm())
            if cfg.attention_bias:
                w.qkv_bias = rand(1, cfg.qkv_size)[0]
            if cfg.layer_is_moe(i):
                e, mi = cfg.num_experts, cfg.moe_intermediate_size
                w.router = rand(e, h)
                w.experts_gate_up = rand(e, 2 * mi, h)
                w.experts_down = rand(e, h, mi)
                if cfg.num_shared_experts:
                    w.shared_gate_up = rand(2 * mi * cfg.num_shared_experts, h)
                    w.shared_down = rand(h, mi * cfg.num_shared_experts)
            else:
                w.gate_up = rand(2 * cfg.intermediate_size, h)
                w.down = rand(h, cfg.intermediate_size)
            self.layers.append(w)
        self.final_norm = norm()
        self.lm_head = rand(cfg.vocab_size, h)
        self.cos, self.sin = rope_tables(hd, max_positions, cfg.rope_theta, self.device)

    def mlp(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        w = self.layers[layer]
        if w.router is not None:
            return moe_mlp(x, w, self.cfg.num_experts_per_tok)
        return dense_mlp(x, w.gate_up, w.down)

    @torch.inference_mode()
    def forward(self, step: StepInputs, kv: PagedKVCache) -> torch.Tensor:
        """Logits [sequences, vocab] at each sequence's last new token (rows in `step.order`)."""
        cfg, k = self.cfg, self.kernels
        t, hd = step.num_tokens, cfg.head_dim
        q_size, kv_size = cfg.num_heads * hd, cfg.num_kv_heads * hd
        cos, sin = self.cos[step.positions], self.sin[step.positions]
        hidden = self.embed[step.token_ids]
        residual = None
        for i, w in enumerate(self.layers):
            x, residual = k.rms_norm(hidden, w.input_norm, cfg.rms_norm_eps, residual)
            q, key, value = F.linear(x, w.qkv, w.qkv_bias).split([q_size, kv_size, kv_size], dim=-1)
            q = k.rope_kv(q.view(t, cfg.num_heads, hd), key.view(t, cfg.num_kv_heads, hd),
                          value.view(t, cfg.num_kv_heads, hd), cos, sin, *kv.slots(i), step.slots)
            attn = attention(q, i, step, kv, k, hd ** -0.5)
            hidden = F.linear(attn.reshape(t, q_size), w.o)
            x, residual = k.rms_norm(hidden, w.post_norm, cfg.rms_norm_eps, residual)
            hidden = self.mlp(x, i)
        x, _ = k.rms_norm(hidden, self.final_norm, cfg.rms_norm_eps, residual)
        return F.linear(x[step.logits_indices], self.lm_head)


def sample(logits: torch.Tensor) -> torch.Tensor:
    """Greedy: the arg-max token of each row (outputs are forced to length, so any rule works)."""
    return logits.argmax(dim=-1)
