"""Issue 9, item 6: a request whose first token is its last finishes at the prefill replica,
and speculative decoding never plans a negative number of draft tokens.

Numbers come from the linear step model (simhelp): a = 5 ms a step, b = 50 us a new token,
k = 0.1 us a context token; a prompt of P tokens alone in a step takes a + b P. The KV
transfer is 1 ms + P x 1e6 B / 1e11 B/s (P = 1000: 11 ms).
"""

import dataclasses

import numpy as np
import pytest
import simpy
from simhelp import DATA, LinearStepModel, scheduler_config, sim_config

from simulator.cluster import Cluster, DisaggregationConfig, Router
from simulator.engine_loop import BARE
from simulator.kv_cache import KVCacheManager
from simulator.records import Recorder
from simulator.request import Request, Status
from simulator.run import simulate
from simulator.scheduler import Scheduler
from simulator.speculative import SpeculativeConfig
from simulator.step import StepBuilder
from simulator.traces import read_mooncake
from simulator.workload import Arrivals, Lengths, WorkloadSpec

A, B, K = 5e-3, 5e-5, 1e-7
P = 1000
PREFILL_S = A + B * P                              # 55 ms: a 1000-token prompt alone in a step
TRANSFER_S = 1e-3 + P * 1e6 / 1e11                 # 11 ms


def disagg(prefill: int = 1, decode: int = 1) -> DisaggregationConfig:
    return DisaggregationConfig(prefill, decode, kv_bytes_per_token=1e6, interconnect_bytes_per_s=1e11,
                                transfer_latency_s=1e-3)


def ngram(acceptance_rate: float) -> SpeculativeConfig:
    return SpeculativeConfig("ngram", num_speculative_tokens=4, acceptance_rate=acceptance_rate,
                             draft_cost_fraction=0.0)


class StrictModel(LinearStepModel):
    """The linear model, refusing a batch with a negative draft count or a sequence with no token."""

    def step_time(self, batch):
        assert batch.draft_tokens >= 0, batch
        assert batch.new_tokens >= batch.num_seqs, batch
        return super().step_time(batch)


@pytest.fixture
def planned_drafts(monkeypatch) -> list[int]:
    """Every sequence's planned draft tokens, as the scheduler adds it to a step."""
    seen: list[int] = []
    add = StepBuilder.add

    def spy(self, req, n, decode, spec):
        seen.append(spec)
        add(self, req, n, decode, spec)
    monkeypatch.setattr(StepBuilder, "add", spy)
    return seen


def alone(outputs: list[int]) -> list[Request]:
    """One 1000-token prompt per output length, a second apart: each runs alone."""
    return [Request(i, float(i), P, out) for i, out in enumerate(outputs)]


def run_cluster(config, model, requests: list[Request], seed: int = 0) -> Cluster:
    """`simulate`, keeping the cluster to inspect its replicas' KV pools at the end."""
    env = simpy.Environment()
    cluster = Cluster(env, config.replica, config.num_replicas, Router(config.router, config.prefix_balance_slack),
                      model, Recorder(), seed, sorted(requests, key=lambda r: r.arrival_s), config.disaggregation,
                      config.fast_forward, config.check_invariants)
    env.run()
    return cluster


def test_disaggregated_output_of_one_token_finishes_at_the_prefill_replica():
    r = simulate(sim_config(num_blocks=400, max_num_batched_tokens=1024, disaggregation=disagg()), StrictModel(),
                 alone([1, 1, 1]), seed=0)
    c = r.columns
    assert c["generated_tokens"].tolist() == [1, 1, 1]          # was 2: the decode pool sampled again
    assert c["replica"].tolist() == [0, 0, 0]                   # replica 0 is the prefill pool
    # the prompt's step samples the one token, and that is the end: TTFT = E2E = a + b x 1000 = 55 ms
    assert np.allclose(c["ttft_ms"], PREFILL_S * 1000) and np.allclose(c["e2e_ms"], PREFILL_S * 1000)
    assert np.array_equal(c["ttft_ms"], c["e2e_ms"])
    assert (r.timeline.replica == 0).all() and len(r.itl_gaps_s) == 0   # the decode replica never steps


