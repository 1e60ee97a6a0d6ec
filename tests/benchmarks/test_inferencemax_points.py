"""InferenceMAX's published closed-loop points (tests/data/fidelity/inferencemax.csv; README there) replayed as they
ran (benchmarks/published/replay_closed_loop.py): the client's workload as its benchmark_serving.py draws it, and
gpt-oss-120b's decode on an H200, which the default step model prices from vLLM's own tables (docs/fidelity.md,
"Public closed-loop points": TPOT -3.2% median, 4.9% median |error|, over the 51 H200 points)."""

from __future__ import annotations

import pytest

from benchmarks.published.replay_closed_loop import not_replayed, points, predicted, scenario_of
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.workload import workload_of

POINTS = points()


def point(hw: str, tp: str, isl: str, osl: str, conc: str) -> dict:
    return next(r for r in POINTS if (r["hw"], r["framework"], r["tp"], r["isl"], r["osl"], r["conc"])
                == (hw, "vllm", tp, isl, osl, conc))


def test_the_replayed_workload_is_the_clients():
    # --num-prompts 10 x conc, --max-concurrency conc; kimbochen/bench_serving sample_uniform: lengths uniform on the
    # integers [int(0.8 x L), L] (prompts 819-1,024 and outputs 6,553-8,192 at 1024/8192)
    row = point("h200", "1", "1024", "8192", "4")
    s = scenario_from_dict(scenario_of(row), None)
    assert s.workload.arrival.process == "closed" and s.workload.arrival.concurrency == 4
    w = workload_of(s, s.workload.num_requests)
    assert len(w.prompt_tokens) == 40
    assert w.prompt_tokens.min() >= 819 and w.prompt_tokens.max() <= 1024
    assert w.output_tokens.min() >= 6553 and w.output_tokens.max() <= 8192
    d = resolve(s).engine
    assert d.max_num_seqs == 4 and d.max_num_batched_tokens == 8192 and not d.enable_prefix_caching


def test_points_of_engines_whose_scripts_were_not_read_are_named_not_replayed():
    # AMD's ATOM: its server scripts were not read, so how it ran is not replayed
    atom = next(r for r in POINTS if r["framework"] == "atom")
    assert "atom" in not_replayed(atom)
    assert not_replayed(point("h200", "1", "1024", "1024", "4")) is None


@pytest.mark.parametrize(("tp", "conc"), [("1", "4"), ("2", "64"), ("8", "4")])
def test_gpt_oss_decode_on_an_h200_is_within_10_percent(tp, conc):
    # measured mean TPOT (ms): TP 1 at 4 clients 6.42, TP 2 at 64 14.54, TP 8 at 4 3.68 (1024/1024, vLLM 0.13.0)
    row = point("h200", tp, "1024", "1024", conc)
    got, priced_by = predicted(row)
    measured = float(row["mean_tpot_ms"])
    assert "MoE experts" not in priced_by           # the experts from vLLM's H200 tables (triton_kernels W4A16)
    assert abs(got["mean_tpot_ms"] - measured) / measured < 0.10, (got["mean_tpot_ms"], measured)
