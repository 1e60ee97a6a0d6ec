"""Windowed layers' KV at their window everywhere a sequence's KV is counted (issue 24): llama.cpp's slots and its SWA
cache, the longest context a slot can have, `sizer check`'s suggested max_model_len and the KV a disaggregated prompt
sends from its prefill to its decode pool.

gpt-oss-20b (sizer's catalog; openai/gpt-oss-20b config.json): 24 layers alternating sliding_attention (window 128)
and full_attention, 8 KV heads x head_dim 64. A layer's K and V at 16 bits: 2 x 8 x 64 x 2 B = 2,048 B per token, so
the 12 full layers keep 24,576 B of every token and the 12 sliding layers 24,576 B of at most 128 tokens.
"""

from __future__ import annotations

import pytest
import yaml

from sizer.analytic.memory import hybrid_group_slots, llamacpp_swa_cells
from sizer.inputs.manifest import read_check_input
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.check import memory_rule
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config

PER_GROUP = 12 * 2 * 8 * 64 * 2          # 24,576 B per token: the 12 full layers, or the 12 sliding ones
WINDOW = 128


def data(gpu: str = "h100-sxm", **deployment) -> dict:
    return {"model": "gpt-oss-20b", "hardware": gpu, "deployment": deployment,
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 100}}}


def resolved(gpu: str = "h100-sxm", **deployment):
    return resolve(scenario_from_dict(data(gpu, **deployment), None))


def test_the_layout_keeps_a_window_of_the_sliding_layers_and_inverts():
    kv = resolved(max_model_len=8192).kv
    assert kv.bytes_per_token_per_gpu == 2 * PER_GROUP and kv.unwindowed_bytes_per_token == PER_GROUP
    assert kv.windowed_bytes_per_token == ((PER_GROUP, WINDOW),)
    # 8,192 tokens: 24,576 x 8,192 + 24,576 x 128 = 201,326,592 + 3,145,728 B (not 2 x 201,326,592)
    assert kv.kept_bytes(8192) == 204_472_320
    assert kv.kept_bytes(100) == 2 * PER_GROUP * 100                     # inside the window: every layer
    assert kv.longest_tokens(204_472_320) == 8192 and kv.longest_tokens(204_472_319) == 8191


def test_llama_cpp_allocates_its_swa_cache_not_the_whole_context():
    # one slot of -c 8192, n_ubatch 512: the SWA cache is GGML_PAD(min(8,192, 128 x 1 + 512), 256) = 768 cells
    # (llama.cpp src/llama-kv-cache-iswa.cpp): 24,576 x 8,192 + 24,576 x 768 = 220,200,960 B
    assert llamacpp_swa_cells(WINDOW, 8192, 1, 512) == 768
    r = resolved("l4", engine="llama.cpp", ctx_size=8192, parallel=1)
    assert r.kv.dtype == "f16" and r.slots.ubatch_size == 512
    assert r.memory.kv_cache_bytes == PER_GROUP * 8192 + PER_GROUP * 768 == 220_200_960
    # the auto 4 slots share one unified 32,768-cell buffer: SWA cache GGML_PAD(min(32,768, 128 x 4 + 512), 256) =
    # 1,024 cells: 24,576 x (32,768 + 1,024) = 830,472,192 B
    unified = resolved("l4", engine="llama.cpp", ctx_size=32768)
    assert (unified.slots.slots, unified.slots.kv_unified) == (4, True)
    assert unified.memory.kv_cache_bytes == PER_GROUP * (32768 + 1024)
    # --parallel 4 without --kv-unified: 4 streams of 8,192 cells, each with its own 768-cell SWA cache
    split = resolved("l4", engine="llama.cpp", ctx_size=32768, parallel=4)
    assert split.memory.kv_cache_bytes == 4 * 220_200_960


