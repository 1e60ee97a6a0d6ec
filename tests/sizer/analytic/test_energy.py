"""Energy per GPU by state (sizer.analytic.energy), figures derived by hand from the profiles' numbers."""

from __future__ import annotations

import pytest

from sizer.analytic.energy import kwh, mean_power_w, per_million, power_by_state, ridge_tokens
from sizer.inputs.hardware import all_profiles


def test_energy_per_million_tokens_by_hand():
    # hardware_profiles/h100-sxm.yaml power: idle 80 W, decode-bound 450 W, prefill-bound 700 W.
    p = power_by_state(all_profiles()["h100-sxm"])
    assert (p.idle_w, p.decode_w, p.prefill_w) == (80.0, 450.0, 700.0) and "[SPLITWISE]" in p.source
    # busy 60% of the time, a quarter of that compute-bound:
    #   running = 700 x 0.25 + 450 x 0.75 = 512.5 W; mean = 80 x 0.4 + 512.5 x 0.6 = 32 + 307.5 = 339.5 W
    watts = mean_power_w(p, 0.6, 0.25)
    assert watts == pytest.approx(339.5)
    # 3 GPUs for a day at PUE 1.2: 1,018.5 W x 86,400 s = 87,998,400 J, x 1.2 = 105,598,080 J / 3.6e6 J/kWh
    # = 29.3328 kWh
    day = kwh(watts * 3, 86_400, 1.2)
    assert day == pytest.approx(29.3328)
    # serving 500 million output tokens: 29.3328 / 500 = 0.0586656 kWh per million; at 370 gCO2e/kWh,
    # 10,853.136 g / 500 = 21.706272 g per million
    assert per_million(day, 500e6) == pytest.approx(0.0586656)
    assert per_million(day * 370, 500e6) == pytest.approx(21.706272)
    assert per_million(day, 0) is None


def test_a_profile_with_only_its_tdp_takes_the_h100_shares_and_says_so():
    # a100-80gb: 400 W TDP, no power section: idle 400 x 80/700 = 45.71 W, decode 400 x 450/700 = 257.14 W
    p = power_by_state(all_profiles()["a100-80gb"])
    assert p.prefill_w == 400.0
    assert p.idle_w == pytest.approx(45.714, abs=1e-3) and p.decode_w == pytest.approx(257.143, abs=1e-3)
    assert p.source.startswith("assumption")


def test_the_ridge_between_decode_bound_and_prefill_bound_steps():
    # H100 SXM: 989.4e12 bf16 FLOP/s / 3.35e12 B/s = 295.3 tokens a step
    assert ridge_tokens(all_profiles()["h100-sxm"]) == pytest.approx(295.34, abs=0.01)
