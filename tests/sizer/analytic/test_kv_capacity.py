"""KV capacity, the one formula (sizer/analytic/memory.py `held`): every count of what a KV pool holds (plan's
requests in flight and memory-limited batch, check's max_model_len fix, llama.cpp's slots) is computed by it."""

from sizer.analytic.memory import GiB, MemoryBudget, held


def test_whole_items_only_and_none_from_an_overdrawn_pool():
    # 10 GiB / 3 GiB = 3.33: three whole sequences; exactly 6 / 3 = 2; a negative pool (weights overdraw) holds none
    assert held(10 * GiB, 3 * GiB) == 3
    assert held(6 * GiB, 3 * GiB) == 2
    assert held(-5 * GiB, 3 * GiB) == 0
    assert held(0.0, 3 * GiB) == 0


def test_sequences_held_counts_the_state_set_aside_with_the_kv_cache():
    # a hybrid model: 5 GiB of KV blocks + 1 GiB of recurrent state set aside; a sequence holds 2 GiB of both:
    # (5 + 1) // 2 = 3 sequences, where the KV cache alone (5 // 2) would say 2
    budget = MemoryBudget(gpu_memory_bytes=80 * GiB, gpu_memory_utilization=0.9, usable_bytes=72 * GiB,
                          weights_bytes=60 * GiB, activation_bytes=GiB, non_torch_bytes=GiB, state_bytes=GiB,
                          state_seqs=4, kv_cache_bytes=5 * GiB, kv_blocks=1, kv_tokens=16, block_size=16,
                          max_model_len=4096, sequence_bytes_at_max_model_len=2 * GiB, max_seqs_at_max_model_len=3,
                          fits=True, reasons=())
    assert budget.sequences_held(2 * GiB) == 3
    assert held(budget.kv_cache_bytes, 2 * GiB) == 2