def test_the_longest_slot_context_grows_by_the_full_layers_alone():
    r = resolved("l4", engine="llama.cpp", ctx_size=8192, parallel=1)
    answers = make_plan(r).slots
    room = r.memory.room_for_kv_bytes
    # past the window the SWA cache holds GGML_PAD(128 + 512, 256) = 768 cells whatever the context: every further
    # token costs the full layers' 24,576 B (counted at full context it would cost 49,152 B)
    longest = int((room - PER_GROUP * 768) // PER_GROUP)
    assert answers.largest_context_per_slot_tokens == min(longest, r.model.max_position_embeddings)
    assert longest > int(room // (2 * PER_GROUP)) * 1.9


def test_disaggregated_prompts_send_a_window_of_the_sliding_layers():
    r = resolved(max_model_len=8192, disaggregated={"prefill_replicas": 1, "decode_replicas": 1})
    d = simulation_config(r).disaggregation
    # a 4,096-token prompt: 24,576 x 4,096 + 24,576 x 128 B over the H100's NVLink (450 GB/s), no fixed latency
    assert d.transfer_s(4096) == (PER_GROUP * 4096 + PER_GROUP * WINDOW) / 450e9
    assert d.transfer_s(100) == 2 * PER_GROUP * 100 / 450e9


def test_a_swapped_block_moves_what_a_pool_block_holds():
    # review finding: a swap priced every layer at every token (49,152 B a token), where a pool block holds the full
    # layers' tokens (24,576 B) and the sliding layers' window blocks are pool blocks of their own, swapped with them
    r = resolved(max_model_len=8192, preemption_mode="swap")
    assert r.replica.swap.kv_bytes_per_token == r.memory.pool_bytes_per_token == PER_GROUP


def test_check_offers_the_max_model_len_the_windowed_kv_leaves(tmp_path):
    path = tmp_path / "gpt-oss.yaml"
    path.write_text(yaml.safe_dump(data("l4", max_model_len=131072, gpu_memory_utilization=0.65)))
    inp = read_check_input(str(path))
    plan = make_plan(resolve(scenario_from_dict(inp.scenario_data, inp.file)))
    kv = plan.memory.kv_cache_bytes
    rule = memory_rule(inp, plan)
    assert rule.status == "fail"
    # one sequence of L tokens keeps, in whole 16-token blocks, L / 16 blocks of the full layers and the sliding
    # ones' 128-token window plus the block it straddles (9 blocks), 16 x 24,576 B a block: the longest multiple of
    # 1,024 that fits (about twice what counting the sliding layers at full context, kv / 49,152, would offer)
    longest = max(n for n in range(1024, 131072, 1024) if (n // 16 + WINDOW // 16 + 1) * 16 * PER_GROUP <= kv)
    assert longest > 2 * (int(kv // (2 * PER_GROUP)) // 1024 * 1024) - 1024
    assert rule.fixes[0].startswith(f"--max-model-len {longest} (from 131072")


WORKLOAD = {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
            "output_tokens": {"distribution": "fixed", "value": 200}}


def test_vllm_pads_each_kind_of_layer_to_whole_groups():
    # vllm/v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: groups as large as the fewest layers
    # of a kind (the most, under 1.5 x the fewest), every kind padded to whole groups
    assert hybrid_group_slots([52, 10]) == [60, 10]       # Gemma-3-27B: 6 sliding groups of 10
    assert hybrid_group_slots([18, 18]) == [18, 18]       # gpt-oss-120b: no padding
    assert hybrid_group_slots([12, 13]) == [13, 13]       # gpt-oss-20b + an EAGLE layer: groups of 13
    assert hybrid_group_slots([36, 12]) == [36, 12]       # Llama-4: 3 chunked groups of 12
    # Gemma-3-27B in vLLM at 8,192 tokens: a block holds 16 tokens of 10 layers at 2 x 16 x 128 x 2 B (1,310,720 B);
    # 512 blocks of the full layers and 6 sliding groups x (1,024 / 16 + 1) blocks: 902 blocks, 1,182,269,440 B
    # (was 1,114,112,000: the 52 sliding layers counted as 5.2 groups)
    r = resolve(scenario_from_dict({"model": "gemma-3-27b", "hardware": "h100",
                                    "deployment": {"max_model_len": 8192}, "workload": WORKLOAD}, None))
    assert r.kv.sequence_bytes(8192, 16) == 902 * 1_310_720 == 1_182_269_440
    assert r.memory.max_seqs_at_max_model_len == int(r.memory.kv_cache_bytes // 1_182_269_440)
    # another engine's allocator keeps its own layers' bytes: SGLang's
    sglang = resolve(scenario_from_dict({"model": "gemma-3-27b", "hardware": "h100", "workload": WORKLOAD,
                                         "deployment": {"max_model_len": 8192, "engine": "sglang"}}, None))
    assert sglang.kv.sequence_bytes(8192, sglang.memory.block_size) == pytest.approx(
        10 * 8192 * 8192 + 52 * 8192 * (1024 + sglang.memory.block_size))
