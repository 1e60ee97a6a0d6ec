"""Real config.json files of current model families (tests/data/models, sources in its README and
facts.yaml): total and active parameters against the published figures, KV bytes per token against
the count facts.yaml derives by hand from each config, and the per-layer structure of each family."""

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from simulator.kv_cache import KVCacheManager
from sizer.analytic.memory import kv_layout
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import layer_kinds, parameter_count
from sizer.inputs.layers import CHUNKED, FULL, SLIDING, Attention, GatedDeltaNet, LatentAttention, Mamba2, MoEFFN
from sizer.inputs.model_spec import from_hf_config
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.inputs.variant import Variant
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config
from validation.errors import FieldError

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
FACTS = {m["id"]: m for m in yaml.safe_load((MODELS / "facts.yaml").read_text())["models"]}
CONFIGS = sorted(p for p in MODELS.glob("*/config*.json") if p.parent.name in FACTS
                 and FACTS[p.parent.name].get("params_total"))

# Published figures that are only the model's name rounded to one significant figure ("A3B", "2B"):
# held to the rounding they carry, not to 3%. sizer's own counts for them are pinned below.
ROUNDED = {
    ("qwen3-next-80b-a3b-thinking", "active"): "'3B active' is the A3B of the name; 3.87 B counted, "
                                                "0.62 B of it embedding and lm_head",
    ("qwen3.5-35b-a3b", "active"): "'3B active' is the A3B of the name; 3.45 B counted, 1.02 B of it "
                                   "embedding and lm_head",
    ("qwen3-vl-2b-instruct", "total"): "'2B' is the name only",
}


def load(path: Path):
    return from_hf_config(json.loads(path.read_text()), path.parent.name, str(path))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_parameters_match_the_published_figures(path):
    facts = FACTS[path.parent.name]
    counts = parameter_count(load(path))
    for kind, derived, published in (("total", counts.total, facts["params_total"]),
                                     ("active", counts.active, facts.get("params_active"))):
        if published is None:
            continue
        error = derived / published - 1
        bound = 0.3 if (path.parent.name, kind) in ROUNDED else 0.03
        assert abs(error) <= bound, f"{kind}: {derived / 1e9:.2f} B vs published {published / 1e9:g} B " \
                                    f"({error:+.1%}); source: {facts['params_source']}"


