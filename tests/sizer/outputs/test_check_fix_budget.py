"""`sizer check`'s replica fix is the sizing pipeline's own answer, explained by the simulation that decided
it (not by the short goodput probes), and a stated budget is honoured: a fix over it says so (issue 27)."""

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.outputs.check import check_file

# The fix tests check the same manifest under two budgets: its simulations run once for the module
# (module_simulations_once, tests/sizer/conftest.py: the same inputs give the same bits).
pytestmark = pytest.mark.usefixtures("module_simulations_once")

LATENCY = "scenarios/deploy/fail-latency-llama-70b-h100.yaml"   # 12 req/s, TTFT 500 ms, one TP4 H100 replica, $40/hour
PASS = Path(__file__).resolve().parents[3] / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"   # budget $10/hour


def test_the_slo_fix_is_the_pipelines_count_and_says_when_it_is_over_the_budget():
    result = check_file(LATENCY)
    sizing = result.sizing
    [slo] = [rule for rule in result.rules if rule.name == "slo"]
    [fix] = slo.fixes
    needed = sizing.replicas_for_slo
    assert slo.status == "fail" and needed > 1
    # the fix is the verdict's count, and the figures beside it are that count's operating point:
    # 12 req/s over `needed` replicas, at which the pipeline's simulation met the 95% share
    assert fix.startswith(f"{needed} replicas (+{needed - 1}, +{4 * (needed - 1)} GPUs, ")
    assert f"at 12 / {needed} = {12 / needed:.3g} req/s per replica" in fix
    assert sizing.share_met_for_slo >= 0.95 and f"{sizing.share_met_for_slo:.1%} of requests meet" in fix
    # no second estimate beside it (the short probes' goodput put the count elsewhere)
    assert "meets the SLO up to" not in fix
    # $40/hour buys floor(40 / (4 GPUs x $3.99)) = 2 replicas, fewer than the SLO needs
    cost = needed * 4 * 3.99
    assert cost > 40 and f"${cost:,.2f}/hour" in fix
    assert "over the $40.00/hour budget, which pays for 2 replicas: no replica count meets the SLO within the budget" \
        in fix


def test_a_fix_within_the_budget_has_no_budget_words():
    # the same manifest with a $1,000/hour budget: the SLO fix fits it
    result = check_file(LATENCY, budget_usd_per_hour=1000.0)
    [slo] = [rule for rule in result.rules if rule.name == "slo"]
    assert "budget" not in slo.fixes[0]


def test_a_memory_fix_that_adds_gpus_past_the_budget_says_so():
    # 70B in bf16 on TP2 H100s with a $12/hour budget: TP4 is 1 replica x 4 GPUs x $3.99 = $15.96/hour
    result = check_file("scenarios/deploy/fail-memory-llama-70b-h100.yaml")
    [memory] = [rule for rule in result.rules if rule.name == "memory"]
    assert "more GPUs: --tensor-parallel-size 4 (+2 GPUs per replica); $15.96/hour, over the $12.00/hour budget" \
        in memory.fixes
    # the fixes that keep the GPU count carry no budget words
    assert not any("budget" in fix for fix in memory.fixes if "more GPUs" not in fix)


def test_a_deployment_missing_only_the_itl_target_is_short_of_token_gaps(tmp_path):
    # the 70B H200 scenario on 3 stated replicas (3.33 req/s each): every request meets TTFT 2 s, but fewer than 95%
    # of the token gaps are within the 60 ms ITL target (4 replicas are the fewest that meet it)
    data = yaml.safe_load(open("scenarios/llama-3.1-70b-h200.yaml"))
    data["deployment"]["replicas"] = 3
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(data))
    result = check_file(str(path))
    [slo] = [rule for rule in result.rules if rule.name == "slo"]
    point = result.sizing.operating_point
    assert slo.status == "fail" and point.share_met >= 0.95 and point.metrics.itl_share < 0.95
    assert f"short by {0.95 - point.metrics.itl_share:.1%} of token gaps (binding: ITL)" in slo.message
    assert slo.fixes[0].startswith("4 replicas (+1, +4 GPUs")


@pytest.mark.parametrize("value, got", [("inf", "inf"), ("0", "0.0"), ("-1", "-1.0"), ("nan", "nan"),
                                        ("1e400", "inf")])
def test_the_budget_flag_takes_what_the_block_takes(value, got):
    # audit: `--budget inf` and `--budget 0` were accepted (Typer's min=0) while the block's budget_usd_per_hour: 0
    # is refused ("expected a number > 0"): the flag is now held to the block field's declaration (SizerBlock,
    # gt=0, finite: sizer/cli/check.py as_block)
    result = CliRunner().invoke(app, ["check", str(PASS), "--budget", value])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --budget: expected a number > 0, got {got}"


def test_the_block_refuses_the_same_budget(tmp_path):
    # the rule the flag now follows: the `sizer:` block's own budget of 0, refused naming the block's field
    text = PASS.read_text().replace("budget_usd_per_hour: 10", "budget_usd_per_hour: 0")
    assert "budget_usd_per_hour: 0" in text
    (tmp_path / "deploy.yaml").write_text(text)
    result = CliRunner().invoke(app, ["check", str(tmp_path / "deploy.yaml")])
    assert result.exit_code == 2 and "sizer.budget_usd_per_hour: expected a value > 0, got 0.0" in result.stderr
