"""Scenarios at the resource bounds (sizer/inputs/scenario.py) still give sane answers quickly, and
the replica search's walk does not grow with the target rate."""

import json
import math
from types import SimpleNamespace

from typer.testing import CliRunner

from sizer.cli import app
from sizer.sizing import pipeline

AT_THE_BOUNDS = """\
model: llama-3.1-8b
hardware: h100
cost: {price_usd_per_gpu_hour: 1000000}
workload:
  arrival: {process: gamma, rate_per_s: 1000000, cv: 20}
  prompt_tokens: {distribution: normal, mean: 10485760, std: 10485760}
  output_tokens: {distribution: lognormal, mean: 10485760, sigma: 5}
  shared_prefix: {share: 1, tokens: 10485760, num_prefixes: 1000000, num_tenants: 1000000}
  num_requests: 200
"""


def finite_json(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON")
    return json.loads(text, parse_constant=refuse)


def test_plan_at_every_bound_is_finite_json(tmp_path):
    path = tmp_path / "at-the-bounds.yaml"
    path.write_text(AT_THE_BOUNDS)
    result = CliRunner().invoke(app, ["plan", "--json", str(path)])
    assert result.exit_code == 0, result.output
    finite_json(result.stdout)


def test_simulate_at_every_bound_runs(tmp_path):
    path = tmp_path / "at-the-bounds.yaml"
    path.write_text(AT_THE_BOUNDS)
    result = CliRunner().invoke(app, ["simulate", "--json", "--num-requests", "100", str(path)])
    assert result.exit_code == 0, result.output
    finite_json(result.stdout)


def test_slowest_rate_and_steadiest_gamma_simulate(tmp_path):
    path = tmp_path / "slow.yaml"
    path.write_text(AT_THE_BOUNDS.replace("rate_per_s: 1000000, cv: 20", "rate_per_s: 1.0e-5, cv: 0.05")
                    .replace("10485760", "512"))
    result = CliRunner().invoke(app, ["simulate", "--json", "--num-requests", "50", str(path)])
    assert result.exit_code == 0, result.output
    assert math.isfinite(finite_json(result.stdout)["duration_s"])


class FakePoints:
    """Operating points that meet from `fewest` replicas up; counts the probes."""

    def __init__(self, fewest: int, rate_per_s: float):
        self.fewest, self.rate_per_s, self.probes = fewest, rate_per_s, 0

    def __call__(self, replicas: int):
        self.probes += 1
        return SimpleNamespace(met=replicas >= self.fewest)


def test_fewest_replicas_far_below_the_start_takes_few_probes():
    at = FakePoints(fewest=37, rate_per_s=1e6)       # start: ceil(1e6 / 1.0) = 1,000,000 replicas
    goodput = SimpleNamespace(rate_per_s=1.0)
    assert pipeline._fewest_replicas(at, goodput, pipeline.GoodputSettings()) == 37
    assert at.probes < pipeline.LINEAR_STEPS + 40


def test_fewest_replicas_near_the_start_walks_one_at_a_time():
    at = FakePoints(fewest=7, rate_per_s=10.0)
    goodput = SimpleNamespace(rate_per_s=1.0)          # start: 10; 9, 8, 7 meet, 6 misses
    assert pipeline._fewest_replicas(at, goodput, pipeline.GoodputSettings()) == 7
    assert at.probes == 5
