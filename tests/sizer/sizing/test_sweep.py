"""`sizer sweep`: the sweep file, expansion, point hashes and seeds, pruning, the local backend's
retries and resuming from the Parquet file. The Ray backend: test_sweep_ray.py."""

from __future__ import annotations

import functools
import os
from importlib.util import find_spec
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from sweephelp import BASE, sweep_of, write_sweep
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.sweep_file import load_sweep
from sizer.outputs.sweep_store import ResultStore, read_rows, schema
from sizer.sizing.sweep import Point, build_sweep, evaluate_point, point_hash, prune, run_sweep, tasks
from validation.errors import FieldError

runner = CliRunner()


def test_axes_expand_to_their_product_with_ranges(tmp_path):
    sweep = sweep_of(write_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"], "tensor_parallel_size": [1, 2],
                                            "rate_per_s": {"start": 2, "stop": 10, "factor": 2},
                                            "max_num_seqs": {"start": 64, "stop": 256, "step": 64}}))
    # 2 GPUs x 2 TP x {2, 4, 8} (16 > 10 stops the geometric range) x {64, 128, 192, 256} = 48 points
    assert len(sweep.points) == 48
    assert sorted({p.rate_per_s for p in sweep.points}) == [2, 4, 8]
    assert sorted({p.max_num_seqs for p in sweep.points}) == [64, 128, 192, 256]


@pytest.mark.parametrize("axes, extra, field", [
    ({"gpus": ["h100-sxm"]}, {}, "axes.gpus"),                                            # unknown axis
    ({"gpu": []}, {}, "axes.gpu"),                                                        # empty list
    ({"gpu": ["h100-sxm", "no-such-gpu"]}, {}, "axes.gpu[1]"),                            # unknown value
    ({"max_num_seqs": {"start": 64, "stop": 32, "step": 8}}, {}, "axes.max_num_seqs.stop"),   # bad range
    ({"max_num_seqs": {"start": 64, "stop": 128, "step": 8, "factor": 2}}, {}, "axes.max_num_seqs"),
    ({"tensor_parallel_size": {"start": 1, "stop": 4, "factor": 1.5}}, {}, "axes.tensor_parallel_size"),
    ({"speculative": [True, False]}, {}, "axes.speculative"),       # the base has no speculative_config
    ({"gpu": ["h100-sxm"]}, {"constraints": ["gpus_per_replica =< 8"]}, "constraints[0]"),
    ({"gpu": ["h100-sxm"]}, {"constraints": ["watts <= 8"]}, "constraints[0]"),
    # constraints no point meets: alone (a replica has a GPU), together, or with no whole number between them
    ({"gpu": ["h100-sxm"]}, {"constraints": ["gpus_per_replica < 1"]}, "constraints[0]"),
    ({"gpu": ["h100-sxm"]}, {"constraints": ["gpus <= 4", "usd_per_hour <= 9", "gpus > 4"]}, "constraints[2]"),
    ({"gpu": ["h100-sxm"]}, {"constraints": ["replicas > 2", "replicas < 3"]}, "constraints[1]"),
    ({"gpu": ["h100-sxm"]}, {"constraints": ["usd_per_hour >= 5", "usd_per_hour < 5"]}, "constraints[1]"),
    # through gpus = gpus_per_replica x replicas: at most 4 x 1 = 4 GPUs, or at least 4 beside at most 2
    ({"gpu": ["h100-sxm"]}, {"constraints": ["gpus >= 8", "gpus_per_replica <= 4", "replicas <= 1"]},
     "constraints[2]"),
    ({"gpu": ["h100-sxm"]}, {"constraints": ["gpus < 3", "gpus_per_replica >= 4"]}, "constraints[1]"),
])
def test_bad_sweep_files_are_one_line_naming_file_and_field(tmp_path, axes, extra, field):
    path = write_sweep(tmp_path, axes, **extra)
    result = runner.invoke(app, ["sweep", str(path), "--results", str(tmp_path / "r.parquet")])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and str(path) in result.stderr and field in result.stderr, result.stderr


def test_constraints_that_leave_a_point_are_accepted(tmp_path):
    # 2 is the whole number in (1.5, 2.5); a price bound equal from both sides holds at that price
    # 2 x 4 = 8 GPUs meets gpus >= 8 beside gpus_per_replica <= 4 and replicas <= 2
    path = write_sweep(tmp_path, {"gpu": ["h100-sxm"]},
                       constraints=["replicas > 1.5", "replicas < 2.5", "usd_per_hour >= 5", "usd_per_hour <= 5",
                                    "gpus >= 8", "gpus_per_replica <= 4"])
    assert len(load_sweep(path).constraints) == 6


