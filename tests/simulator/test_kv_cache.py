import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simhelp import LinearStepModel, sim_config
from test_simulate import same

import simulator.replica as replica_module
from simulator.config import DisaggregationConfig, SwapLink
from simulator.decode_group import DecodeGroup
from simulator.kv_cache import BlockCounts, KVCacheManager, kv_cache_for, prompt_block_hashes
from simulator.request import Request
from simulator.run import simulate
from simulator.workload import Arrivals, Lengths, WorkloadSpec


def req(i, prompt, segments=(), seg=1, tenant=0, output=10):
    return Request(i, 0.0, prompt, output, tuple(segments), seg, tenant)


def test_allocation_is_all_or_nothing_and_conserves_blocks():
    kv = KVCacheManager(num_blocks=10, block_size=16, enable_prefix_caching=False)
    a, b = req(0, 100), req(1, 100)
    assert kv.allocate_slots(a, 100)            # ceil(100/16) = 7 blocks
    assert len(a.block_ids) == 7 and kv.num_free_blocks == 3
    assert not kv.allocate_slots(b, 100)        # needs 7, 3 free: refused, nothing taken
    assert b.block_ids == [] and kv.num_free_blocks == 3
    a.num_computed_tokens = 100
    assert kv.allocate_slots(a, 12)             # 112 tokens fit the 7 blocks: no new block
    assert len(a.block_ids) == 7
    assert kv.allocate_slots(a, 13)             # 113 tokens need an 8th block
    assert len(a.block_ids) == 8
    kv.check_invariants([a])
    kv.free(a)
    assert kv.num_free_blocks == 10 and a.block_ids == []
    kv.check_invariants([])


def test_shared_prefix_hits_chain_and_last_token_is_always_computed():
    kv = KVCacheManager(64, 16)
    # two 32-token segments cover 64 tokens = 4 keyed blocks; the other 36 tokens are the request's own
    first = req(0, 100, segments=(7, 8), seg=32)
    assert len(prompt_block_hashes(first, 16, False)) == 4
    assert kv.allocate_slots(first, 100)
    first.num_computed_tokens = 100
    kv.cache_full_blocks(first)
    same_start = req(1, 80, segments=(7, 9), seg=32)  # shares segment 7 (32 tokens = 2 blocks) only
    blocks, tokens = kv.get_computed_blocks(same_start)
    assert blocks == first.block_ids[:2] and tokens == 32
    exact = req(2, 64, segments=(7, 8), seg=32)       # whole prompt cached: the last block is recomputed
    blocks, tokens = kv.get_computed_blocks(exact)    # (64 - 1) // 16 = 3 blocks may hit
    assert tokens == 48
    other = req(3, 100, segments=(8, 7), seg=32)      # same ids, other order: chained keys differ
    assert kv.get_computed_blocks(other) == ([], 0)


def test_shared_blocks_are_ref_counted_and_freed_once():
    kv = KVCacheManager(20, 16)
    a, b = req(0, 64, (1,), seg=64), req(1, 64, (1,), seg=64)
    assert kv.allocate_slots(a, 64)
    a.num_computed_tokens = 64
    kv.cache_full_blocks(a)
    hits, n = kv.get_computed_blocks(b)               # (64-1)//16 = 3 of the 4 keyed blocks
    assert n == 48
    assert kv.allocate_slots(b, 16, hits)             # 3 shared + 1 new
    b.num_computed_tokens = 48
    assert kv.num_used_blocks == 5                    # 4 of a + 1 of b
    kv.check_invariants([a, b])
    kv.free(a)                                        # the 3 shared blocks stay held by b
    assert kv.num_used_blocks == 4 and kv.num_cached_free_blocks == 1
    kv.check_invariants([b])
    kv.free(b)
    assert kv.num_used_blocks == 0 and kv.num_cached_free_blocks == 4
    kv.check_invariants([])


