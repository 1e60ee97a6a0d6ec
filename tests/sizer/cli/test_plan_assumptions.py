"""Every workload and SLO value a plan uses is among its assumptions, with where it came from (a flag, the
scenario, a default), in the terminal and in --json; --simulate's verdict names the targets (issue 27)."""

import json

from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.plan import FLAGS_ONLY_WORKLOAD
from sizer.inputs.scenario import SLOSection, targets_text
from sizer.words import significant

runner = CliRunner()


def assumptions(*argv: str) -> list[str]:
    result = runner.invoke(app, ["plan", *argv, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["assumptions"]


def test_a_plan_from_flags_alone_states_the_workload_it_assumed():
    got = assumptions("--model", "llama-3.1-8b", "--gpu", "h100")
    # FLAGS_ONLY_WORKLOAD: 1 req/s of 1,024 prompt and 256 output tokens, none of it stated by the user
    assert FLAGS_ONLY_WORKLOAD["workload"]["arrival"]["rate_per_s"] == 1.0
    assert "workload: 1 req/s (default: no scenario file), poisson arrivals (default)" in got
    assert ("workload: prompt 1,024 tokens, fixed (default: no scenario file), output 256 tokens, fixed "
            "(default: no scenario file)") in got
    assert any(line.startswith("SLO: no targets stated") for line in got)
    # workload.num_requests' default (sizer/inputs/scenario.py WorkloadSection)
    assert "simulated requests (--simulate): 2,000 (default)" in got


def test_flags_are_named_as_the_source_of_what_they_set():
    got = assumptions("--model", "llama-3.1-8b", "--gpu", "h100", "--rate", "4", "--prompt-tokens", "2k",
                      "--output-tokens", "100", "--ttft-ms", "500")
    assert "workload: 4 req/s (--rate), poisson arrivals (default)" in got
    # "2k" is 2,000 tokens (a manifest's number syntax, sizer/inputs/number_text.py parse_number)
    assert "workload: prompt 2,000 tokens, fixed (--prompt-tokens), output 100 tokens, fixed (--output-tokens)" in got
    # slo.required_share's default is 0.95 (SLOSection)
    assert "SLO: TTFT <= 500 ms (--ttft-ms); 95% of requests (default)" in got


def test_a_scenario_file_is_the_source_of_its_own_values():
    got = assumptions("scenarios/llama-3.1-70b-h200.yaml", "--rate", "4")
    # the scenario: lognormal prompts of mean 3,000 and outputs of mean 300; TTFT 2 s and ITL 60 ms targets. The
    # prompts' clip to [64, 24,000] takes their mean as drawn to 2,998 (sizer/analytic/lengths.py mean_length); the
    # outputs' stays 300 to the token
    assert "workload: 4 req/s (--rate), poisson arrivals (scenario)" in got
    assert ("workload: prompt lognormal lengths, mean 2,998 tokens (3,000 before the clip) (scenario), output "
            "lognormal lengths, mean 300 tokens (scenario)") in got
    assert "SLO: TTFT <= 2,000 ms (scenario), ITL <= 60 ms (scenario); 95% of requests (scenario)" in got


def test_the_terminal_plan_prints_the_same_assumptions():
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100"], env={"COLUMNS": "200"})
    assert "workload: 1 req/s (default: no scenario file), poisson arrivals (default)" in result.stdout


def test_the_simulated_verdict_names_its_targets():
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--rate", "2", "--prompt-tokens",
                                 "1k", "--output-tokens", "100", "--ttft-ms", "1000", "--simulate", "--json"])
    verdict = json.loads(result.stdout)["simulation"]["verdict"]
    # an 8B model on an H100 at 2 req/s of 1,000-token prompts answers the first token in tens of ms: met
    assert verdict.startswith("SLO met: ")
    assert "of requests meet every target (TTFT <= 1,000 ms; 95% of requests required) at 2 req/s" in verdict


def test_one_token_replies_print_no_itl_rather_than_nan():
    # a reply of one token has no gap between tokens and no time per output token: "-", not "nan" or "0.0"
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--rate", "4", "--prompt-tokens",
                                 "4k", "--output-tokens", "1", "--ttft-ms", "1000", "--simulate"],
                           env={"COLUMNS": "120"})
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") == 5}
    assert rows["ITL"].split("│")[2:5] == rows["TPOT"].split("│")[2:5]
    assert [cell.strip() for cell in rows["ITL"].split("│")[2:5]] == ["-", "-", "-"]
    assert "nan" not in result.stdout


