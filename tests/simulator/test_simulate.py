import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simhelp import DATA, LinearStepModel, scheduler_config, sim_config

from simulator.cluster import DisaggregationConfig
from simulator.config import SwapLink
from simulator.engine_loop import BARE, EngineLoop
from simulator.metrics import summarise
from simulator.request import Request
from simulator.run import simulate
from simulator.step_batch import StepBatch, batch_of
from simulator.traces import read_mooncake
from simulator.workload import Arrivals, Lengths, SharedPrefix, WorkloadSpec


def spec(n=200, rate=5.0, prompt=Lengths("fixed", 300), output=Lengths("fixed", 50), **kw):
    return WorkloadSpec(n, Arrivals("poisson", rate), prompt, output, **kw)


def same(a, b):
    cols = all(np.array_equal(a.columns[k], b.columns[k], equal_nan=True) for k in a.columns)
    steps = all(np.array_equal(getattr(a.timeline, f.name), getattr(b.timeline, f.name))
                for f in dataclasses.fields(a.timeline))
    return cols and steps and np.array_equal(a.itl_gaps_s, b.itl_gaps_s)


def test_low_load_ttft_and_itl_are_the_step_times(linear):
    # one request at a time (0.01/s, ~0.5 s each): TTFT is the prefill step, each later token one
    # decode step at its context: a + b x 1 + c x (P + k - 1) for the k-th decode
    r = simulate(sim_config(max_num_batched_tokens=1024), linear, spec(20, rate=0.01, prompt=Lengths("fixed", 800)),
                 seed=2)
    c = r.columns
    a, b, k = linear.base_s, linear.per_token_s, linear.per_context_s
    assert np.allclose(c["ttft_ms"], (a + b * 800) * 1000)                 # 45 ms
    decode = [(a + b + k * (800 + i)) * 1000 for i in range(49)]
    assert np.allclose(c["tpot_ms"], np.mean(decode))
    assert np.allclose(c["queue_ms"], 0.0)
    s = summarise(r)
    assert s.itl.p50_ms == pytest.approx(np.median(decode), rel=1e-3)


def test_every_request_finishes_or_is_rejected_with_a_reason_and_gets_all_its_tokens(linear):
    w = spec(300, rate=20.0, prompt=Lengths("uniform", min_tokens=10, max_tokens=3000),
             output=Lengths("uniform", min_tokens=1, max_tokens=200))
    cfg = sim_config(num_blocks=150, max_model_len=3000, check_invariants=True)
    r = simulate(cfg, linear, w, seed=4)
    c = r.columns
    assert sorted(c["request_id"].tolist()) == list(range(300))
    rejected = c["rejected"]
    # 150 blocks x 16 = 2400 tokens; prompt + output above 3000 or needing > 150 blocks is rejected
    too_big = (c["prompt_tokens"] + c["output_tokens"] > 3000) | \
              (np.ceil((c["prompt_tokens"] + c["output_tokens"] - 1) / 16) > 150)
    assert np.array_equal(rejected, too_big) and rejected.any()
    assert all(r.requests.loc[rejected, "reject_reason"].str.len() > 0)
    assert np.array_equal(c["generated_tokens"][~rejected], c["output_tokens"][~rejected])
    assert r.num_preemptions > 0                      # the small cache forced some


def test_same_seed_same_result_to_the_bit(linear):
    w = spec(150, rate=30.0, prompt=Lengths("lognormal", 500, 300), shared_prefix=SharedPrefix(0.5, 200, 3))
    a, b = (simulate(sim_config(num_blocks=300), linear, w, seed=9) for _ in range(2))
    assert same(a, b)
    other = simulate(sim_config(num_blocks=300), linear, w, seed=10)
    assert not np.array_equal(a.columns["arrival_s"], other.columns["arrival_s"])


# the bare loop, and loops whose requests reach the engine late (decode runs stop at their admission cut-off)
LOOPS = [BARE, EngineLoop("async", True, 0.004, 1e-5, 0.03, 0.001, 1e-5, 1),
         EngineLoop("sync", False, 0.002, 1e-5, 0.02, 0.001, 1e-5, 1)]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(1.0, 60.0), blocks=st.integers(120, 800),
       chunked=st.booleans(), swap=st.booleans(), replicas=st.integers(1, 3),
       router=st.sampled_from(["round_robin", "least_outstanding", "prefix_aware"]), share=st.floats(0.0, 1.0),
       loop=st.sampled_from(LOOPS))