def test_a_tpot_axis_sets_slo_tpot_ms_and_its_column(tmp_path):
    # review leftover: the SLO has separate itl_ms and tpot_ms targets, and the axes lacked tpot_ms ("axes.tpot_ms"
    # was an unknown axis). 8B bf16 on an H100 streams 16.06 GB of weights in 16.06e9 / 3.35e12 = 4.79 ms a step: a
    # 2 ms TPOT target is pruned on TPOT before any simulation; 80 ms is not, and each row states its TPOT target
    sweep = sweep_of(write_sweep(tmp_path, {"tpot_ms": [2, 80]}))
    assert sorted(p.tpot_ms for p in sweep.points) == [2, 80]
    rows = {t.point.tpot_ms: prune(sweep, t) for t in tasks(sweep)}
    assert rows[2].binding == "TPOT" and "TPOT target 2 ms below the 4.79 ms" in rows[2].reason
    assert rows[2].tpot_target_ms == 2 and rows[80] is None


def test_a_results_file_from_before_the_tpot_column_still_reads(tmp_path):
    # files written before SweepRow had tpot_target_ms (LATER_COLUMNS): their rows read with no TPOT target
    path = tmp_path / "old.parquet"
    pq.write_table(schema().empty_table().drop_columns(["tpot_target_ms"]), path)
    assert "tpot_target_ms" in read_rows(path, "--results").column_names


