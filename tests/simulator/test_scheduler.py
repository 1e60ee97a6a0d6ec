import pytest
from simhelp import scheduler_config

from simulator.kv_cache import KVCacheManager
from simulator.request import Request, Status
from simulator.scheduler import Scheduler
from simulator.speculative import SpeculativeConfig


def make(num_blocks=100, block_size=16, **cfg):
    cfg.setdefault("max_num_seqs", 8)
    cfg.setdefault("max_num_batched_tokens", 64)
    return Scheduler(scheduler_config(**cfg), KVCacheManager(num_blocks, block_size, enable_prefix_caching=False))


def run_step(s, now):
    step = s.schedule(now)
    return step, s.update(step, now + 1.0)


def test_chunked_prefill_runs_decodes_first_then_fills_the_budget():
    s = make()
    a, b = Request(0, 0, 20, 5), Request(1, 0, 30, 5)
    s.add_request(a)
    s.add_request(b)
    step, _ = run_step(s, 0.0)            # a: 20 tokens, b: 64 - 20 = 44 >= 30, both whole
    assert [(q.num_new_tokens, q.samples_token) for q in step.seqs] == [(20, True), (30, True)]
    s.add_request(Request(2, 1.0, 100, 5))
    step, _ = run_step(s, 1.0)            # 2 decodes first, then 64 - 2 = 62 tokens of the prompt
    assert [q.num_new_tokens for q in step.seqs] == [1, 1, 62]
    assert step.batch.new_tokens == 64 and step.batch.prefill_seqs == 1 and step.batch.prefill_tokens == 62
    assert not step.seqs[2].samples_token
    # context: a holds 20 + 0 (its first token is sampled, not yet in the cache), b 30
    assert step.batch.context_tokens == 20 + 30
    step, _ = run_step(s, 2.0)            # the last 38 prompt tokens now sample the first token
    assert step.seqs[2].num_new_tokens == 38 and step.seqs[2].samples_token


def test_without_chunking_decodes_run_beside_whole_prompts_that_fit():
    # vLLM V1 (Scheduler.schedule: running requests first, then waiting ones, a prompt taken only whole when chunked
    # prefill is off) and TensorRT-LLM (its scheduler returns context and generation requests for one forward pass)
    # mix decodes with whole prompts; a prompt the rest of the budget cannot hold waits. Before, a step with a new
    # prompt paused every decode (vLLM V0's prefill-first steps), which stalled a disaggregated decode pool at each
    # arriving request
    s = make(max_num_batched_tokens=64, enable_chunked_prefill=False)
    for i in range(4):
        s.add_request(Request(10 + i, 0, 10, 5))
    run_step(s, 0.0)
    decodes = [(10 + i, 1) for i in range(4)]
    s.add_request(Request(1, 1.0, 61, 2))     # prompt + output - 1 = 62 <= 64: served, but not beside 4 decodes
    step, _ = run_step(s, 1.0)
    assert [(q.request.request_id, q.num_new_tokens) for q in step.seqs] == decodes      # 61 > 64 - 4: it waits
    s.add_request(Request(2, 2.0, 30, 5))
    step, _ = run_step(s, 2.0)                # FCFS: request 1 at the head still does not fit, so 2 waits behind it
    assert [(q.request.request_id, q.num_new_tokens) for q in step.seqs] == decodes
    s = make(max_num_batched_tokens=256, enable_chunked_prefill=False)
    s.add_request(Request(0, 0, 40, 5))
    run_step(s, 0.0)
    s.add_request(Request(1, 1.0, 50, 5))
    step, _ = run_step(s, 1.0)                # the decode, then the whole 50-token prompt beside it
    assert [(q.request.request_id, q.num_new_tokens) for q in step.seqs] == [(0, 1), (1, 50)]