def test_disaggregated_output_of_one_token_under_load_never_reaches_the_decode_pool():
    # 300 concurrent-ish one-token requests over 2 prefill + 2 decode replicas (indices 0, 1 | 2, 3)
    w = WorkloadSpec(300, Arrivals("poisson", 50.0), Lengths("lognormal", 600, 400, max_tokens=3000),
                     Lengths("fixed", 1))
    r = simulate(sim_config(num_blocks=600, disaggregation=disagg(2, 2), check_invariants=True), StrictModel(), w,
                 seed=4)
    c = r.columns
    assert (c["generated_tokens"] == 1).all() and not c["rejected"].any() and len(c["request_id"]) == 300
    assert set(c["replica"].tolist()) <= {0, 1} and set(r.timeline.replica.tolist()) <= {0, 1}
    assert np.array_equal(c["ttft_ms"], c["e2e_ms"])


def test_disaggregated_speculative_outputs_of_1_2_and_5_tokens(planned_drafts):
    # gamma 4, every draft accepted (alpha = 1), drafting free. The prefill replica's token:
    # - 1 token: done there (55 ms; before the fix: a verification of 1 + (1 - 1 - 1) = 0 tokens
    #   with -1 drafts on the decode replica, a 0.0 s step under the roofline);
    # - otherwise dropped: the decode replica computes the last prompt token again (context 999) and samples the first
    #   token, the client's first, at 55 + 11 + (a + b + k x 999 = 5.1499) ms;
    # - 2 tokens: then 1 left, so 0 drafts: one plain decode at context 1000, + 5.15 ms;
    # - 5 tokens: then 4 left, so min(4, 4 - 1) = 3 drafts: one verification of 4 tokens yields all 4, + 5.3 ms.
    cfg = sim_config(num_blocks=400, max_num_batched_tokens=1024, disaggregation=disagg(), speculative=ngram(1.0))
    r = simulate(cfg, StrictModel(), alone([1, 2, 5]), seed=0)
    c = r.columns
    assert c["generated_tokens"].tolist() == [1, 2, 5]
    assert c["replica"].tolist() == [0, 1, 1]
    first = PREFILL_S + TRANSFER_S + A + B + K * (P - 1)
    assert np.allclose(c["ttft_ms"], [PREFILL_S * 1000, first * 1000, first * 1000])
    decode_2, verify_5 = A + B + K * P, A + 4 * B + K * P
    assert np.allclose(c["e2e_ms"], [PREFILL_S * 1000, (first + decode_2) * 1000, (first + verify_5) * 1000])
    # the plan per sequence: three prompts and the decode replica's two first tokens (0 drafts), the 2-token decode
    # (0), the 5-token verification (3)
    assert sorted(planned_drafts) == [0, 0, 0, 0, 0, 0, 3]


@pytest.mark.parametrize("acceptance_rate", [0.0, 0.7, 1.0])
def test_disaggregated_speculative_random_traffic_generates_exactly_the_output(acceptance_rate, planned_drafts):
    # outputs 1..6 around gamma = 4, under contention (preemptions): counts must come out exact
    w = WorkloadSpec(200, Arrivals("poisson", 40.0), Lengths("lognormal", 500, 300, max_tokens=2000),
                     Lengths("uniform", min_tokens=1, max_tokens=6))
    cfg = sim_config(num_blocks=300, disaggregation=disagg(2, 1), speculative=ngram(acceptance_rate),
                     check_invariants=True)
    r = simulate(cfg, StrictModel(), w, seed=11)
    c = r.columns
    assert np.array_equal(c["generated_tokens"], c["output_tokens"]) and not c["rejected"].any()
    assert (c["replica"][c["output_tokens"] == 1] < 2).all() and (c["replica"][c["output_tokens"] > 1] == 2).all()
    assert min(planned_drafts) == 0 and max(planned_drafts) == 4    # 0 <= drafts <= gamma, every sequence


def test_speculative_without_disaggregation_outputs_of_1_and_2_tokens(planned_drafts):
    # one replica, alpha = 1: the prompt step samples token 1 (55 ms), which ends a 1-token request;
    # a 2-token one has 1 left, so 0 drafts: one decode at context 1000, 55 + 5.15 = 60.15 ms;
    # a 5-token one verifies 1 + 3 drafts at once: 55 + 5.3 = 60.3 ms
    cfg = sim_config(num_blocks=400, max_num_batched_tokens=1024, speculative=ngram(1.0))
    r = simulate(cfg, StrictModel(), alone([1, 2, 5]), seed=0)
    c = r.columns
    assert c["generated_tokens"].tolist() == [1, 2, 5]
    assert np.allclose(c["ttft_ms"], PREFILL_S * 1000)
    assert np.allclose(c["e2e_ms"], [PREFILL_S * 1000, (PREFILL_S + A + B + K * P) * 1000,
                                     (PREFILL_S + A + 4 * B + K * P) * 1000])
    assert sorted(planned_drafts) == [0, 0, 0, 0, 3]


