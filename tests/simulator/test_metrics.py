import numpy as np
import pytest
from simhelp import LinearStepModel, sim_config

from simulator.metrics import SLO, slo_attainment, summarise, weighted_percentiles
from simulator.run import simulate
from simulator.workload import Arrivals, Lengths, WorkloadSpec


def test_weighted_percentiles_use_the_inverted_cdf():
    v, w = np.array([30.0, 10.0, 20.0]), np.array([1.0, 6.0, 3.0])
    # sorted: 10 (60% of weight), 20 (to 90%), 30 (to 100%)
    assert weighted_percentiles(v, w, (50.0, 60.0, 61.0, 90.0, 95.0)) == [10.0, 10.0, 20.0, 20.0, 30.0]
    assert np.isnan(weighted_percentiles(v, np.zeros(3), (50.0,))[0])


def test_summary_and_slo_share_on_a_known_run():
    # requests 0.2 s apart arrive at an idle replica: ttft = a + b x 200 = 15 ms each;
    # 20 decode steps of ~5.07 ms: e2e = 15 + 20 x ~5.07 = ~116 ms
    model = LinearStepModel(base_s=5e-3, per_token_s=5e-5, per_context_s=1e-7)
    w = WorkloadSpec(20, Arrivals("constant", 5.0), Lengths("fixed", 200), Lengths("fixed", 21))
    r = simulate(sim_config(), model, w, seed=0)
    s = summarise(r, SLO(ttft_ms=16.0, tpot_ms=5.0, percentile=99.0, required_share=0.9))
    assert s.ttft.p50_ms == pytest.approx(15.0) and s.ttft.p99_ms == pytest.approx(15.0)
    assert s.num_finished == 20 and s.num_rejected == 0
    # every TPOT is ~5.07 ms > 5.0: nobody meets the ITL target, so no goodput
    assert s.slo_share == 0.0 and s.slo_met is False and s.goodput_requests_per_s == 0.0
    ok = summarise(r, SLO(ttft_ms=16.0, tpot_ms=5.2, percentile=99.0, required_share=0.95))
    assert ok.slo_share == 1.0 and ok.slo_met and ok.slo_percentiles_met
    # throughput: 20 x 21 tokens over first arrival (0.2 s) to last finish (4.0 s + e2e)
    duration = r.columns["finished_s"].max() - 0.2
    assert s.output_tokens_per_s == pytest.approx(20 * 21 / duration)
    assert s.mean_batch_size == pytest.approx(1.0)


def test_rejected_requests_miss_the_slo():
    model = LinearStepModel()
    w = WorkloadSpec(10, Arrivals("constant", 1.0), Lengths("empirical", values_tokens=(100, 9000)),
                     Lengths("fixed", 5))
    r = simulate(sim_config(num_blocks=100), model, w, seed=1)    # 9000 tokens need > 100 blocks
    met = slo_attainment(r, SLO(e2e_ms=1e9, percentile=99.0, required_share=0.95))
    assert np.array_equal(met, ~r.columns["rejected"]) and r.columns["rejected"].any()