def test_recompute_preemption_frees_the_newest_and_requeues_it_first():
    # 8 blocks of 4 tokens = 32 slots; two requests of 12-token prompts hold 3 blocks each
    s = make(num_blocks=8, block_size=4)
    a, b = Request(0, 0, 12, 20), Request(1, 0, 12, 20)
    s.add_request(a)
    s.add_request(b)
    run_step(s, 0.0)                      # both prefilled: 6 blocks used, first tokens sampled
    for t in range(1, 6):                 # each decode step adds one token per request
        step, _ = run_step(s, float(t))
        if step.preempted:
            break
    # decode 1 writes token 13 and needs a 4th block each: 8 of 8 used; decodes 2-4 (tokens
    # 14-16) fit; decode 5 (token 17) needs a 5th block: a asks first and b is preempted
    assert step.preempted == [b] and b.status is Status.PREEMPTED
    assert b.num_computed_tokens == 0 and b.block_ids == [] and b.num_preemptions == 1
    assert t == 5 and s.waiting[0] is b and [q.request for q in step.seqs] == [a]
    s.kv.check_invariants(s.running)


def test_swap_preemption_reports_the_blocks_copied_out_and_back():
    s = make(num_blocks=8, block_size=4, preemption_mode="swap")
    a, b = Request(0, 0, 12, 9), Request(1, 0, 12, 9)
    s.add_request(a)
    s.add_request(b)
    swapped_out = swapped_in = 0
    t = 0.0
    while s.has_unfinished():
        step, _ = run_step(s, t)
        swapped_out += step.swap_out_blocks
        swapped_in += step.swap_in_blocks
        t += 1.0
    # b is swapped out holding 4 blocks (16 tokens) and comes back with ceil(16/4) = 4 blocks
    assert swapped_out == 4 and swapped_in == 4
    assert b.num_output_tokens == 9 and a.num_output_tokens == 9


def test_requests_that_can_never_run_are_rejected_with_a_reason():
    s = make(num_blocks=4, block_size=16, max_model_len=100)
    too_long = Request(0, 0, 90, 20)
    too_big = Request(1, 0, 60, 20)       # 79 tokens need 5 blocks of 16; the cache has 4
    assert not s.add_request(too_long) and "max_model_len 100" in too_long.reject_reason
    assert not s.add_request(too_big) and "needs 5 KV blocks" in too_big.reject_reason
    no_chunk = make(max_num_batched_tokens=64, enable_chunked_prefill=False)
    r = Request(2, 0, 60, 10)
    assert not no_chunk.add_request(r) and "chunked prefill off" in r.reject_reason
    assert not s.has_unfinished()


@pytest.mark.parametrize(("blocks", "windows", "cfg", "longest"), [
    # 4 blocks of 16: 64 KV tokens; the last token's KV is never written, so 65 tokens fit
    (4, (), {"max_model_len": 100}, 65),
    (4, (), {"max_model_len": 50}, 50),                                        # max_model_len is the cap
    (100, (), {"max_num_batched_tokens": 64, "enable_chunked_prefill": False}, 65),   # a whole prompt + 1
    # a 32-token window of a group half a pool block's bytes per token: a 49-token request holds 48 tokens, 3 blocks,
    # and ceil(0.5 x (32 / 16 + 1 straddled)) = 2 window blocks, 5 in all; 50 tokens would need 4 + 2
    (5, ((0.5, 32),), {}, 49),
])
def test_the_longest_accepted_request_is_where_the_reasons_start(blocks, windows, cfg, longest):
    # `_reject_reason` asks `_too_long` only past the bisected longest total: both must agree on every total
    s = Scheduler(scheduler_config(max_num_seqs=8, max_num_batched_tokens=cfg.pop("max_num_batched_tokens", 64),
                                   **cfg),
                  KVCacheManager(blocks, 16, enable_prefix_caching=False, window_groups=windows))
    assert s._longest_accepted == longest
    for total in range(2, longest + 40):
        r = Request(total, 0, total - 1, 1)
        assert s._reject_reason(r) == s._too_long(total) and (s._too_long(total) == "") == (total <= longest)