def test_eviction_takes_plain_blocks_first_then_least_recently_freed_cached():
    kv = KVCacheManager(6, 16)
    old, new = req(0, 32, (1,), seg=32), req(1, 32, (2,), seg=32)
    for r in (old, new):
        assert kv.allocate_slots(r, 32)
        r.num_computed_tokens = 32
        kv.cache_full_blocks(r)
    kv.free(old)
    kv.free(new)                                      # cached-free: old's 2 blocks, then new's 2
    filler = req(2, 48)
    assert kv.allocate_slots(filler, 48)              # 3 blocks: 2 plain, then 1 evicted from `old`
    assert kv.get_computed_blocks(req(3, 40, (1,), seg=32))[1] == 16   # old lost its tail block only
    assert kv.get_computed_blocks(req(4, 40, (2,), seg=32))[1] == 32   # new is intact
    kv.check_invariants([filler])


def test_tenant_isolation_scopes_the_prefix_cache():
    shared = KVCacheManager(20, 16, tenant_isolation=False)
    isolated = KVCacheManager(20, 16, tenant_isolation=True)
    for kv in (shared, isolated):
        a = req(0, 64, (5,), seg=64, tenant=1)
        assert kv.allocate_slots(a, 64)
        a.num_computed_tokens = 64
        kv.cache_full_blocks(a)
    other_tenant = req(1, 64, (5,), seg=64, tenant=2)
    assert shared.get_computed_blocks(other_tenant)[1] == 48
    other_tenant.block_hashes = None
    assert isolated.get_computed_blocks(other_tenant)[1] == 0


def test_segment_wide_and_per_block_keys_agree_on_sharing():
    # 512-token Mooncake segments with 16-token blocks take the one-hash-per-segment path;
    # sharing the first k segments must share exactly the first 32k blocks
    a = req(0, 2000, (1, 2, 3, 4), seg=512)
    b = req(1, 2000, (1, 2, 9, 4), seg=512)
    ka, kb = prompt_block_hashes(a, 16, False), prompt_block_hashes(b, 16, False)
    assert len(ka) == 2000 // 16 == 125
    assert ka[:64] == kb[:64] and all(x != y for x, y in zip(ka[64:], kb[64:], strict=True))


def test_rejects_bad_sizes():
    with pytest.raises(ValueError):
        KVCacheManager(0, 16)


def test_windowed_layers_hold_their_window_beside_the_full_context_blocks():
    # gpt-oss-like: as many sliding-window layers (window 128) as full ones, so a window block is a pool block
    kv = KVCacheManager(num_blocks=200, block_size=16, enable_prefix_caching=False, window_groups=((1.0, 128),))
    long, short = req(0, 1000, output=24), req(1, 50, output=10)
    # 1,023 tokens written by its end: ceil(1,000 / 16) = 63 full-context blocks now, and the window's 128 tokens
    # in 8 blocks plus the one it straddles: 9
    assert kv.window_blocks(1023) == 9
    assert kv.allocate_slots(long, 1000)
    assert (len(long.block_ids), len(long.window_block_ids), kv.num_free_blocks) == (63, 9, 128)
    long.num_computed_tokens = 1000
    assert kv.allocate_slots(long, 12)            # 1,012 tokens: still 64 blocks, the window blocks unchanged
    assert (len(long.block_ids), len(long.window_block_ids)) == (64, 9)
    # a request shorter than the window keeps all of its 59 tokens there too: ceil(59 / 16) = 4 blocks each
    assert kv.allocate_slots(short, 50)
    assert (len(short.block_ids), len(short.window_block_ids)) == (4, 4)
    kv.check_invariants([long, short])
    kv.free(long)
    kv.free(short)
    assert kv.num_free_blocks == 200 and long.window_block_ids == []
    kv.check_invariants([])


def test_window_blocks_scale_by_the_windowed_layers_bytes():
    # Gemma-3-like: windowed layers hold 5.2 x a pool block's bytes per token, window 1,024: a 2,000-token
    # sequence keeps 64 + 1 blocks of window, x 5.2 = 338 pool blocks; a 500-token one 32 x 5.2 = 166.4 -> 167
    kv = KVCacheManager(num_blocks=10, block_size=16, window_groups=((5.2, 1024),))
    assert kv.window_blocks(2000) == 338 and kv.window_blocks(500) == 167
    # a request whose window blocks do not fit is refused whole
    r = req(0, 100, output=10)
    assert not kv.allocate_slots(r, 100) and r.block_ids == [] and r.window_block_ids == []


