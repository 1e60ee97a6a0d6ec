"""Request lengths in closed form (sizer/analytic/lengths.py): the chance a length is at most k, and the share of
requests whose prompt + output exceed a limit, as the simulator draws them."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from simulator import Arrivals, WorkloadSpec, generate
from sizer.analytic.lengths import MAX_STEPS, at_most, mean_length, served_means, share_longer_than
from sizer.inputs.scenario import Distribution, scenario_from_dict
from sizer.sizing.workload import _lengths
from validation.errors import FieldError


def test_at_most_follows_each_distribution_as_drawn():
    # uniform 10..19: ten whole lengths equally likely, five of them at most 14
    assert at_most(Distribution("uniform", min=10, max=19))(14) == 0.5
    # empirical 100 (weight 3) and 300 (weight 1): 3/4 of the lengths are at most 299
    empirical = at_most(Distribution("empirical", values=[100, 300], weights=[3, 1]))
    assert (empirical(99), empirical(299), empirical(300)) == (0.0, 0.75, 1.0)
    # a draw rounds to k or less below k + 0.5: normal mean 1000, std 100 is at most 1099 with chance
    # Phi((1099.5 - 1000) / 100) = Phi(0.995) = 0.8401
    assert at_most(Distribution("normal", mean=1000, std=100))(1099) == pytest.approx(NormalDist().cdf(0.995), 1e-12)
    # lognormal mean 1000, sigma 1: its median is 1000 e^(-1/2) = 606.53 tokens, so half are at most 606
    # (606.5 is 0.00005 in log below the median)
    assert at_most(Distribution("lognormal", mean=1000, sigma=1.0))(606) == pytest.approx(0.5, abs=1e-4)
    # clipped at [16, 2000]: nothing shorter than 16, everything at most 2000
    clipped = at_most(Distribution("lognormal", mean=1000, sigma=1.0, min=16, max=2000))
    assert (clipped(15), clipped(2000)) == (0.0, 1.0)


@pytest.mark.parametrize(("prompt", "output", "limit", "share"), [
    # uniform 1..100 + 10 above 100: prompts above 90, 10 of the 100
    (Distribution("uniform", min=1, max=100), Distribution("fixed", value=10), 100, 0.1),
    # uniform 1..100 twice above 100: for prompt p, outputs above 100 - p are p of 100: sum p / 100^2 = 5050 / 10^4
    (Distribution("uniform", min=1, max=100), Distribution("uniform", min=1, max=100), 100, 0.505),
    # a quarter of the prompts are 300 tokens, 300 + 50 > 200; 100 + 50 is not
    (Distribution("empirical", values=[100, 300], weights=[3, 1]), Distribution("fixed", value=50), 200, 0.25),
    # a fixed 1,000 clipped to 500, + 10: every request is 510 tokens
    (Distribution("fixed", value=1000, max=500), Distribution("fixed", value=10), 505, 1.0),
    (Distribution("fixed", value=1000, max=500), Distribution("fixed", value=10), 510, 0.0),
    # normal mean 1000, std 100, + 1 above 1100: prompts of 1100 or more, 1 - Phi((1099.5 - 1000) / 100)
    (Distribution("normal", mean=1000, std=100), Distribution("fixed", value=1), 1100, 1 - NormalDist().cdf(0.995)),
])
def test_share_longer_than_by_hand(prompt, output, limit, share):
    assert share_longer_than(prompt, output, limit) == pytest.approx(share, abs=1e-12)
    assert share_longer_than(output, prompt, limit) == pytest.approx(share, abs=1e-12)     # the sum is symmetric


@pytest.mark.parametrize(("prompt", "output", "limit"), [
    # the shapes a scenario states, against 400,000 requests the simulator draws: within 4 sigma of the draws
    (Distribution("lognormal", mean=1200, sigma=0.8, min=16, max=12000),
     Distribution("lognormal", mean=250, sigma=0.7, min=4, max=2000), 4096),
    (Distribution("normal", mean=1000, std=400, min=50), Distribution("lognormal", mean=300, sigma=1.0), 1500),
    # a span wider than MAX_STEPS lengths: summed in bins
    (Distribution("lognormal", mean=1000, sigma=1.2), Distribution("lognormal", mean=300, sigma=1.0), 3 * MAX_STEPS),
])
def test_share_longer_than_is_what_the_simulator_draws(prompt, output, limit):
    n = 400_000
    w = generate(WorkloadSpec(n, Arrivals("poisson", 1.0), _lengths(prompt), _lengths(output)), 1)
    drawn = float(np.mean(w.prompt_tokens + w.output_tokens > limit))
    share = share_longer_than(prompt, output, limit)
    assert abs(share - drawn) < 4 * math.sqrt(share * (1 - share) / n) + 1e-6, (share, drawn)


@pytest.mark.parametrize(("prompt", "output", "limit", "means"), [
    # a quarter of the prompts (300) are refused beside a 50-token output: the served ones are all 100 tokens
    (Distribution("empirical", values=[100, 300], weights=[3, 1]), Distribution("fixed", value=50), 200, (100, 50)),
    # uniform 1..100 + 10, at most 100: the served prompts are 1..90, mean 45.5
    (Distribution("uniform", min=1, max=100), Distribution("fixed", value=10), 100, (45.5, 10)),
    # uniform 1..100 twice, at most 100: prompt p is served with the 100 - p outputs up to 100 - p, so
    # E[p | served] = sum p (100 - p) / sum (100 - p) = 166,650 / 4,950 = 33.67, and by symmetry the same for outputs
    (Distribution("uniform", min=1, max=100), Distribution("uniform", min=1, max=100), 100, (166650 / 4950,) * 2),
])
def test_served_means_by_hand(prompt, output, limit, means):
    assert served_means(prompt, output, limit) == pytest.approx(means, abs=1e-9)


def test_served_means_are_what_the_simulator_serves():
    # lognormal prompts and outputs, a quarter or so over 1,500 tokens, against 400,000 draws: within 4 standard
    # errors of the served draws' means (the drawn lengths' spread over the root of the served count)
    prompt = Distribution("lognormal", mean=1000, sigma=0.8, min=16)
    output = Distribution("lognormal", mean=300, sigma=1.0, min=1, max=4000)
    w = generate(WorkloadSpec(400_000, Arrivals("poisson", 1.0), _lengths(prompt), _lengths(output)), 1)
    served = w.prompt_tokens + w.output_tokens <= 1500
    for mean, drawn in zip(served_means(prompt, output, 1500), (w.prompt_tokens[served], w.output_tokens[served]),
                           strict=True):
        assert abs(mean - drawn.mean()) < 4 * drawn.std() / math.sqrt(served.sum()), (mean, drawn.mean())


@pytest.mark.parametrize(("d", "mean"), [
    # a fixed 512 clipped at 100: the simulator draws 100, so the plan sizes 100 (it sized 512)
    (Distribution("fixed", value=512, max=100), 100.0),
    # empirical 100 (weight 3) and 300 (weight 1), clipped to [150, 250]: 3/4 at 150, 1/4 at 250
    (Distribution("empirical", values=[100, 300], weights=[3, 1], min=150, max=250), 175.0),
    (Distribution("uniform", min=10, max=20), 15.0),
])
def test_the_plans_mean_length_is_what_the_simulator_draws_for_a_few_lengths(d, mean):
    assert mean_length(d) == mean


@pytest.mark.parametrize(("d", "mean"), [
    # lognormal mean 800, sigma 1.2, clipped to [1, 1000] (the plan sized 800): mu = ln 800 - 1.2^2 / 2 = 5.96461;
    #   at 1000: P(draw >= 999.5) = 1 - Phi((ln 999.5 - mu) / 1.2) = 1 - Phi(0.78554) = 0.21607 -> 216.07 tokens
    #   at 1: P(draw < 1.5) = Phi((ln 1.5 - mu) / 1.2) = Phi(-4.6326) = 1.8e-6 -> 0.000002 tokens
    #   between: 800 x (Phi(0.78554 - 1.2) - Phi(-4.6326 - 1.2)) = 800 x (0.339267 - 0.000000003) = 271.41 tokens
    #   487.48 tokens
    (Distribution("lognormal", mean=800, sigma=1.2, min=1, max=1000), 487.4834),
    # normal mean 3, std 1.5 clipped to [2, 3]: 2 below a draw of 2.5, Phi(-1/3) = 0.369441 of them, else 3:
    # 3 - 0.369441 = 2.630559 (the plan sized 3)
    (Distribution("normal", mean=3, std=1.5, min=2, max=3), 2.630559),
])
def test_the_plans_mean_length_is_the_clipped_one_by_hand(d, mean):
    assert mean_length(d) == pytest.approx(mean, abs=1e-4)


@pytest.mark.parametrize("d", [
    Distribution("lognormal", mean=250, sigma=0.7, min=4, max=2000),      # the chat scenario's outputs
    Distribution("lognormal", mean=300, sigma=1.5),                        # no max: the tail in closed form
    Distribution("normal", mean=100, std=200),                             # half the draws clipped up to 1
])
def test_the_plans_mean_length_is_what_the_simulator_draws(d):
    # against 400,000 draws: within 4 standard errors (rounding inside the clip moves the mean by far less)
    x = _lengths(d).draw(400_000, np.random.default_rng(1))
    assert abs(mean_length(d) - x.mean()) < 4 * x.std() / math.sqrt(len(x)), (mean_length(d), x.mean())


@pytest.mark.parametrize("kind", [{"distribution": "lognormal", "mean": 500, "sigma": 0.5},
                                  {"distribution": "normal", "mean": 500, "std": 50},
                                  {"distribution": "fixed", "value": 500}])
def test_a_clip_whose_min_is_above_its_max_is_refused_for_every_distribution(kind):
    # uniform refused it already; a lognormal's [200, 100] had every request clipped to 100 while the plan sized 500
    data = {"model": "llama-3.1-8b", "hardware": "h100",
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {**kind, "min": 200, "max": 100},
                         "output_tokens": {"distribution": "fixed", "value": 10}}}
    with pytest.raises(FieldError) as caught:
        scenario_from_dict(data, "s.yaml")
    assert caught.value.one_line() == "s.yaml: workload.prompt_tokens.min: expected min <= max, got 200 > 100"
