"""Closed-loop workloads (issue 23 item 8): N clients, each sending its next request when the answer
to its last has reached it, as `vllm bench serve --max-concurrency N` does at its default infinite rate."""

import dataclasses

import numpy as np
import pytest
from simhelp import LinearStepModel, sim_config

from simulator.config import DisaggregationConfig
from simulator.engine_loop import BARE
from simulator.metrics import peak_concurrency, summarise
from simulator.run import simulate
from simulator.workload import ClosedLoop, Lengths, WorkloadSpec

# vLLM V1's loop shape with the fitted API-server costs (sizer/sizing/presets.py)
LOOP = dataclasses.replace(BARE, name="async", async_scheduling=True, schedule_s=0.5e-3, schedule_s_per_seq=20e-6,
                           input_s=3e-3, output_s_per_pass=2e-3, output_s_per_token=30e-6)


def closed(n: int, concurrency: int, think_s: float = 0.0, out=Lengths("uniform", min_tokens=20, max_tokens=200)):
    return WorkloadSpec(n, ClosedLoop(concurrency, think_s), Lengths("uniform", min_tokens=50, max_tokens=800), out)


def test_one_client_sends_each_request_as_the_last_answer_arrives():
    result = simulate(sim_config(engine_loop=LOOP), LinearStepModel(), closed(200, 1), seed=3)
    c, s = result.columns, summarise(result)
    # one request at a time, back to back: the run is the sum of the E2Es, so throughput = 1 / mean E2E
    assert s.request_throughput_per_s == pytest.approx(1000.0 / s.e2e.mean_ms, rel=0.01)
    # each request is sent the instant the previous one's last token reaches the client
    finish_s = c["arrival_s"] + c["e2e_ms"] / 1000
    assert np.allclose(c["arrival_s"][1:], finish_s[:-1], rtol=0, atol=1e-9)
    assert s.peak_concurrent_requests == 1 and c["arrival_s"][0] == 0.0


def test_think_time_adds_to_each_cycle():
    think_s = 0.5
    s = summarise(simulate(sim_config(engine_loop=LOOP), LinearStepModel(), closed(100, 1, think_s), seed=3))
    # a cycle is E2E + think; the last request's think time is not waited for: 100 / (sum E2E + 99 x think)
    span_s = 100 * s.e2e.mean_ms / 1000 + 99 * think_s
    assert s.request_throughput_per_s == pytest.approx(100 / span_s, rel=1e-6)


def test_sixty_four_clients_never_have_more_than_sixty_four_requests_in_flight():
    result = simulate(sim_config(engine_loop=LOOP, max_num_batched_tokens=2048, num_replicas=2,
                                 router="least_outstanding"), LinearStepModel(), closed(1000, 64), seed=5)
    c, s = result.columns, summarise(result)
    assert s.num_finished == 1000
    # in flight: from each send to its last token as the client sees it
    assert s.peak_concurrent_requests == 64
    assert peak_concurrency(c["arrival_s"], c["arrival_s"] + c["e2e_ms"] / 1000) == 64
    assert np.sum(c["arrival_s"] == 0.0) == 64          # every client sends its first request at once
    # Little's law for a closed loop: throughput = concurrency / mean time in system (while all 64 are busy)
    assert s.request_throughput_per_s == pytest.approx(64 / (s.e2e.mean_ms / 1000), rel=0.05)


def test_peak_concurrency_counts_an_end_before_a_start_at_the_same_instant():
    # [0, 1) and [1, 2) never overlap; [0.5, 1.5) overlaps both
    assert peak_concurrency(np.array([0.0, 1.0]), np.array([1.0, 2.0])) == 1
    assert peak_concurrency(np.array([0.0, 1.0, 0.5]), np.array([1.0, 2.0, 1.5])) == 2


def test_clients_wait_for_an_api_server_that_lags_behind_short_steps():
    # review finding: steps of ~1 ms (a small model) against API-server passes of 2 ms + 30 us a sequence: the
    # server handles every output waiting for it in one pass and falls behind the engine, so an answer reaches its
    # client several passes after its step. The next request was sent one pass after the step (peak 256 in flight
    # for 128 clients on a 1B model, throughput 25% above 128 / E2E); each client now waits for its own answer
    result = simulate(sim_config(engine_loop=LOOP), LinearStepModel(base_s=0.5e-3, per_token_s=2e-6),
                      closed(3000, 128, out=Lengths("fixed", mean_tokens=20)), seed=7)
    c, s = result.columns, summarise(result)
    assert s.num_finished == 3000
    assert s.peak_concurrent_requests == 128
    assert peak_concurrency(c["arrival_s"], c["arrival_s"] + c["e2e_ms"] / 1000) == 128
    # every client's next send is the client time of its last answer (the run's client times, records.ApiServer)
    finish_s = np.sort(c["arrival_s"] + c["e2e_ms"] / 1000)
    later = np.sort(c["arrival_s"])[128:]
    assert np.allclose(later, finish_s[:len(later)], rtol=0, atol=1e-9)
    assert s.request_throughput_per_s == pytest.approx(128 / (s.e2e.mean_ms / 1000), rel=0.03)


def test_a_disaggregated_client_waits_for_its_first_token_too():
    # review finding: a two-token request's first token reaches the client through the prefill replica's API server,
    # the second through the decode replica's, and the stream shows no token before the first
    # (records.derived_columns): the next send waited for the decode replica's pass alone, 39-95 us early when the
    # prefill replica's server lagged more, and 129 requests were in flight for 128 clients
    config = sim_config(engine_loop=LOOP, disaggregation=DisaggregationConfig(1, 2, 1e5, 1e10, 1e-3))
    result = simulate(config, LinearStepModel(base_s=0.5e-3, per_token_s=2e-6),
                      closed(2000, 128, out=Lengths("uniform", min_tokens=1, max_tokens=3)), seed=7)
    c, s = result.columns, summarise(result)
    assert s.num_finished == 2000 and s.peak_concurrent_requests == 128
    finish_s = np.sort(c["arrival_s"] + c["e2e_ms"] / 1000)
    assert (np.sort(c["arrival_s"])[128:] >= finish_s[:-128] - 1e-12).all()