def test_block_counts_take_and_free_as_the_ids_do():
    # the same requests through both pools: every count the scheduler reads is the same
    ids, counts = KVCacheManager(10, 4, enable_prefix_caching=False), BlockCounts(10, 4)
    pairs = [(req(i, 9), req(i, 9)) for i in range(3)]
    for (a, b), n in zip(pairs, [9, 5, 21], strict=True):      # 3 blocks, 2, then 6: one more than the 5 left
        assert ids.allocate_slots(a, n) == counts.allocate_slots(b, n)
        assert (a.num_blocks, ids.num_free_blocks) == (b.num_blocks, counts.num_free_blocks)
    assert counts.num_free_blocks == 5 and pairs[2][1].num_blocks == 0     # all or nothing
    for a, b in pairs[:2]:
        ids.append_blocks(a, 1)
        counts.append_blocks(b, 1)
    ids.free(pairs[0][0])
    counts.free(pairs[0][1])
    assert (ids.num_free_blocks, ids.num_used_blocks) == (counts.num_free_blocks, counts.num_used_blocks) == (7, 3)
    counts.check_invariants([pairs[1][1]])
    pairs[1][1].num_blocks += 1                                              # a block held that the pool lent nobody
    with pytest.raises(AssertionError):
        counts.check_invariants([pairs[1][1]])


def test_decode_group_members_blocks_are_counted_as_the_group_syncs_them():
    # a pool of counts takes a member's block on its own side; the group's sync makes the member's count its
    # computed tokens' blocks: 16 + 2 tokens on 4-token blocks = 5 blocks, 4 at its join and one taken at the boundary
    pool, g = BlockCounts(10, 4), DecodeGroup(4)
    r = req(0, 16, output=9)                      # its prompt computed, its first token sampled
    assert pool.allocate_slots(r, 16)
    r.num_computed_tokens, r.num_output_tokens = 16, 1
    g.join(r)
    for _ in range(2):
        pool.append_block_each(g.needing_block())
        g.advance(1, 0.0)
    g.sync(r)
    assert (r.num_computed_tokens, r.num_blocks, pool.num_used_blocks) == (18, 5, 5)
    pool.check_invariants([r])


def test_the_simulator_counts_blocks_only_where_no_id_is_observed():
    assert type(kv_cache_for(8, 4, False, False, False, ())) is BlockCounts
    for prefix, slots, windows in [(True, False, ()), (False, True, ()), (False, False, ((0.5, 64),))]:
        assert type(kv_cache_for(8, 4, prefix, False, slots, windows)) is KVCacheManager


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), blocks=st.sampled_from([60, 200, 4000]),
       mode=st.sampled_from(["recompute", "swap"]), chunked=st.booleans(), replicas=st.sampled_from([1, 3]),
       disaggregated=st.booleans(), fast_forward=st.booleans(), caching=st.booleans())
def test_whole_runs_on_block_counts_are_the_runs_on_block_ids(seed, blocks, mode, chunked, replicas, disaggregated,
                                                             fast_forward, caching):
    # requests without prompt content: the simulator's pools keep counts; forced to keep ids, every request column and
    # timeline column is the same to the bit (short pools preempt, by recompute and by swap). The ids pool with its
    # prefix cache on too (`caching`): the path such a replica took before the counts (review, 2026-12-02)
    lengths = Lengths("uniform", 0, 0, 20, 700), Lengths("uniform", 0, 0, 1, 90)
    spec = WorkloadSpec(120, Arrivals("poisson", 40.0), *lengths)
    cfg = sim_config(num_blocks=blocks, max_num_seqs=24, preemption_mode=mode, enable_chunked_prefill=chunked,
                     swap=SwapLink(1e5, 1e10) if mode == "swap" else None, num_replicas=replicas,
                     disaggregation=DisaggregationConfig(1, 2, 1e5, 1e10, 1e-3) if disaggregated else None,
                     fast_forward=fast_forward, check_invariants=True, max_model_len=4096)
    counted = simulate(cfg, LinearStepModel(), spec, seed=seed)
    chosen = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replica_module, "kv_cache_for",
                   lambda n, size, _, *rest: chosen.append(1) or KVCacheManager(n, size, caching, *rest))
        with_ids = simulate(cfg, LinearStepModel(), spec, seed=seed)
    assert chosen and same(counted, with_ids) and not counted.leaks