def test_fast_forward_is_identical_to_stepping_and_conserves_blocks(seed, rate, blocks, chunked, swap, replicas, router,
                                                                    share, loop):
    w = spec(60, rate=rate, prompt=Lengths("lognormal", 400, 300, max_tokens=1500),
             output=Lengths("uniform", min_tokens=1, max_tokens=120), shared_prefix=SharedPrefix(share, 128, 2, 2))
    kw = dict(num_blocks=blocks, max_num_batched_tokens=512 if chunked else 2048, enable_chunked_prefill=chunked,
              preemption_mode="swap" if swap else "recompute", swap=SwapLink(1e5, 32e9) if swap else None,
              num_replicas=replicas, engine_loop=loop,
              router=router, check_invariants=True)
    model = LinearStepModel()
    stepped = simulate(sim_config(fast_forward=False, **kw), model, w, seed=seed)
    fast = simulate(sim_config(fast_forward=True, **kw), model, w, seed=seed)
    assert same(stepped, fast)
    assert stepped.timeline.kv_usage.max() <= 1.0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(2.0, 80.0), blocks=st.integers(60, 600),
       max_seqs=st.integers(2, 48), budget=st.integers(48, 1024), swap=st.booleans(), reserve=st.booleans(),
       share=st.floats(0.0, 1.0), loop=st.sampled_from(LOOPS))
def test_the_only_replicas_runs_through_finishes_and_admissions_are_identical_to_stepping(
        seed, rate, blocks, max_seqs, budget, swap, reserve, share, loop):
    # the only replica of known arrivals applies whole stretches of steps at once (Scheduler.decode_through:
    # the group's decodes through finishes, beside prompt chunks and admissions); queues, a short pool
    # (preemptions), a sequence cap, budgets below a prompt, one-token outputs and shared prefixes must all give
    # stepping's numbers to the bit
    w = spec(150, rate=rate, prompt=Lengths("lognormal", 300, 250, max_tokens=1200),
             output=Lengths("uniform", min_tokens=1, max_tokens=90), shared_prefix=SharedPrefix(share, 64, 3, 2))
    kw = dict(num_blocks=blocks, max_num_seqs=max_seqs, max_num_batched_tokens=max(budget, max_seqs),
              enable_chunked_prefill=True, preemption_mode="swap" if swap else "recompute",
              swap=SwapLink(1e5, 32e9) if swap else None, reserve_full_kv=reserve, engine_loop=loop,
              check_invariants=True)
    model = LinearStepModel()
    stepped = simulate(sim_config(fast_forward=False, **kw), model, w, seed=seed)
    fast = simulate(sim_config(fast_forward=True, **kw), model, w, seed=seed)
    assert same(stepped, fast)
    assert not fast.leaks


def test_speculative_tokens_per_verification_match_the_formula_at_batch_one():
    from simulator.speculative import SpeculativeConfig, expected_tokens_per_step
    spec_cfg = SpeculativeConfig("ngram", num_speculative_tokens=4, acceptance_rate=0.7, draft_cost_fraction=0.0)
    assert expected_tokens_per_step(0.7, 4) == pytest.approx((1 - 0.7 ** 5) / 0.3)   # 2.7731
    one = [Request(0, 0.0, 100, 20001)]
    r = simulate(sim_config(num_blocks=2000, speculative=spec_cfg), LinearStepModel(), one, seed=1)
    steps = len(r.timeline.end_s) - 1                        # all but the prefill step verify drafts
    assert 20000 / steps == pytest.approx(2.7731, rel=0.02)
    assert r.timeline.new_tokens[1] == 5                     # 1 + gamma tokens through the model


