"""How busy a simulated replica was (sizer.sizing.goodput.pool_loads): what `plan --simulate` prices its energy by."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from simulator.config import DisaggregationConfig
from sizer.inputs.scenario import load_scenario
from sizer.sizing.day import steady_energy
from sizer.sizing.goodput import pool_loads, probe_slo, simulate_at
from sizer.sizing.resolve import resolve
from sizer.sizing.result import PoolLoad

ROOT = Path(__file__).resolve().parents[3]


def test_a_rejected_request_leaves_the_busy_share_to_the_finished_ones():
    # The chat scenario with max_model_len 4,096: 3.2% of its requests are longer and refused, their E2E NaN. The
    # span the step time is shared over runs from the first send to the last token of a finished request, so a
    # refused request does not make the busy share 0 (which priced every GPU at the idle 80 W).
    s = load_scenario(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
    s = dataclasses.replace(s, deployment=dataclasses.replace(s.deployment, max_model_len=4096))
    r = resolve(s)
    result = simulate_at(r, 2.0, 200)
    c = result.columns
    assert c["rejected"].any() and np.isnan(c["e2e_ms"][c["rejected"]]).all()
    done = ~c["rejected"]
    span_s = float((c["arrival_s"][done] + c["e2e_ms"][done] / 1e3).max() - c["arrival_s"].min())
    busy = float(result.timeline.step_s.sum()) / span_s
    # 2 req/s of about 1.7 s each is 3.4 requests in flight: a step runs all but the few % of the time none is
    # (98.7% when written); before, the span was NaN and the share 0
    assert 0.9 < busy < 1.0
    (load,) = probe_slo(r, 2.0, 200).load
    assert load.busy_share == pytest.approx(busy)


def test_a_disaggregated_replicas_pools_are_each_busy_over_their_own_engines():
    # One prefill engine (the simulator's replica 0) and two decode engines (1, 2) over a 10 s run; ridge 295.
    #   prefill: 0.5 + 1.5 = 2.0 s of steps / (1 engine x 10 s) = 0.2 busy; 0.5 s of it over the ridge: 0.25
    #   decode:  1 + 2 + 1 + 2 = 6.0 s / (2 engines x 10 s) = 0.3 busy; the 400-token step's 1 s of 6: 1/6
    # (summed over every engine and shared by one span, as before, it was 8 / 10 = 0.8 busy for every GPU)
    tl = SimpleNamespace(replica=np.array([0, 1, 2, 0, 1, 2]), step_s=np.array([0.5, 1.0, 2.0, 1.5, 1.0, 2.0]),
                         new_tokens=np.array([1000, 10, 10, 100, 400, 10]))
    d = DisaggregationConfig(1, 2, kv_bytes_per_token=1.0, interconnect_bytes_per_s=1.0, transfer_latency_s=0.0)
    prefill, decode = pool_loads(SimpleNamespace(timeline=tl), 295.0, 10.0, d)
    assert (prefill.pool, prefill.engine_replicas, decode.pool, decode.engine_replicas) == ("prefill", 1, "decode", 2)
    assert prefill.busy_share == pytest.approx(0.2) and prefill.compute_bound_share == pytest.approx(0.25)
    assert decode.busy_share == pytest.approx(0.3) and decode.compute_bound_share == pytest.approx(1 / 6)


def test_a_disaggregated_plans_energy_sums_each_pools_watts_over_its_gpus(tmp_path):
    # 1 prefill + 2 decode engines of Llama-3.1-8B at TP 1 on H100 SXM (idle 80, decode 450, prefill 700 W):
    #   prefill GPU busy 0.2, all compute-bound:  80 x 0.8 + 700 x 0.2 = 64 + 140 = 204 W
    #   decode GPUs busy 0.9, none compute-bound: 80 x 0.1 + 450 x 0.9 = 8 + 405 = 413 W each
    #   a replica: 204 + 2 x 413 = 1,030 W on 3 GPUs = 343.33 W per GPU; 2 replicas: 2.06 kWh an hour
    #   at 6 req/s x 250 output tokens x 3,600 s = 5.4 M tokens an hour: 2.06 / 5.4 = 0.38148 kWh per million
    # (one busy share for all, 0.2 + 2 x 0.9 = 2.0 capped at 1, priced every GPU at 450 W: 1,350 W a replica)
    path = tmp_path / "disagg.yaml"
    path.write_text("name: disagg\nmodel: llama-3.1-8b\nhardware: h100-sxm\n"
                    "deployment:\n  disaggregated: {prefill_replicas: 1, decode_replicas: 2}\n"
                    "workload:\n  arrival: {process: poisson, rate_per_s: 6}\n"
                    "  prompt_tokens: {distribution: fixed, value: 1000}\n"
                    "  output_tokens: {distribution: fixed, value: 250}\n")
    r = resolve(load_scenario(path))
    loads = (PoolLoad("prefill", 1, 0.2, 1.0), PoolLoad("decode", 2, 0.9, 0.0))
    plan = SimpleNamespace(simulation=SimpleNamespace(replicas=2, target_rate_per_s=6.0,
                                                      operating_point=SimpleNamespace(load=loads)),
                           step_times=SimpleNamespace(output_tokens_mean=250.0))
    e = steady_energy(r, plan)
    assert e.pools == loads
    assert e.watts_per_gpu == pytest.approx(1030 / 3)
    assert e.kwh_per_hour == pytest.approx(2.06)
    assert e.kwh_per_million_output_tokens == pytest.approx(2.06 / 5.4)
