"""The layer-by-layer description, on small synthetic configs whose counts are derived by hand.

Real configs of each family, with their published parameter counts, are in test_model_families.py;
these pin each family's parsing rule and formula on numbers small enough to check on paper.
"""

import json

from typer.testing import CliRunner

from sizer.analytic.memory import kv_layout
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import layer_kinds, parameter_count
from sizer.cli.app import app
from sizer.inputs.layers import (
    CHUNKED,
    FULL,
    SLIDING,
    Attention,
    DenseFFN,
    GatedDeltaNet,
    Mamba2,
    MoEFFN,
    NoFFN,
    NoMixer,
)
from sizer.inputs.model_layers import LAYER_TYPES
from sizer.inputs.model_spec import from_hf_config

cli = CliRunner()
BASE = {"architectures": ["X"], "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 1000,
        "max_position_embeddings": 32768, "num_hidden_layers": 4}


def spec(**changes):
    return from_hf_config({**BASE, **changes}, name="synthetic")


def test_nemotron_h_pattern_places_mamba_attention_mlp_and_moe_blocks():
    m = spec(model_type="nemotron_h", hybrid_override_pattern="M-*E", mamba_num_heads=8, mamba_head_dim=16,
             ssm_state_size=32, n_groups=2, conv_kernel=4, n_routed_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, moe_shared_expert_intermediate_size=48)
    kinds = [(type(layer.mixer), type(layer.ffn)) for layer in m.layers]
    assert kinds == [(Mamba2, NoFFN), (NoMixer, DenseFFN), (Attention, NoFFN), (NoMixer, MoEFFN)]
    mamba = m.layers[0].mixer
    # in_proj: 64 x (2 x 128 inner + 2 x 2 groups x 32 state + 8 heads) = 64 x 392; out_proj 128 x 64
    assert sum(lin.params for lin in mamba.linears(64)) == 64 * 392 + 128 * 64
    # conv over 128 + 128 = 256 channels x kernel 4 (+ bias 256); A_log, D, dt_bias (8 each); norm 128
    assert mamba.extra_params(64) == 256 * 4 + 256 + 3 * 8 + 128
    # state: conv 256 channels x 3 past inputs + SSM 8 heads x 16 x 32
    assert (mamba.conv_state_values_per_seq, mamba.recurrent_state_values_per_seq) == (256 * 3, 8 * 16 * 32)
    # NemotronH's MLP and experts are not gated (squared ReLU): up and down only
    assert m.layers[1].ffn.linears(64)[0].out_features == 128 and not m.layers[3].ffn.gated
    assert m.layers[3].ffn.shared_width == 48
    kv = kv_layout(m, "bf16", ParallelConfig())
    # only the one attention block caches KV: 2 x 2 KV heads x 16 x 2 B
    assert kv.bytes_per_token == 2 * 2 * 16 * 2 and kv.state_bytes_per_seq == (256 * 3 + 8 * 16 * 32) * 2


def test_qwen3_next_interval_makes_every_fourth_layer_full_attention_with_an_output_gate():
    m = spec(model_type="qwen3_next", num_hidden_layers=8, full_attention_interval=4, linear_num_key_heads=2,
             linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=16, linear_conv_kernel_dim=4,
             num_experts=4, num_experts_per_tok=2)              # every Qwen3-Next model routes to experts
    assert [type(layer.mixer).__name__[0] for layer in m.layers] == list("GGGAGGGA")
    full = m.layers[3].mixer
    assert full.output_gate and full.linears(64)[0].out_features == 2 * 4 * 16      # query and gate
    gdn = m.layers[0].mixer
    assert isinstance(gdn, GatedDeltaNet)
    # conv channels 2 x (2 x 8) + 4 x 16 = 96; recurrent state 4 value heads x 8 x 16
    assert (gdn.conv_state_values_per_seq, gdn.recurrent_state_values_per_seq) == (96 * 3, 4 * 8 * 16)
    kv = kv_layout(m, "bf16", ParallelConfig())
    assert kv.bytes_per_token == 2 * (2 * 2 * 16) * 2          # 2 of 8 layers keep KV
    assert kv.state_layers == 6