def test_point_hash_depends_on_the_configuration_not_order_and_every_point_takes_the_base_seed(tmp_path):
    a = sweep_of(write_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"], "rate_per_s": [2, 4]}))
    b = sweep_of(write_sweep(tmp_path, {"rate_per_s": [4, 2], "gpu": ["h200", "h100-sxm"]}))
    assert {t.point_hash for t in tasks(a)} == {t.point_hash for t in tasks(b)}
    assert len({t.point_hash for t in tasks(a)}) == 4
    # the base scenario's own GPU and rate restated hash as the base itself
    assert point_hash(a, Point(gpu="h100-sxm", rate_per_s=6)) == point_hash(a, Point())
    # review finding: each point's seed came from its hash, which holds the constraints, so a constraint no point
    # came near changed an L40S point from 12 replicas to 11 (where `plan --simulate` needs 12), and a looser TTFT
    # target needed more replicas than a tighter one; every point now draws the base scenario's workload, as
    # `plan --simulate` does (the scenario's seed, 0 unless stated)
    assert {t.seed for t in tasks(a)} == {0}
    path = write_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"]})
    base = yaml.safe_load((tmp_path / "base.yaml").read_text())
    base["workload"]["seed"] = 11
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    assert {t.seed for t in tasks(sweep_of(path))} == {11}


def test_pruning_by_memory_slo_floor_and_constraints(tmp_path):
    sweep = sweep_of(write_sweep(tmp_path, {"model": ["llama-3.1-8b", "llama-3.1-70b"], "gpu": ["l40s", "h100-sxm"],
                                            "ttft_ms": [4, 500]},
                                 constraints=["gpus_per_replica <= 1", "usd_per_hour <= 1"]))
    rows = {(t.point.model, t.point.gpu, t.point.ttft_ms): prune(sweep, t) for t in tasks(sweep)}
    # 70B in bf16 is 141 GB of weights: more than one 48 GB L40S or 80 GB H100 holds
    assert rows["llama-3.1-70b", "h100-sxm", 500].binding == "memory"
    # 8B bf16 on an H100: 16.06 GB of weights / 3.35 TB/s = 4.79 ms a step, above a 4 ms TTFT target
    assert rows["llama-3.1-8b", "h100-sxm", 4].binding == "TTFT"
    # 6 req/s needs at least one replica at $/GPU-hour of the profile (above $1): over the budget
    assert rows["llama-3.1-8b", "h100-sxm", 500].binding == "constraint"
    assert "usd_per_hour <= 1" in rows["llama-3.1-8b", "h100-sxm", 500].reason


def counting(evaluate_calls: Path, sweep, task):
    with open(evaluate_calls / task.point_hash, "a") as f:
        f.write("x")
    return evaluate_point(sweep, task)


def dies_once(marker: Path, how: str, sweep, task):
    """The first point to get here kills its worker process (or raises), once."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return evaluate_point(sweep, task)
    os.close(fd)
    if how == "exit":
        os._exit(1)
    raise RuntimeError("injected failure")


SMALL = {"gpu": ["h100-sxm", "h200"], "ttft_ms": [300, 500]}     # 4 points


def test_a_rerun_simulates_nothing(tmp_path):
    sweep = sweep_of(write_sweep(tmp_path, SMALL))
    calls = tmp_path / "calls"
    calls.mkdir()
    store = ResultStore(tmp_path / "r.parquet")
    first = run_sweep(sweep, store.done(), store.add, "local", 2,
                      evaluate=functools.partial(counting, calls))
    assert store.close() == 4 and first.simulated == 4
    again = ResultStore(tmp_path / "r.parquet")
    second = run_sweep(sweep, again.done(), again.add, "local", 2, evaluate=functools.partial(counting, calls))
    assert again.close() == 4
    assert (second.already_done, second.simulated, sum(second.pruned.values())) == (4, 0, 0)
    assert sorted(p.read_text() for p in calls.iterdir()) == ["x"] * 4          # each point evaluated once in all


@pytest.mark.parametrize("how", ["exit", "raise"])
def test_a_dead_worker_costs_only_its_point(tmp_path, how):
    sweep = sweep_of(write_sweep(tmp_path, SMALL))
    store = ResultStore(tmp_path / "r.parquet")
    workers = 2 if how == "exit" else 1            # a raise is retried in this process too
    summary = run_sweep(sweep, set(), store.add, "local", workers,
                        evaluate=functools.partial(dies_once, tmp_path / "died", how))
    store.close()
    assert (tmp_path / "died").exists() and summary.failed == ()
    hashes = pq.read_table(tmp_path / "r.parquet").column("point_hash").to_pylist()
    assert sorted(hashes) == sorted(t.point_hash for t in tasks(sweep))          # every point exactly once


def test_a_point_failing_every_try_is_reported_not_written(tmp_path):
    sweep = sweep_of(write_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"]}, settings={"max_retries": 1}))
    store = ResultStore(tmp_path / "r.parquet")
    summary = run_sweep(sweep, set(), store.add, "local", 2, evaluate=always_raises)
    assert store.close() == 0
    assert len(summary.failed) == 2 and "2 tries" in summary.failed[0][1]


def always_raises(sweep, task):
    raise RuntimeError("broken point")


def test_unknown_backend_and_address_without_ray_are_flag_errors(tmp_path):
    path = write_sweep(tmp_path, SMALL)
    for flags, flag in ((["--backend", "spark"], "--backend"), (["--address", "auto"], "--address")):
        result = runner.invoke(app, ["sweep", str(path), *flags])
        assert result.exit_code == 2 and flag in result.stderr, result.output


def test_ray_missing_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "ray" else find_spec(name, *a))
    result = runner.invoke(app, ["sweep", str(write_sweep(tmp_path, SMALL)), "--backend", "ray"])
    assert result.exit_code == 2 and "pip install 'sizer[ray]'" in result.stderr and "--backend" in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_input_errors_are_not_raised_by_points(tmp_path):
    # TP 3 does not divide the 32 query heads: an invalid row, not an exception
    sweep = sweep_of(write_sweep(tmp_path, {"tensor_parallel_size": [3]}))
    row = evaluate_point(sweep, tasks(sweep)[0])
    assert row.status == "invalid" and row.binding == "split"


def test_the_sweep_command_writes_one_row_per_point(tmp_path):
    path = write_sweep(tmp_path, {"gpu": ["h100-sxm", "l40s"], "ttft_ms": [4, 500]})
    out = tmp_path / "r.parquet"
    result = runner.invoke(app, ["sweep", str(path), "--results", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pandas()
    assert len(table) == 4 and set(table.point_hash) == {t.point_hash for t in tasks(sweep_of(path))}
    # both 4 ms TTFT points lie below the weight-streaming floor (4.79 ms on H100, 18 ms on L40S)
    assert "2 pruned before simulation (TTFT 2)" in " ".join(result.stdout.split())     # wrapped at 80 columns
    assert (table.status == "pruned").sum() == 2


def test_load_sweep_refuses_a_non_mapping(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("[1, 2]\n")
    with pytest.raises(FieldError, match="expected a mapping"):
        load_sweep(path)


def test_speculative_off_is_one_point_whatever_the_speculative_tokens(tmp_path):
    # speculative off clears num_speculative_tokens: off x {2, 4} were two points of one hash, simulated twice and
    # counted as two ("4 points ... 3 rows")
    data = yaml.safe_load(BASE.read_text())
    data["deployment"]["speculative_config"] = {"method": "ngram", "num_speculative_tokens": 3,
                                                "acceptance_rate": 0.6}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(data))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"scenario": "base.yaml", "settings": {"num_requests": 50},
                                    "axes": {"speculative": [True, False], "num_speculative_tokens": [2, 4]}}))
    sweep = sweep_of(path)
    assert sorted((p.speculative, p.num_speculative_tokens or 0) for p in sweep.points) == [
        (False, 0), (True, 2), (True, 4)]
    assert len({t.point_hash for t in tasks(sweep)}) == 3


def test_refusing_another_sweeps_results_writes_nothing(tmp_path):
    # audit finding: the refusal (raised inside run_sweep) closed the store first, which merged the file and its
    # parts into a new file (a new inode and owner: renamed over it) and deleted the parts folder
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    out = tmp_path / "r.parquet"
    first = write_sweep(tmp_path / "a", {"gpu": ["h100-sxm"], "ttft_ms": [4]})     # pruned: no simulation
    assert runner.invoke(app, ["sweep", str(first), "--results", str(out), "--workers", "1"]).exit_code == 0
    parts = tmp_path / "r.parquet.parts"
    parts.mkdir()
    (parts / "part-000000.parquet").write_bytes(out.read_bytes())     # a crashed run's part, left to resume
    before = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns, p.read_bytes()) for p in (out, *parts.iterdir())}
    other = write_sweep(tmp_path / "b", {"gpu": ["h100-sxm"], "ttft_ms": [5]})
    result = runner.invoke(app, ["sweep", str(other), "--results", str(out), "--workers", "1"])
    assert result.exit_code == 2 and "not in sweep" in result.stderr and result.stderr.count("\n") == 1
    assert {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns, p.read_bytes()) for p in (out, *parts.iterdir())} == before


def test_checking_hashing_and_pruning_are_shown_as_parts_of_the_progress_display(tmp_path):
    # audit finding: a sweep of a million points said nothing for its first minutes (each axis value checked
    # against a scenario, each point hashed, then pruned in the driver at ~5-10 ms a point) and refused an
    # all-invalid one only after hours of that
    from contextlib import contextmanager

    seen: dict[str, list] = {}

    def update(done, total=None):
        seen.setdefault("sweeping", []).append((done, total))

    @contextmanager
    def part(name, unit, total):
        seen[name] = [unit, total]
        yield seen[name].append

    update.part = part
    path = write_sweep(tmp_path, {"max_num_batched_tokens": [16, 32], "max_num_seqs": [64, 128]})
    s = load_sweep(path)
    with pytest.raises(FieldError, match="every one of the sweep's 4 points is invalid"):
        sweep = build_sweep(s, yaml.safe_load((tmp_path / "base.yaml").read_text()), update)
        run_sweep(sweep, set(), lambda row: None, "local", 1, progress=update)
    assert seen["checking axis values"] == ["values", 4, 0, 1, 2, 3, 4]
    assert seen["hashing points"] == ["points", 4, 0, 1, 2, 3, 4]
    assert seen["pruning"] == ["points", 4, 0, 1, 2, 3, 4]
    assert "sweeping" not in seen                      # nothing simulated: the job's own count never started


def test_a_sweep_refused_before_its_first_row_leaves_no_results_file(tmp_path):
    # every point invalid (max_num_batched_tokens below the default max_num_seqs): refused, and no empty file left
    path = write_sweep(tmp_path, {"max_num_batched_tokens": [16, 32]})
    result = runner.invoke(app, ["sweep", str(path), "--results", str(tmp_path / "r.parquet"), "--workers", "1"])
    assert result.exit_code == 2 and "axes: every one of the sweep's 2 points is invalid" in result.stderr
    assert not (tmp_path / "r.parquet").exists() and not (tmp_path / "r.parquet.parts").exists()
    # one valid point among them: the invalid ones are rows of their own
    path = write_sweep(tmp_path, {"max_num_batched_tokens": [16, 8192]})
    result = runner.invoke(app, ["sweep", str(path), "--results", str(tmp_path / "r.parquet"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert sorted(read_rows(tmp_path / "r.parquet", "--results").column("status").to_pylist()) == ["invalid", "ok"]