def test_speculative_decode_verifies_gamma_tokens_capped_by_the_output_left():
    spec = SpeculativeConfig("ngram", num_speculative_tokens=3, acceptance_rate=0.5, draft_cost_fraction=0.0)
    s = make(speculative=spec)
    r = Request(0, 0, 10, 4)
    s.add_request(r)
    run_step(s, 0.0)                      # prefill: first token
    step = s.schedule(1.0)
    assert step.seqs[0].num_new_tokens == 3 and step.seqs[0].num_spec_tokens == 2   # 3 left: 1 + 2 drafts
    assert step.batch.draft_tokens == 2 and step.spec_seqs == 1
    s.update(step, 2.0, {0: 1})           # one draft accepted: 2 tokens out, KV grows by 2
    assert r.num_output_tokens == 3 and r.num_computed_tokens == 12
    step = s.schedule(2.0)
    assert step.seqs[0].num_spec_tokens == 0     # one token left: no drafts
    assert s.update(step, 3.0) == [r] and r.num_output_tokens == 4


def test_reserve_full_kv_admits_only_what_can_finish_and_never_preempts():
    # 10 blocks of 4 tokens; each request needs ceil((12 + 20 - 1) / 4) = 8 blocks to finish
    s = make(num_blocks=10, block_size=4, reserve_full_kv=True)
    a, b = Request(0, 0, 12, 20), Request(1, 0, 12, 20)
    s.add_request(a)
    s.add_request(b)
    t = 0.0
    while s.has_unfinished():
        step, _ = run_step(s, t)
        assert not step.preempted
        assert not (a.status is Status.RUNNING and b.status is Status.RUNNING)
        t += 1.0
    assert b.scheduled_s >= a.finished_s


def _compare_run_with_stepping(fresh, expect_tail):
    stepped, fast = fresh(), fresh()
    run = fast.decode_run()
    assert (run.tail is not None) == expect_tail
    k = run.max_steps
    batches, finished = [], []
    for j in range(k):
        step, done = run_step(stepped, 1.0 + j)
        batches.append(step.batch)
        finished += done
    # the same step shapes (batches() never ends: the first k)
    assert [b for _, b in zip(range(k), run.batches(), strict=False)] == batches
    done_k, used = fast.allocate_decode_run(run, [2.0 + j for j in range(k)])
    assert done_k == k and len(used) == k
    fast_finished = fast.finish_decode_run(run, k, 1.0 + k)
    assert [(r.request_id, r.finished_s) for r in fast_finished] == [(r.request_id, r.finished_s) for r in finished]
    for x, y in zip(stepped.running + finished, fast.running + fast_finished, strict=True):
        assert (x.num_computed_tokens, x.num_output_tokens, x.block_ids, x.first_token_s, x.last_token_s) == \
               (y.num_computed_tokens, y.num_output_tokens, y.block_ids, y.first_token_s, y.last_token_s)
    assert stepped.kv.num_used_blocks == fast.kv.num_used_blocks
    return run


def test_decode_run_matches_stepping():
    def fresh():
        s = make(num_blocks=40, block_size=4)
        for i, out in enumerate((9, 14, 30)):
            s.add_request(Request(i, 0, 10 + i, out))
        run_step(s, 0.0)
        return s
    run = _compare_run_with_stepping(fresh, expect_tail=False)
    # first finish: the 9-token request, 8 decodes after its first token; context 10 + 11 + 12
    assert (run.max_steps, run.num_seqs, run.context_tokens) == (8, 3, 33)


def test_decode_run_can_start_with_the_last_chunk_of_a_prompt():
    def fresh():
        s = make(num_blocks=60, block_size=4, max_num_batched_tokens=64)
        for i, out in enumerate((20, 25)):
            s.add_request(Request(i, 0, 10, out))
        run_step(s, 0.0)                  # two prompts of 10: first tokens
        s.add_request(Request(2, 0.5, 100, 6))
        run_step(s, 1.0)                  # 2 decodes + 62 of the 100-token prompt
        return s
    run = _compare_run_with_stepping(fresh, expect_tail=True)
    # 38 prompt tokens left; the new request finishes first, at its 6th token (1 + 5 decodes)
    assert (run.tail_tokens, run.num_seqs, run.max_steps) == (38, 2, 6)