def test_llama4_chunked_rope_layers_interleaved_moe_and_shared_expert():
    m = spec(model_type="llama4_text", attention_chunk_size=8192, no_rope_layers=[1, 1, 1, 0],
             interleave_moe_layer_step=2, num_local_experts=4, num_experts_per_tok=1, intermediate_size=32,
             intermediate_size_mlp=96)
    assert [layer.mixer.span for layer in m.layers] == [CHUNKED, CHUNKED, CHUNKED, FULL]
    assert [type(layer.ffn) for layer in m.layers] == [DenseFFN, MoEFFN, DenseFFN, MoEFFN]
    assert m.layers[0].ffn.width == 96 and m.layers[1].ffn.shared_width == 32
    kv = kv_layout(m, "bf16", ParallelConfig())
    # a 100k-token sequence: 3 chunked layers keep 8,192 tokens + one block, the NoPE layer all of it
    per_layer = 2 * 2 * 16 * 2
    assert kv.sequence_bytes(100_000, 16, per_gpu=False) == per_layer * 16 * (3 * (512 + 1) + 6250)


def test_block_configs_give_each_layer_its_own_heads_and_width():
    blocks = [{"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 3.0}},
              {"attention": {"no_op": True}, "ffn": {"replace_with_linear": True}},
              {"attention": {"replace_with_linear": True}, "ffn": {"no_op": True}},
              {"attention": {"n_heads_in_group": 4}, "ffn": {"ffn_mult": 1.0}}]
    m = spec(num_key_value_heads=None, block_configs=blocks)
    kinds = layer_kinds(m)
    assert sum(r.parameters for r in kinds) == parameter_count(m).total
    a0, a3 = m.layers[0].mixer, m.layers[3].mixer
    assert (a0.num_kv_heads, a3.num_kv_heads) == (2, 1)
    # DeciLM: int(2 x mult x hidden / 3) rounded up to 256: 2 x 3 x 64 / 3 = 128 -> 256; 42 -> 256
    assert m.layers[0].ffn.width == 256 and m.layers[3].ffn.width == 256
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == (2 * 2 + 2 * 1) * 16 * 2


def _plan(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return cli.invoke(app, ["plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--model", str(path)]), path


def test_qwen_slides_only_the_layers_from_max_window_layers_on():
    # transformers' Qwen2Config: layer i slides where use_sliding_window and i >= max_window_layers; the first are full
    # (sizer windowed all of them: KV at 4 x 4,096 tokens where the first two layers hold the whole context)
    m = spec(model_type="qwen2", use_sliding_window=True, sliding_window=4096, max_window_layers=2)
    assert [(a.span, a.window_tokens) for a in m.mixers(Attention)] == [(FULL, None)] * 2 + [(SLIDING, 4096)] * 2
    # switched off (every public Qwen2.5 and Qwen3 config): no window at all, whatever max_window_layers says
    off = spec(model_type="qwen2", use_sliding_window=False, sliding_window=4096, max_window_layers=2)
    assert {a.span for a in off.mixers(Attention)} == {FULL}


def test_an_invented_mixer_type_is_refused_naming_the_entry(tmp_path):
    result, path = _plan(tmp_path, {**BASE, "layer_types": ["full_attention", "quantum_attention",
                                                             "full_attention", "full_attention"]})
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {path}: layer_types[1]: layer type 'quantum_attention' is not "
                                     f"modelled; expected one of {', '.join(LAYER_TYPES)}")


def test_an_unknown_architecture_key_is_refused_and_a_harmless_one_listed(tmp_path):
    result, path = _plan(tmp_path, {**BASE, "num_memory_tokens": 64})
    assert result.exit_code == 2 and "num_memory_tokens: architecture feature not modelled" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result, _ = _plan(tmp_path, {**BASE, "logit_temperature": 0.7})
    assert result.exit_code == 0, result.output
    assert "config keys sizer does not read" in result.stdout and "logit_temperature" in result.stdout


def test_a_hybrid_plan_shows_state_per_sequence_and_what_it_allows(tmp_path):
    config = {**BASE, "model_type": "nemotron_h", "hybrid_override_pattern": "M-*-", "mamba_num_heads": 8,
              "mamba_head_dim": 16, "ssm_state_size": 32, "n_groups": 2, "conv_kernel": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = cli.invoke(app, ["plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--model", str(path), "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    state = (256 * 3 + 8 * 16 * 32) * 2                      # one Mamba-2 block, bf16 (see the first test)
    assert plan["model"]["state_bytes_per_sequence"] == state
    mem = plan["memory"]
    # the attention layer makes a KV pool, from which each running sequence takes its state: none set aside
    assert mem["state_bytes"] == 0
    # sequences of max_model_len the pool holds: KV // (KV per sequence + state)
    assert mem["max_seqs_at_max_model_len"] == int(mem["kv_cache_bytes"] // mem["sequence_bytes_at_max_model_len"])
    kinds = {r["kind"]: r for r in plan["model"]["layer_kinds"]}
    assert kinds["Mamba-2"]["layers"] == 1 and kinds["full attention"]["layers"] == 1