def test_one_wording_of_the_targets_for_plan_check_report_and_sweep():
    # targets_text is the one place the target list is worded (plan's verdict and assumptions, check's SLO rule,
    # the report's question, a sweep report's group label); SLO_TARGETS' order, whatever the order stated
    slo = SLOSection(e2e_ms=12_500, tpot_ms=40, ttft_ms=2_000)
    assert targets_text(slo) == "TTFT <= 2000 ms, TPOT <= 40 ms, E2E <= 12500 ms"                 # check, report
    # plan: 4 significant digits, but every digit of a whole part longer than that (was "1.25e+04")
    assert targets_text(slo, significant) == "TTFT <= 2,000 ms, TPOT <= 40 ms, E2E <= 12,500 ms"
    assert targets_text(slo, relation=" ") == "TTFT 2000 ms, TPOT 40 ms, E2E 12500 ms"           # a sweep's label
    assert targets_text(SLOSection(itl_ms=50), source=lambda path: f"from {path}") == "ITL <= 50 ms (from slo.itl_ms)"
    assert targets_text(SLOSection()) == ""


def test_significant_digits_never_in_exponent_form():
    # four significant digits (33.333... -> 33.33, 0.12345 -> 0.1235 rounding its binary value, a little above the
    # half), the whole part kept in full past four digits (1,234,567.8 -> 1,234,568), thousands grouped, trailing
    # zeros dropped (2.0 -> 2), negatives alike, and tiny targets without an exponent (5e-05 before)
    assert [significant(v) for v in (33.3333, 0.12345, 2_000, 12_500, 1_234_567.8, -98_765.4, 2.0, 0.00005, 0)] == [
        "33.33", "0.1235", "2,000", "12,500", "1,234,568", "-98,765", "2", "0.00005", "0"]


def test_a_stated_price_is_the_scenarios_gpus_only(tmp_path):
    # the chat scenario on H100s states $2.50 a GPU-hour; `plan --gpu h200` prices the H200 at its profile's $4.50
    # (hardware_profiles/h200.yaml, the median of listed prices), as search and sweep do, and says which price it
    # used and why; --gpu h100 (an alias of the scenario's h100-sxm) keeps the stated price
    scenario = tmp_path / "chat-priced.yaml"
    scenario.write_text(open("scenarios/llama-3.1-8b-chat-h100.yaml").read()
                        + "cost: {price_usd_per_gpu_hour: 2.5}\n")
    other = json.loads(runner.invoke(app, ["plan", str(scenario), "--gpu", "h200", "--json"]).stdout)
    assert other["cost"]["price_usd_per_gpu_hour"] == 4.5 and other["cost"]["usd_per_hour"] == 4.5
    why = "hardware profile h200 (median of listed prices); not the scenario's $2.5, stated for its h100-sxm"
    assert other["cost"]["price_source"] == why and f"price: {why}" in other["assumptions"]
    same = json.loads(runner.invoke(app, ["plan", str(scenario), "--gpu", "h100", "--json"]).stdout)
    assert (same["cost"]["price_usd_per_gpu_hour"], same["cost"]["price_source"]) == (2.5, "scenario")


def test_the_cost_line_shows_every_digit_of_its_price(tmp_path):
    # $0.125 a GPU-hour on 2 GPUs (TP 2) is $0.25 an hour: the line shows the price it multiplied, not $0.12
    # (to the cent it read "2 GPUs at $0.12/GPU-hour = $0.25/hour"); a price in cents keeps two decimals
    from sizer.words import dollars
    assert (dollars(0.125), dollars(2.5), dollars(3.99), dollars(1234.5), dollars(1 / 3)) == \
        ("0.125", "2.50", "3.99", "1,234.50", "0.333333")
    scenario = tmp_path / "chat-cheap.yaml"
    scenario.write_text(open("scenarios/llama-3.1-8b-chat-h100.yaml").read()
                        + "cost: {price_usd_per_gpu_hour: 0.125}\n")
    out = runner.invoke(app, ["plan", str(scenario), "--tp", "2"], env={"COLUMNS": "200"}).stdout
    assert "Cost: 1 replica x 2 GPUs = 2 GPUs at $0.125/GPU-hour (scenario) = $0.25/hour;" in out