def test_a_prefix_hit_is_admitted_when_just_enough_blocks_are_free():
    # 6 blocks of 4 tokens. A (8-token prompt, one 8-token segment) leaves its 2 keyed blocks
    # cached; C holds 3 plain blocks (11 tokens, its next token fits); B shares A's segment:
    # 2 hit blocks + 4 own tokens = 1 new block, and exactly 1 block is free besides B's own
    # hits (6 - 3 held - 2 hits)
    s = Scheduler(scheduler_config(8, 64), KVCacheManager(6, 4, enable_prefix_caching=True))
    a = Request(0, 0, 8, 1, prefix_segments=(7,), segment_tokens=8)
    s.add_request(a)
    run_step(s, 0.0)                      # prefill + first token: a is done, its blocks cached
    assert a.status is Status.FINISHED and s.kv.num_cached_free_blocks == 2
    c = Request(1, 0, 11, 5)
    s.add_request(c)
    run_step(s, 1.0)                      # c: 11 tokens in 3 blocks (plain ones first)
    b = Request(2, 0, 12, 5, prefix_segments=(7,), segment_tokens=8)
    s.add_request(b)
    step = s.schedule(2.0)
    assert b in [q.request for q in step.seqs] and b.num_cached_prompt_tokens == 8
    assert [q.num_new_tokens for q in step.seqs if q.request is b] == [4]
    s.kv.check_invariants(s.running)


def test_windowed_kv_runs_more_long_requests_at_once():
    # 150 requests of 1,500-token prompts and 100 outputs; half the layers slide (window 128). Counting them at
    # full context on 500 blocks (each 16 tokens of every layer), a request ends holding ceil(1,599 / 16) = 100
    # blocks: 5 run at once. The same memory as 1,000 blocks of the full layers' 16 tokens, with the sliding
    # layers holding 8 + 1 blocks for their window: 100 + 9 = 109 blocks a request, 9 at once.
    from simhelp import LinearStepModel, sim_config

    from simulator.run import simulate
    from simulator.workload import Arrivals, Lengths, WorkloadSpec

    w = WorkloadSpec(150, Arrivals("poisson", 200.0), Lengths("fixed", 1500), Lengths("fixed", 100))
    # admitted only with blocks for their whole output (reserve_full_kv), so the counts are the bound
    common = dict(max_num_batched_tokens=2048, enable_prefix_caching=False, reserve_full_kv=True,
                  check_invariants=True)
    windowed = simulate(sim_config(num_blocks=1000, kv_windows=((1.0, 128),), **common), LinearStepModel(), w,
                        seed=3)
    counted = simulate(sim_config(num_blocks=500, **common), LinearStepModel(), w, seed=3)
    assert not windowed.columns["rejected"].any() and not counted.columns["rejected"].any()
    assert windowed.timeline.num_seqs.max() == 9 and counted.timeline.num_seqs.max() == 5
    assert windowed.timeline.kv_used_blocks.max() <= 9 * 109


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_windowed_kv_under_preemption_keeps_every_block_accounted(mode):
    # a pool far too small for the load, so requests are preempted (recomputed or swapped) and readmitted; shared
    # prompt prefixes hit the cache; check_invariants proves after every event that every block, window blocks
    # included, is free, cached or held once, and the run ends with nothing held
    from simhelp import LinearStepModel, sim_config

    from simulator.config import SwapLink
    from simulator.run import simulate
    from simulator.workload import Arrivals, Lengths, SharedPrefix, WorkloadSpec

    w = WorkloadSpec(120, Arrivals("poisson", 100.0), Lengths("lognormal", 700, 500, max_tokens=3000),
                     Lengths("lognormal", 150, 100, max_tokens=600), SharedPrefix(0.8, 256, num_prefixes=4))
    swap = SwapLink(1e6, 1e10) if mode == "swap" else None
    r = simulate(sim_config(num_blocks=700, max_num_batched_tokens=1024, preemption_mode=mode, swap=swap,
                            kv_windows=((0.5, 128), (2.0, 512)), check_invariants=True), LinearStepModel(), w, seed=5)
    assert r.num_preemptions > 0 and not r.columns["rejected"].any() and r.leaks == ()