@pytest.mark.parametrize(("method", "fraction", "own_model", "ttft_ms"), [
    # a draft model priced by its own step model (base 1 ms, 10 us a token, 0.01 us a cached token): its first
    # pass over the 800-token prompt, 1 + 0.01 x 800 = 9 ms, then 3 one-token passes on 800 cached tokens,
    # 3 x (1 + 0.01 + 0.008) = 3.054 ms, beside the target's prefill 5 + 0.05 x 800 = 45 ms
    ("draft_model", 0.0, True, 45 + 9 + 3.054),
    # an EAGLE head at 0.05 of the target: 0.05 x the target's 45 ms pass over the prompt, then 3 one-token passes
    # at 0.05 x (5 + 0.05 + 0.0001 x 800 = 5.13 ms)
    ("eagle", 0.05, False, 45 * 1.05 + 3 * 0.05 * 5.13),
    # Medusa's heads read one hidden state a sequence: 4 x 0.03 x 5.13 ms, nothing a prompt token
    ("medusa", 0.03, False, 45 + 4 * 0.03 * 5.13),
])
def test_drafting_runs_beside_every_step_and_a_drafter_with_a_kv_over_the_prompt(method, fraction, own_model, ttft_ms):
    # audit finding: drafting was priced for verifying sequences only, so a draft model's TTFT left out its pass
    # over the prompt (vLLM's propose_draft_token_ids feeds the drafter every scheduled token: its KV must be built)
    from simulator.speculative import SpeculativeConfig
    draft = LinearStepModel(base_s=1e-3, per_token_s=1e-5, per_context_s=1e-8) if own_model else None
    spec_cfg = SpeculativeConfig(method, num_speculative_tokens=4, acceptance_rate=0.0, draft_cost_fraction=fraction,
                                 draft_step_model=draft)
    # the target: 5 ms + 50 us a token + 0.1 us a cached token (LinearStepModel's defaults)
    r = simulate(sim_config(max_num_batched_tokens=1024, speculative=spec_cfg), LinearStepModel(),
                 [Request(0, 0.0, 800, 3)], seed=0)
    assert r.columns["ttft_ms"][0] == pytest.approx(ttft_ms)


def test_speculative_speed_up_falls_as_the_rate_rises():
    from simulator.speculative import SpeculativeConfig
    spec_cfg = SpeculativeConfig("eagle", num_speculative_tokens=4, acceptance_rate=0.7, draft_cost_fraction=0.05)
    model = LinearStepModel(base_s=5e-3, per_token_s=1e-4, per_context_s=1e-7)
    speedups = []
    for rate in (0.2, 4.0, 16.0):
        w = spec(150, rate=rate, prompt=Lengths("fixed", 200), output=Lengths("fixed", 200))
        plain = simulate(sim_config(max_num_seqs=128, max_num_batched_tokens=2048), model, w, seed=3)
        fast = simulate(sim_config(max_num_seqs=128, max_num_batched_tokens=2048, speculative=spec_cfg), model, w,
                        seed=3)
        speedups.append(np.mean(plain.columns["e2e_ms"]) / np.mean(fast.columns["e2e_ms"]))
    assert speedups[0] > 1.8 and speedups[0] > speedups[1] > speedups[2]


def test_disaggregated_transfer_is_priced_at_the_interconnect(linear):
    # one request: prefill step (a + b x 1000), then 1000 tokens x 1e6 B / 1e11 B/s = 10 ms, then the decode replica
    # computes the last prompt token again (context 999) and samples the first token, the one the client sees first
    # (vLLM's disaggregated serving: cluster.py), then two decodes
    d = DisaggregationConfig(1, 1, kv_bytes_per_token=1e6, interconnect_bytes_per_s=1e11, transfer_latency_s=1e-3)
    r = simulate(sim_config(num_blocks=400, max_num_batched_tokens=1024, disaggregation=d), linear,
                 [Request(0, 0.0, 1000, 3)], seed=0)
    a, b, k = linear.base_s, linear.per_token_s, linear.per_context_s
    prefill, transfer = a + b * 1000, 1e-3 + 1000 * 1e6 / 1e11
    first = a + b + k * 999
    decodes = (a + b + k * 1000) + (a + b + k * 1001)
    assert r.columns["ttft_ms"][0] == pytest.approx((prefill + transfer + first) * 1000)
    assert r.columns["e2e_ms"][0] == pytest.approx((prefill + transfer + first + decodes) * 1000)
    assert r.columns["replica"][0] == 1                      # streamed and finished by the decode replica
    assert r.columns["generated_tokens"][0] == 3            # the prefill's token is not the client's
    assert not len(r.itl_gaps_s)                            # every gap the client sees is one decode step