@pytest.mark.parametrize("path", [p for p in CONFIGS if str((FACTS[p.parent.name].get("derived") or {})
                                                            .get("kv_bytes_per_token_16bit", "x"))[0].isdigit()],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kv_bytes_per_token_match_the_hand_count(path):
    # facts.yaml derives it from each config by hand: 2 (K, V) x layers that keep KV x KV heads x head dim
    # x 2 bytes (MLA: latent + rope per layer), windows ignored as in KVLayout.bytes_per_token
    stated = FACTS[path.parent.name]["derived"]["kv_bytes_per_token_16bit"]
    expected = int(re.match(r"\d+", str(stated)).group())
    assert kv_layout(load(path), "bf16", ParallelConfig()).bytes_per_token == expected


def test_nemotron_3_nano_is_23_mamba_23_moe_and_6_attention_blocks():
    m = load(MODELS / "nemotron-3-nano-30b-a3b" / "config.json")
    kinds = {(r.part, r.kind.split(" (")[0]): r.layers for r in layer_kinds(m)}
    assert kinds[("mixer", "Mamba-2")] == 23 and kinds[("mixer", "full attention")] == 6
    assert sum(n for (part, kind), n in kinds.items() if part == "ffn") == 23
    kv = kv_layout(m, "bf16", ParallelConfig())
    mamba = m.mixers(Mamba2)[0]
    # per block: conv (64 x 64 + 2 x 8 x 128 = 6,144 channels) x 3 past inputs in bf16, SSM state
    # 64 heads x 64 x 128 in float32 (the config's mamba_ssm_cache_dtype)
    assert mamba.conv_state_values_per_seq == 6144 * 3
    assert kv.state_bytes_per_seq == 23 * (6144 * 3 * 2 + 64 * 64 * 128 * 4)


def test_qwen3_next_and_qwen35_keep_kv_in_one_layer_of_four():
    for name, layers in (("qwen3-next-80b-a3b-thinking", 48), ("qwen3.5-27b", 64)):
        m = load(MODELS / name / "config.json")
        full, linear = m.mixers(Attention), m.mixers(GatedDeltaNet)
        assert (len(full), len(linear)) == (layers // 4, 3 * layers // 4)
        assert all(a.span == FULL and a.output_gate for a in full)


def test_llama4_maverick_alternates_dense_and_moe_and_chunks_rope_layers():
    m = load(MODELS / "llama-4-maverick-17b-128e-instruct" / "config.json")
    moe = [isinstance(layer.ffn, MoEFFN) for layer in m.layers]
    assert moe == [i % 2 == 1 for i in range(48)]          # interleave_moe_layer_step 2
    assert m.layers[0].ffn.width == 16384                    # intermediate_size_mlp
    spans = [layer.mixer.span for layer in m.layers]
    # every 4th layer is a global NoPE layer, the rest attend within 8,192-token chunks
    assert spans == [FULL if (i + 1) % 4 == 0 else CHUNKED for i in range(48)]


def test_gemma4_global_layers_have_their_own_heads_and_share_k_as_v():
    m = load(MODELS / "gemma-4-26b-a4b" / "config.json")
    sliding = [a for a in m.mixers(Attention) if a.span == SLIDING]
    full = [a for a in m.mixers(Attention) if a.span == FULL]
    assert (len(sliding), len(full)) == (25, 5)
    assert (full[0].head_dim, full[0].num_kv_heads, full[0].k_eq_v) == (512, 2, True)
    assert len(full[0].linears(m.hidden_size)) == 3            # q, k, o: no v_proj
    moe = m.moe
    assert (moe.num_experts, moe.top_k, moe.shared_width) == (128, 8, 2112)   # dense MLP beside the experts


def test_llama_nemotron_block_configs_skip_attention_in_some_layers():
    m = load(MODELS / "llama-3.3-nemotron-super-49b-v1" / "config.json")
    # facts.yaml: 49 of 80 layers keep attention (the rest are no_op), 8 KV heads each
    assert len(m.mixers(Attention)) == 49
    assert {a.num_kv_heads for a in m.mixers(Attention)} == {8}


def test_deepseek_v32_indexer_is_counted():
    m = load(MODELS / "deepseek-v3.2" / "config.json")
    mla = m.mixers(LatentAttention)[0]
    assert (mla.index_heads, mla.index_head_dim, mla.index_topk) == (64, 128, 2048)
    # per layer: wq_b 1536 x (64 x 128) + wk 7168 x 128 + weights_proj 7168 x 64, + LayerNorm 2 x 128
    indexer = 1536 * 8192 + 7168 * 128 + 7168 * 64 + 2 * 128
    v3 = parameter_count(from_hf_config({**json.loads((MODELS / "deepseek-v3.2" / "config.json").read_text()),
                                         "index_n_heads": 0, "index_head_dim": 0, "index_topk": 0}, "v3"))
    assert parameter_count(m).total - v3.total == 61 * indexer
    # KV: latent 512 + rope 64 in bf16, and the indexer's key in FP8 with an fp32 scale per 128 values (vLLM's
    # DeepseekV32IndexerCache: 128 + 4 bytes) per layer
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 61 * ((512 + 64) * 2 + 128 + 4)


def test_an_architecture_sizer_does_not_model_is_refused_by_a_key():
    # DeepSeek-V4 adds compressed attention, hyper-connections and hash layers (compress_ratios, hc_mult, ...)
    path = MODELS / "deepseek-v4-flash-nvfp4-fp8-redhatai" / "config.json"
    with pytest.raises(FieldError, match="architecture feature not modelled"):
        load(path)


def test_real_configs_leave_no_architecture_key_unread():
    # every fixture loads (but V4, above); keys sizer neither reads nor knows harmless are only tower extras and
    # features the config switches off (Qwen3-Coder's "qkv_bias": false)
    for path in CONFIGS:
        unread = load(path).unread_keys
        assert all(k.startswith("vision_config.") or k.startswith("text_config._") or k.endswith("(switched off)")
                   for k in unread), (path, unread)


def test_a_hybrid_plan_takes_each_sequences_state_from_the_kv_pool():
    # review finding: the state was set aside for the sequences that fit at max_model_len (73 here) and the
    # scheduler ran no more, where vLLM's hybrid KV cache gives each running request its state blocks from the one
    # pool: short requests run up to max_num_seqs (Qwen3-Next at 262,144 tokens: 10 where vLLM runs 1,024)
    s = load_scenario(MODELS.parents[2] / "scenarios" / "llama-3.1-8b-chat-h100.yaml",
                      Variant(model=str(MODELS / "nemotron-3-nano-30b-a3b")))
    r = resolve(s)
    mem, kv = r.memory, r.kv
    available = mem.usable_bytes - mem.weights_bytes - mem.activation_bytes - mem.non_torch_bytes
    assert kv.state_in_pool and mem.state_bytes == 0 and mem.kv_cache_bytes == pytest.approx(available)
    assert r.replica.scheduler.max_num_seqs == r.engine.max_num_seqs == 1024
    # the pool's blocks hold the attention layers' tokens; a sequence's state takes pages of one attention layer's
    # block, one per layer slot: 23 Mamba-2 layers padded to the 6 attention layers' group size, 24 slots, so 24 / 6
    # = 4 blocks from its start to its end (and one block for a 1,001-token sequence's 1,000 cached tokens)
    block = mem.block_size
    pool = KVCacheManager(mem.kv_blocks, block, window_groups=r.replica.kv_windows)
    assert pool.final_blocks(1001) == -(-1000 // block) + 4 == 5
    assert kv.pool_state_bytes_per_seq_per_gpu == 24 * block * 1024
    # as many max_model_len sequences as memory holds, KV and state together
    assert mem.max_seqs_at_max_model_len == int(available // mem.sequence_bytes_at_max_model_len) < 1024


def test_vllm_takes_a_hybrid_models_block_whose_attention_page_holds_a_layers_state():
    # vllm/platforms/interface.py (_align_hybrid_block_size): every layer kind gets one page size, so the attention
    # block grows to the fewest tokens, a multiple of 16, whose page in one layer holds one layer's recurrent state.
    # Nemotron-3-Nano (config above): Mamba-2 state 3 x (64 x 64 + 2 x 8 x 128) x 2 B (conv, bf16) + 64 x 64 x 128 x 4 B
    # (ssm, mamba_ssm_cache_dtype float32) = 2,134,016 B; attention 2 x 2 KV heads x 128 x 2 B = 1,024 B a token:
    # 16 x ceil(2,134,016 / 16,384) = 2,096 tokens
    s = load_scenario(MODELS.parents[2] / "scenarios" / "llama-3.1-8b-chat-h100.yaml",
                      Variant(model=str(MODELS / "nemotron-3-nano-30b-a3b")))
    r = resolve(s)
    assert r.engine.block_size == r.memory.block_size == r.replica.block_size == 2096
    assert "hybrid model (2096" in r.engine.sources["block_size"]
    # Qwen3-Next (GatedDeltaNet): state 3 x (2 x 16 x 128 + 32 x 128) + 32 x 128 x 128 values x 2 B = 1,097,728 B,
    # 2 KV heads x 256: at TP 2 (548,864 B over 1,024 B a token) 544 tokens; at TP 4 the one KV head stays (1,024 B)
    # and the state halves: 16 x ceil(274,432 / 16,384) = 272; a scenario block of 32 aligns to 32: 32 x 9 = 288;
    # with an fp8 cache at TP 2 (512 B a token) 16 x ceil(548,864 / 8,192) = 1,072
    qwen = str(MODELS / "qwen3-next-80b-a3b-thinking")
    for tp, kv_dtype, block, expected in ((2, None, None, 544), (4, None, None, 272), (4, None, 32, 288),
                                          (2, "fp8", None, 1072)):
        s = load_scenario(MODELS.parents[2] / "scenarios" / "llama-3.1-8b-chat-h100.yaml",
                          Variant(model=qwen, gpu="h200", tensor_parallel_size=tp, kv_cache_dtype=kv_dtype))
        if block:
            s = replace(s, deployment=replace(s.deployment, block_size=block))
        r = resolve(s)
        assert r.engine.block_size == expected, (tp, kv_dtype, block)
        # the state padded to one page a layer (36 GatedDeltaNet layers, 12 attention: groups of 12, no padding)
        token_page = 2 * max(1, 2 // tp) * 256 * (1 if kv_dtype else 2)
        assert r.kv.pool_state_bytes_per_seq_per_gpu == 36 * expected * token_page
        # the whole model's figure pads alike (review finding: it took the state unpadded beside padded KV): at TP 2,
        # where each GPU holds one of the 2 KV heads and half the state, twice one GPU's
        if tp == 2:
            assert r.kv.sequence_bytes(1100, expected, per_gpu=False) == pytest.approx(
                2 * r.kv.sequence_bytes(1100, expected))
    # SGLang keeps its own Mamba pool and its page
    s = load_scenario(MODELS.parents[2] / "scenarios" / "llama-3.1-8b-chat-h100.yaml",
                      Variant(model=qwen, gpu="h200", tensor_parallel_size=2, engine="sglang"))
    r = resolve(s)
    assert r.engine.block_size < 544 and not r.kv.padded_state_bytes_per_seq_per_gpu


def test_a_disaggregated_hybrid_prompt_sends_its_recurrent_state_with_its_kv():
    # Qwen3-Next at TP 2: 12 attention layers x 1 KV head x 256 x 2 (K, V) x 2 B = 12,288 B a token, and the 36
    # GatedDeltaNet layers' state, 36 x 548,864 B = 19,759,104 B a GPU, once a prompt, over the H200's NVLink (450 GB/s)
    r = resolve(scenario_from_dict({
        "model": str(MODELS / "qwen3-next-80b-a3b-thinking"), "hardware": "h200",
        "deployment": {"tensor_parallel_size": 2, "disaggregated": {"prefill_replicas": 1, "decode_replicas": 1}},
        "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                     "output_tokens": {"distribution": "fixed", "value": 100}}}, None))
    d = simulation_config(r).disaggregation
    assert d.transfer_s(1000) == pytest.approx(d.transfer_latency_s + (12_288 * 1000 + 19_759_104) / 450e9)


def test_a_model_of_recurrent_layers_alone_sets_state_aside_and_caps_running_sequences(tmp_path):
    # no attention layer, so no KV blocks for the state to come from: it is set aside for as many max_model_len
    # sequences as fit (at most max_num_seqs), and the scheduler runs no more
    config = json.loads((MODELS / "nemotron-3-nano-30b-a3b" / "config.json").read_text())
    pattern = config["hybrid_override_pattern"].replace("*", "M")
    model = tmp_path / "nemotron-no-attention"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**config, "hybrid_override_pattern": pattern}))
    s = load_scenario(MODELS.parents[2] / "scenarios" / "llama-3.1-8b-chat-h100.yaml", Variant(model=str(model)))
    r = resolve(s)
    mem = r.memory
    available = mem.usable_bytes - mem.weights_bytes - mem.activation_bytes - mem.non_torch_bytes
    assert not r.kv.state_in_pool
    assert mem.state_seqs == min(1024, int(available // mem.sequence_bytes_at_max_model_len))
    assert mem.state_bytes == mem.state_seqs * r.kv.state_bytes_per_seq_per_gpu
    assert r.replica.scheduler.max_num_seqs == mem.state_seqs


def test_ling_shared_experts_are_num_shared_experts_wide():
    # inclusionAI/Ling-lite-1.5 (bailing_moe): "num_shared_experts": 2, Ling's spelling of DeepSeek's n_shared_experts;
    # vLLM's BailingMoE builds one shared MLP of moe_intermediate_size x num_shared_experts = 1,408 x 2 = 2,816 (the
    # checkpoint's mlp.shared_experts.gate_proj is [2816, 2048])
    config = json.loads((MODELS / "ling-lite-1.5" / "config.json").read_text())
    moe = from_hf_config(config, "ling").moe
    assert (moe.num_experts, moe.top_k, moe.expert_width, moe.shared_width) == (64, 6, 1408, 2816)
    # a layer: attention 2,048 x (2,048 + 2 x 512) + 2,048 x 2,048 = 10,485,760; 64 experts of 3 x 2,048 x 1,408
    # (553,648,128), router 2,048 x 64, shared 3 x 2,048 x 2,816 (17,301,504), 2 norms: 581,570,560; x 28 layers,
    # final norm, embedding + lm_head 2 x 126,464 x 2,048: 16,801,974,272 (README: 16.8 billion); active, 6 experts
    # of the 64: 2,753,153,024 (2.75 billion)
    counts = parameter_count(from_hf_config(config, "ling"))
    assert (counts.total, counts.active) == (16_801_974_272, 2_753_153_024)
    # a stated moe_shared_expert_intermediate_size is each shared expert's width in this family (Ling-mini-2.0's
    # form): 2 x 512 = 1,024
    assert from_hf_config({**config, "moe_shared_expert_intermediate_size": 512}, "x").moe.shared_width == 1024
