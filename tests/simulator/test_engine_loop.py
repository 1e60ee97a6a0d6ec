"""The engine loop: asynchronous scheduling, CPU work per step, the API server's paths."""

import dataclasses

import numpy as np
import pytest
from simhelp import LinearStepModel, sim_config

from simulator.engine_loop import BARE
from simulator.metrics import summarise
from simulator.records import client_visible_s
from simulator.request import Request
from simulator.run import simulate

ASYNC = dataclasses.replace(BARE, name="async", async_scheduling=True)
STEP = LinearStepModel(base_s=10e-3, per_token_s=0.0, per_context_s=0.0)      # every step 10 ms


def test_cpu_work_hides_behind_the_gpu_only_when_scheduling_ahead():
    loop = dataclasses.replace(BARE, schedule_s=1e-3, schedule_s_per_seq=0.1e-3)
    # 20 sequences: 1 + 0.1 x 20 = 3 ms of CPU work per step
    assert loop.period_s(10e-3, 20) == pytest.approx(13e-3)                     # synchronous: 10 + 3
    fast = dataclasses.replace(loop, async_scheduling=True)
    assert fast.period_s(10e-3, 20) == pytest.approx(10e-3)                     # beside a 10 ms GPU step
    assert fast.period_s(2e-3, 20) == pytest.approx(3e-3)                       # the CPU binds a 2 ms step
    with pytest.raises(ValueError, match="costs must be >= 0"):
        dataclasses.replace(BARE, input_s=-1.0)


def test_the_api_server_queues_step_outputs():
    loop = dataclasses.replace(BARE, output_s_per_step=2e-3, output_s_per_token=1e-3)
    ends = np.array([10e-3, 12e-3, 30e-3])
    seqs = np.array([3, 1, 2])
    # costs 5, 3, 4 ms: f1 = 10 + 5 = 15; f2 = max(15, 12) + 3 = 18; f3 = max(18, 30) + 4 = 34
    assert client_visible_s(loop, ends, seqs) == pytest.approx([15e-3, 18e-3, 34e-3])


def two_requests(loop):
    # A from 0 (16-token prompt, 100 tokens out) steps every 10 ms; B arrives at 25 ms, during step [20, 30]
    reqs = [Request(0, 0.0, 16, 100), Request(1, 25e-3, 16, 5)]
    return simulate(sim_config(engine_loop=loop), STEP, reqs).columns


def test_a_request_arriving_mid_step_joins_the_step_after_next_when_scheduling_ahead():
    # synchronous: B is scheduled at 30 ms into [30, 40]: first token at 40 ms, TTFT 15 ms
    assert two_requests(BARE)["ttft_ms"][1] == pytest.approx(15.0)
    # ahead: [30, 40] was chosen at 20 ms, before B came: B runs in [40, 50], TTFT 25 ms
    assert two_requests(ASYNC)["ttft_ms"][1] == pytest.approx(25.0)
    # a request reaching an idle engine starts at once either way: A's TTFT is one step
    assert two_requests(ASYNC)["ttft_ms"][0] == pytest.approx(10.0)


def test_the_client_sees_the_input_path_and_the_output_path():
    loop = dataclasses.replace(ASYNC, input_s=3e-3, output_s_per_step=1e-3, output_s_per_token=0.5e-3)
    c = two_requests(loop)
    # A reaches the engine at 3 ms, its prefill step ends at 13 ms; its output takes 1 + 0.5 ms: 14.5 ms
    assert c["ttft_ms"][0] == pytest.approx(14.5)
    assert c["engine_ttft_ms"][0] == pytest.approx(10.0)           # from reaching the engine to the step's end
    # B reaches the engine at 25 + 3 = 28 ms, during [23, 33]; [33, 43] was chosen at 23 ms,
    # so B runs in [43, 53], whose output (2 tokens) takes 1 + 2 x 0.5 = 2 ms: 55 ms, TTFT 30 ms
    assert c["ttft_ms"][1] == pytest.approx(30.0)


def test_tokens_in_pairs_split_the_client_itl_into_nothing_and_two_steps():
    loop = dataclasses.replace(BARE, stream_tokens_per_chunk=2)
    result = simulate(sim_config(engine_loop=loop), STEP, [Request(0, 0.0, 16, 41)])
    client, engine = summarise(result), summarise(result, engine_side=True)
    assert engine.itl.p50_ms == pytest.approx(10.0) and engine.itl.mean_ms == pytest.approx(10.0)
    # 40 gaps of 10 ms as 20 of 20 ms and 20 of 0: the same mean, a bimodal spread
    assert client.itl.p50_ms == 0.0 and client.itl.p95_ms == pytest.approx(20.0)
    assert client.itl.mean_ms == pytest.approx(10.0)


def test_requests_on_the_input_path_reach_an_idle_engine_whatever_the_rounding():
    # arrivals whose sum with the input path rounds (0.1 + 3e-3 is not exact in binary) must
    # still be admitted when the engine wakes for them, not waited for again and again
    loop = dataclasses.replace(BARE, input_s=3e-3)
    reqs = [Request(i, 0.1 * i + 1e-9 * i, 16, 2) for i in range(50)]
    c = simulate(sim_config(engine_loop=loop), STEP, reqs).columns
    # each alone: 3 ms in, then a prefill step and one decode step of 10 ms
    assert np.allclose(c["ttft_ms"], 13.0) and np.allclose(c["e2e_ms"], 23.0)