@pytest.mark.parametrize("speculative", [None, ngram(0.7)])
@pytest.mark.parametrize("fast_forward", [False, True])
def test_no_request_and_no_block_is_lost(speculative, fast_forward):
    # outputs from 1 (a third of them) up, 140-block pools for prompts of up to 1500 tokens (94
    # blocks), so the decode pool preempts; at the end every request is recorded once, finished
    # with exactly its output, holding no block, and every pool is all free
    rng = np.random.default_rng(5)
    outputs = np.where(rng.random(240) < 1 / 3, 1, rng.integers(2, 80, 240)).tolist()
    prompts = rng.integers(50, 1500, 240).tolist()
    arrivals = np.cumsum(rng.exponential(1 / 60.0, 240)).tolist()
    reqs = [Request(i, t, p, o) for i, (t, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))]
    cfg = sim_config(num_blocks=140, disaggregation=disagg(2, 2), speculative=speculative, fast_forward=fast_forward,
                     check_invariants=True)
    cluster = run_cluster(cfg, StrictModel(), reqs, seed=3)
    assert cluster.recorder.num_done == 240 and cluster.num_preemptions > 0
    assert all(r.status is Status.FINISHED and r.num_output_tokens == r.output_tokens and not r.block_ids
               for r in reqs)
    for replica in cluster.replicas:
        assert not replica.scheduler.has_unfinished() and not replica.inbox
        assert replica.kv.num_used_blocks == 0 and replica.kv.num_free_blocks == replica.kv.num_blocks
        replica.kv.check_invariants([])
    assert not cluster._transfers                          # no KV left in flight
    cols = cluster.recorder.result(160, len(cluster.replicas), 0, BARE).columns
    assert sorted(cols["request_id"].tolist()) == list(range(240))


def test_fast_forward_matches_stepping_with_one_token_outputs_disaggregated():
    w = WorkloadSpec(150, Arrivals("poisson", 25.0), Lengths("lognormal", 400, 300, max_tokens=1500),
                     Lengths("uniform", min_tokens=1, max_tokens=3))
    stepped, fast = (simulate(sim_config(num_blocks=300, disaggregation=disagg(1, 2), fast_forward=ff), StrictModel(),
                              w, seed=2) for ff in (False, True))
    assert all(np.array_equal(stepped.columns[k], fast.columns[k], equal_nan=True) for k in stepped.columns)
    assert all(np.array_equal(getattr(stepped.timeline, f.name), getattr(fast.timeline, f.name))
               for f in dataclasses.fields(stepped.timeline))
    assert np.array_equal(stepped.columns["generated_tokens"], stepped.columns["output_tokens"])


@pytest.mark.parametrize("speculative", [None, ngram(0.7)])
def test_mooncake_slice_disaggregated_generates_exactly_the_requested_tokens(speculative):
    # the slice holds 3 requests asking for 1 token (and 17 for at most 5); Llama-3.1-8B-like sizes
    # as in test_simulate's Mooncake test: 26,700 blocks of 16 per replica
    w = read_mooncake(DATA / "mooncake_conversation_head500.jsonl")
    reqs = list(w.requests())
    model = StrictModel()
    model.base_s, model.per_token_s, model.per_context_s = 8e-3, 3e-5, 1.5e-7
    cfg = sim_config(num_blocks=26_700, max_num_seqs=128, max_num_batched_tokens=8192, disaggregation=disagg(1, 1),
                     speculative=speculative)
    c = simulate(cfg, model, reqs, seed=0).columns
    assert len(c["request_id"]) == 500 and not c["rejected"].any()
    assert np.array_equal(c["generated_tokens"], c["output_tokens"])
    one = c["output_tokens"] == 1
    assert one.sum() == 3 and (c["replica"][one] == 0).all() and np.array_equal(c["ttft_ms"][one], c["e2e_ms"][one])


def test_the_scheduler_refuses_a_request_with_no_output_left():
    # a request that has produced all its tokens can only over-generate (and, with drafts, would be
    # planned output left - 1 = -1 drafts): the caller's bug, refused loudly
    s = Scheduler(scheduler_config(8, 512, speculative=ngram(0.5)), KVCacheManager(100, 16))
    done = Request(0, 0.0, 100, 1)
    done.num_output_tokens, done.num_computed_tokens = 1, 100
    with pytest.raises(ValueError, match="nothing left to schedule"):
        s.add_request(done)
    assert s.add_request(Request(1, 0.0, 100, 1)) and s.num_unfinished == 1