def test_mooncake_slice_hit_rate_is_higher_with_the_prefix_aware_router():
    # Llama-3.1-8B on one H100 per replica: (0.9 x 80 GB - 16 GB weights) / 128 KiB a token
    # = 427k tokens = 26,700 blocks of 16; prefill ~33k tokens/s. The slice's ideal hit rate (an
    # infinite cache) is 16.4%; a real cache keeps only the last few dozen 12k-token prompts.
    w = read_mooncake(DATA / "mooncake_conversation_head500.jsonl")
    model = LinearStepModel(base_s=8e-3, per_token_s=3e-5, per_context_s=1.5e-7)
    rates = {}
    for router in ("round_robin", "prefix_aware"):
        cfg = sim_config(num_blocks=26_700, max_num_seqs=128, max_num_batched_tokens=8192, num_replicas=4,
                         router=router)
        rates[router] = summarise(simulate(cfg, model, w, seed=0)).prefix_cache_hit_rate
    assert 0.03 < rates["round_robin"] < 0.164
    assert rates["round_robin"] * 1.2 < rates["prefix_aware"] < 0.164


def test_reserve_full_kv_never_preempts(linear):
    w = spec(100, rate=50.0, prompt=Lengths("fixed", 500), output=Lengths("fixed", 300))
    greedy = simulate(sim_config(num_blocks=200), linear, w, seed=1)
    reserved = simulate(sim_config(num_blocks=200, reserve_full_kv=True), linear, w, seed=1)
    assert greedy.num_preemptions > 0 and reserved.num_preemptions == 0
    assert not reserved.columns["rejected"].any()


def test_step_batch_from_the_scheduler_matches_from_seqs(linear):
    # the batch sums the scheduler builds equal StepBatch.from_seqs over the same sequences
    from simulator.kv_cache import KVCacheManager
    from simulator.scheduler import Scheduler
    s = Scheduler(scheduler_config(8, 100), KVCacheManager(100, 16, False))
    for i, p in enumerate((30, 50, 70)):
        s.add_request(Request(i, 0.0, p, 5))
    step = s.schedule(0.0)
    s.update(step, 1.0)
    step = s.schedule(1.0)
    expected = StepBatch.from_seqs([(q.num_new_tokens, q.context_tokens) for q in step.seqs],
                                   [q.is_prefill for q in step.seqs])
    assert step.batch == expected


def test_batch_of_builds_the_same_step_batch_as_its_constructor():
    # batch_of is the simulator's one-C-call StepBatch; the memo keys and the model see no difference
    built = batch_of((3, 40, 900, 1180, 1, 37, 0, 0, 0))
    same = StepBatch(num_seqs=3, new_tokens=40, context_tokens=900, attention_pairs=1180, prefill_seqs=1,
                     prefill_tokens=37)
    assert type(built) is StepBatch and built == same and hash(built) == hash(same)
    assert built.prefill_tokens == 37 and built.lora_adapters == 0


def test_a_big_run_lets_go_of_its_replicas_before_reading_its_records(monkeypatch, linear):
    # the replicas (block tables, step-time memos) hold reference cycles: a run of COLLECT_AFTER_REQUESTS or more
    # (here every run) collects them once the events are done, so no Cluster is alive while the records are read
    import weakref

    import simulator.run as run
    from simulator.cluster import Cluster
    from simulator.records import Recorder

    monkeypatch.setattr(run, "COLLECT_AFTER_REQUESTS", 0)
    clusters, alive = [], []
    init, result = Cluster.__init__, Recorder.result

    def tracked(self, *a, **kw):
        clusters.append(weakref.ref(self))
        init(self, *a, **kw)

    def reading(self, *a, **kw):
        alive.append([c() is not None for c in clusters])
        return result(self, *a, **kw)

    monkeypatch.setattr(Cluster, "__init__", tracked)
    monkeypatch.setattr(Recorder, "result", reading)
    r = simulate(sim_config(), linear, spec(50, rate=10.0), seed=1)
    assert alive == [[False]] and len(r.columns["request_id"]) == 50 and r.leaks == ()
