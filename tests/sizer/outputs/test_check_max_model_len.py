"""`sizer check`'s max_model_len rule and the workload's lengths: the engine refuses a request whose prompt + output
exceed max_model_len (vLLM answers HTTP 400), so the rule fails when some of the stated workload's requests do, and
offers the context that holds the longest."""

from __future__ import annotations

from pathlib import Path

from sizer.inputs.manifest import read_check_input
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.check import max_model_len_rule
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import ContextLimit, resolve

# Llama-3.1-8B's context: its config's max_position_embeddings, 131,072
LLAMA_CONTEXT = ContextLimit(131_072, "max_position_embeddings")

PASS = Path(__file__).resolve().parents[3] / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"


def rule_at(tmp_path: Path, max_model_len: int):
    path = tmp_path / "deploy.yaml"
    path.write_text(PASS.read_text().replace("--max-model-len=8192", f"--max-model-len={max_model_len}"))
    inp = read_check_input(str(path))
    r = resolve(scenario_from_dict(inp.scenario_data, inp.file))
    return max_model_len_rule(inp, make_plan(r), max_model_len, LLAMA_CONTEXT, r.too_long_share)


def test_requests_longer_than_max_model_len_fail_the_rule(tmp_path):
    # lognormal prompts (mean 1,200, sigma 0.8, 16..6,000) + outputs (mean 250, sigma 0.7, 4..2,000) above 2,048
    # tokens: 18.78% of requests (a million of the simulator's draws: 18.75%); the longest, 6,000 + 2,000 = 8,000
    # tokens, fits a context of 8,000
    rule = rule_at(tmp_path, 2048)
    assert rule.status == "fail"
    assert rule.message == ("18.78% of the workload's requests have prompt + output above max_model_len 2,048: the "
                            "engine refuses them (vLLM answers HTTP 400)")
    assert rule.fixes == ("--max-model-len 8000 (from 2,048; the workload's longest request fits)",)


def test_a_context_for_the_longest_request_passes(tmp_path):
    # 8,192 >= 8,000: no request is refused, and the KV share decides (0.25 x 128 sequences = 32 of the 54 held)
    assert rule_at(tmp_path, 8192).status == "pass"
