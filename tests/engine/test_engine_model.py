"""The model over the paged cache: chunking, paging, prefix reuse and kernel choice must not
change what it computes; shapes and refusals follow the model spec."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from engine.batch import SeqWork, build_step
from engine.config import engine_config
from engine.kernels import TORCH, TRITON
from engine.kv_cache import PagedKVCache
from engine.model import LayerWeights, Transformer, dense_mlp, moe_mlp
from sizer.inputs.model_spec import load_model
from validation.errors import FieldError

TINY = engine_config(load_model("tiny"))


def make(kernels=TORCH, cfg=TINY, blocks=32):
    model = Transformer(cfg, torch.float32, "cpu", kernels, max_positions=512, seed=3)
    kv = PagedKVCache(cfg.num_layers, blocks, 16, cfg.num_kv_heads, cfg.head_dim, torch.float32, "cpu")
    return model, kv


def prompt(n, seed=0):
    return torch.randint(0, TINY.vocab_size, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_build_step_lays_out_decodes_first():
    # seq 0: a 3-token chunk on 16 cached tokens in blocks [7, 2]; seq 1: a decode at position
    # 5 in block [4]. The decode goes first: tokens [t1, a, b, c], positions [5, 16, 17, 18],
    # slots 4*16+5 = 69 and 2*16+0.. = 32, 33, 34; logits at rows 0 and 3.
    step = build_step([SeqWork([11, 12, 13], 16, [7, 2]), SeqWork([9], 5, [4])], 16, "cpu")
    assert step.token_ids.tolist() == [9, 11, 12, 13]
    assert step.positions.tolist() == [5, 16, 17, 18]
    assert step.slots.tolist() == [69, 32, 33, 34]
    assert step.order == [1, 0]
    assert step.logits_indices.tolist() == [0, 3]
    assert step.num_decode_tokens == 1 and step.decode_seq_lens.tolist() == [6] and step.decode_max_len == 6
    assert step.prefill_cu_q.tolist() == [0, 3] and step.prefill_ctx_lens.tolist() == [16]
    assert step.prefill_block_tables.tolist() == [[7, 2]] and step.prefill_max_q == 3


def test_chunked_paged_prefill_then_decode_equals_one_pass():
    model, kv = make()
    ids = prompt(41)
    full = model.forward(build_step([SeqWork(ids, 0, [5, 9, 2])], 16, "cpu"), kv)       # logits after token 40
    model2, kv2 = make()
    blocks = [30, 1, 17]
    model2.forward(build_step([SeqWork(ids[:25], 0, blocks)], 16, "cpu"), kv2)             # chunk 1: 25 tokens
    out = model2.forward(build_step([SeqWork(ids[25:40], 25, blocks)], 16, "cpu"), kv2)    # chunk 2: 15 more
    last = model2.forward(build_step([SeqWork(ids[40:], 40, blocks)], 16, "cpu"), kv2)     # token 40 as a decode
    assert out.shape == (1, TINY.vocab_size)
    torch.testing.assert_close(last, full, rtol=1e-4, atol=1e-4)


def test_shared_prefix_blocks_are_reused_not_recomputed():
    # Request B shares A's first 32 tokens (2 full blocks). Computing only B's tail on top of
    # A's blocks gives the same logits as computing all of B from scratch.
    model, kv = make()
    a, tail = prompt(40, 1), prompt(9, 2)
    model.forward(build_step([SeqWork(a, 0, [3, 4, 5])], 16, "cpu"), kv)
    reused = model.forward(build_step([SeqWork(tail, 32, [3, 4, 6])], 16, "cpu"), kv)
    fresh = model.forward(build_step([SeqWork(a[:32] + tail, 0, [10, 11, 12])], 16, "cpu"), kv)
    torch.testing.assert_close(reused, fresh, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_triton_and_torch_kernels_give_the_same_logits():
    # A mixed step (one decode, one chunk on cached context) through the Triton interpreter.
    cfg = replace(TINY, num_layers=1)
    logits = []
    for kernels in (TORCH, TRITON):
        model, kv = make(kernels, cfg)
        model.forward(build_step([SeqWork(prompt(20, 4), 0, [0, 1]), SeqWork(prompt(24, 5), 0, [2, 3])], 16, "cpu"), kv)
        logits.append(model.forward(build_step([SeqWork([7], 20, [0, 1]), SeqWork(prompt(6, 6), 24, [2, 3])],
                                               16, "cpu"), kv))
    torch.testing.assert_close(logits[1], logits[0], rtol=1e-4, atol=1e-4)


def test_moe_mlp_equals_a_per_token_loop():
    gen = torch.Generator().manual_seed(7)
    hidden, inter, experts, k = 16, 8, 4, 2
    w = LayerWeights(torch.ones(hidden), torch.empty(0), torch.empty(0), torch.ones(hidden),
                     router=torch.randn(experts, hidden, generator=gen),
                     experts_gate_up=torch.randn(experts, 2 * inter, hidden, generator=gen),
                     experts_down=torch.randn(experts, hidden, inter, generator=gen))
    x = torch.randn(5, hidden, generator=gen)
    out = moe_mlp(x, w, k)
    for t in range(5):
        probs = torch.softmax(F.linear(x[t], w.router), -1)
        top = probs.topk(k)
        weights = top.values / top.values.sum()
        ref = sum(wt * dense_mlp(x[t:t + 1], w.experts_gate_up[e], w.experts_down[e])[0]
                  for wt, e in zip(weights, top.indices, strict=True))
        torch.testing.assert_close(out[t], ref, rtol=1e-5, atol=1e-5)


def test_moe_model_runs_a_step():
    cfg = engine_config(load_model("mixtral-8x7b"), scale=1 / 32)
    small = replace(cfg, hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_heads=4, num_kv_heads=2,
                    head_dim=16, vocab_size=100)
    model, kv = make(cfg=small)
    assert small.num_layers == 1 and model.layers[0].router.shape == (8, 64)
    logits = model.forward(build_step([SeqWork(list(range(20)), 0, [0, 1])], 16, "cpu"), kv)
    assert logits.shape == (1, 100) and torch.isfinite(logits).all()


def test_engine_config_splits_for_tp_and_scales_layers():
    cfg = engine_config(load_model("llama-3.1-8b"), tp=4, scale=0.25)
    # 32 heads / 4 = 8; 8 KV heads / 4 = 2; 14336 / 4 = 3584; 128256 / 4 = 32064; 32 x 0.25 = 8 layers
    assert ((cfg.num_heads, cfg.num_kv_heads, cfg.intermediate_size, cfg.vocab_size, cfg.num_layers)
            == (8, 2, 3584, 32064, 8))
    assert cfg.qkv_size == (8 + 2 * 2) * 128
    # TP 16 > 8 KV heads: each KV head is replicated, one per device
    assert engine_config(load_model("llama-3.1-8b"), tp=16).num_kv_heads == 1


@pytest.mark.parametrize("name,words", [("deepseek-v3", "latent attention"), ("gemma-2-9b", "sliding-window")])
def test_unsupported_attention_is_refused(name, words):
    with pytest.raises(FieldError, match=words):
        engine_config(load_model(name))


def test_tp_must_divide_the_heads():
    with pytest.raises(FieldError, match="divide"):
        engine_config(load_model("tiny"), tp=3)
