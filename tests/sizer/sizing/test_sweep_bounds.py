"""Sweeps under bad input (issue 25): points counted before any work, one GPU named twice simulated once, and a
results file resumed only when it is this sweep's."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from sweephelp import sweep_of, write_sweep

from sizer.inputs.sweep_file import MAX_POINTS, load_sweep, parse_constraint
from sizer.outputs.sweep_store import ResultStore
from sizer.sizing.sweep import SweepRow, run_sweep, tasks
from validation.errors import FieldError


def test_a_product_past_the_bound_is_refused_with_its_count_before_expanding(tmp_path):
    axes = {"rate_per_s": {"start": 1, "stop": 1000, "step": 1}, "ttft_ms": {"start": 1, "stop": 1000, "step": 1},
            "itl_ms": {"start": 1, "stop": 1000, "step": 1}}
    with pytest.raises(FieldError) as caught:
        load_sweep(write_sweep(tmp_path, axes))
    assert caught.value.field == "axes"
    assert caught.value.message == (f"expected at most {MAX_POINTS:,} points, got 1,000,000,000 "
                                    "(rate_per_s 1,000 x ttft_ms 1,000 x itl_ms 1,000)")


@pytest.mark.parametrize("rate", [{"start": 1e-300, "stop": 1e300, "step": 1e-300},
                                  {"start": 1e-300, "stop": 1e300, "factor": 1e200}])
def test_ranges_that_overflow_are_one_line(tmp_path, rate):
    with pytest.raises(FieldError) as caught:
        load_sweep(write_sweep(tmp_path, {"rate_per_s": rate}))
    assert caught.value.field == "axes.rate_per_s"


@pytest.mark.parametrize("axes, extra, field, message", [
    # a range (a mapping) with a bad step: the step named, not "expected a list or a mapping" of a value that is one
    ({"rate_per_s": {"start": 1, "stop": 2, "step": 0}}, {}, "axes.rate_per_s.step", "expected a value > 0, got 0.0"),
    ({"rate_per_s": {"start": 2, "stop": 1, "step": -1}}, {}, "axes.rate_per_s.step",
     "expected a value > 0, got -1.0"),
    # a list with a bad item: the item named
    ({"ttft_ms": ["fast"]}, {}, "axes.ttft_ms[0]", "expected a finite number, got 'fast'"),
    # a bound a count or a price never reaches: out of range, not a format error
    ({"rate_per_s": [1]}, {"constraints": ["gpus <= -1"]}, "constraints[0]",
     "expected a bound >= 0 (gpus is never negative), got 'gpus <= -1'"),
    # the base scenario not found: named as the `scenario` field, with what was written
    ({"rate_per_s": [1]}, {"scenario": 5}, "scenario",
     "expected a scenario YAML file (a path from the sweep file's folder), got '5': {tmp}/5 not found"),
])
def test_a_bad_value_is_named_for_what_is_wrong_with_it(tmp_path, axes, extra, field, message):
    path = write_sweep(tmp_path, axes)
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, **extra}))
    with pytest.raises(FieldError) as caught:
        load_sweep(path)
    assert (caught.value.file, caught.value.field) == (str(path), field)
    assert caught.value.message == message.format(tmp=tmp_path)


def test_a_small_bound_written_with_an_exponent_is_read():
    # 1e-3 has a minus sign inside: read as 0.001 (the pattern once refused it as not QUANTITY OP NUMBER)
    assert parse_constraint("usd_per_hour >= 1e-3", "s.yaml", "constraints[0]").bound == 0.001


def test_one_gpu_under_two_names_is_one_point(tmp_path):
    sweep = sweep_of(write_sweep(tmp_path, {"gpu": ["h100", "h100-sxm"], "rate_per_s": [1, 2]}))
    assert len(sweep.points) == 2 and {p.gpu for p in sweep.points} == {"h100-sxm"}


def test_resuming_into_another_sweeps_file_is_refused_before_any_work(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = sweep_of(write_sweep(tmp_path / "a", {"rate_per_s": [1]}))
    store = ResultStore(tmp_path / "r.parquet", "--results")
    blank = {f.name: None for f in dataclasses.fields(SweepRow)}
    store.add(SweepRow(**{**blank, "point_hash": tasks(first)[0].point_hash, "seed": 1, "status": "invalid",
                          "binding": "input", "reason": "", "scenario": "s"}))
    store.close()
    other = sweep_of(write_sweep(tmp_path / "b", {"rate_per_s": [3]}))
    calls = []
    with pytest.raises(FieldError) as caught:
        run_sweep(other, ResultStore(tmp_path / "r.parquet", "--results").done(), calls.append, "local", 1)
    assert caught.value.field == "--results" and "1 point not in sweep" in caught.value.message and not calls
    # the same sweep resumes: its own point is done, nothing is refused
    summary = run_sweep(first, ResultStore(tmp_path / "r.parquet", "--results").done(), calls.append, "local", 1)
    assert summary.already_done == 1 and not calls


def test_a_point_the_simulator_refuses_is_an_invalid_row_not_a_retried_failure(tmp_path):
    # 10,000 data-parallel replicas of Llama-3.1-8B on H100s hold ~277 million KV blocks, past the simulator's bound
    # (its own refusal, raised while sizing): the same on every try, so the point is written invalid, once
    sweep = sweep_of(write_sweep(tmp_path, {"data_parallel_size": [10000]}))
    rows = []
    summary = run_sweep(sweep, set(), rows.append, "local", 1)
    assert summary.failed == ()
    assert [(r.status, r.binding) for r in rows] == [("invalid", "input")]
    assert "KV blocks" in rows[0].reason
