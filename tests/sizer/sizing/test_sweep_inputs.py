"""A sweep's shared inputs (sizer/inputs/preloaded.py): models, profiles and traces are read once in the
driver and shipped with the sweep, so a worker reads none of those files; trace workloads in sweeps."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from sweephelp import REPO, TRACE, model_folder, sweep_of, trace_sweep, write_sweep

from sizer.inputs.hardware import all_profiles, load_hardware
from sizer.inputs.preloaded import Preloaded, installed
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.sweep_store import ResultStore
from sizer.sizing.sweep import evaluate_point, run_sweep, tasks, variant_of
from sizer.sizing.workload import trace_summary
from validation.errors import excerpt
from validation.safe_yaml import load_yaml


def run(sweep, results: Path, workers: int):
    store = ResultStore(results)
    summary = run_sweep(sweep, store.done(), store.add, "local", workers)
    store.close()
    return summary, pq.read_table(results)


def test_a_model_path_is_read_once_in_the_driver(tmp_path):
    folder = model_folder(tmp_path)
    path = write_sweep(tmp_path, {"model": [str(folder)], "gpu": ["h100-sxm", "h200"]})
    _, present = run(sweep_of(path), tmp_path / "present.parquet", 1)
    sweep = sweep_of(path)
    shutil.rmtree(folder)                       # after the driver read it: the workers never see the file
    summary, absent = run(sweep, tmp_path / "absent.parquet", 2)
    assert summary.failed == () and summary.simulated == 2
    assert set(absent.column("status").to_pylist()) == {"ok"}
    assert absent.equals(present)               # the same rows, every column, as with the file there
    # the control: the same sweep shipping nothing reads the model's file, which is gone
    row = evaluate_point(dataclasses.replace(sweep, inputs=Preloaded()), tasks(sweep)[0])
    assert row.status == "invalid" and row.reason.startswith(f"unknown model {excerpt(str(folder))}")


def test_a_rate_axis_time_scales_the_trace(tmp_path):
    sweep = sweep_of(trace_sweep(tmp_path, {"rate_per_s": [1, 3]}))
    for task in tasks(sweep):
        s = scenario_from_dict(sweep.data, sweep.scenario_file, variant_of(sweep, task.point, task.seed))
        # the trace's first 120 requests replayed at the axis's rate: (120 - 1) / span == the rate
        assert abs(trace_summary(s).rate_per_s - task.point.rate_per_s) < 1e-9 * task.point.rate_per_s
    base = scenario_from_dict(sweep.data, sweep.scenario_file)
    assert sweep.trace.rate_per_s == trace_summary(base).rate_per_s


def test_a_trace_sweep_runs_without_the_trace_file_and_its_content_keys_each_point(tmp_path):
    path = trace_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"], "rate_per_s": [2]})
    sweep = sweep_of(path)
    (tmp_path / "trace.csv").unlink()           # read once in the driver; the workers get its requests
    summary, table = run(sweep, tmp_path / "r.parquet", 2)
    assert summary.failed == () and table.num_rows == 2
    assert set(table.column("status").to_pylist()) <= {"ok", "rejected"}
    assert table.column("rate_per_s").to_pylist() == [2.0, 2.0]
    # the same trace file hashes every point alike; one changed request changes every point's key
    shutil.copy(TRACE, tmp_path / "trace.csv")
    same = {t.point_hash for t in tasks(sweep_of(path))}
    assert same == {t.point_hash for t in tasks(sweep)}
    lines = TRACE.read_text().splitlines()
    lines[5] = lines[5].rsplit(",", 1)[0] + ",1"
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    assert not same & {t.point_hash for t in tasks(sweep_of(path))}



def test_a_custom_hardware_profile_known_only_to_the_driver(tmp_path, monkeypatch):
    # a profile file the driver's sizer has (here: an H100 under another id) and a worker's may not
    mine = dataclasses.replace(load_hardware("h100-sxm"), id="my-gpu", aliases=())
    profiles = {**all_profiles(), "my-gpu": mine}
    for module in ("sizer.inputs.hardware", "sizer.sizing.sweep"):
        monkeypatch.setattr(f"{module}.all_profiles", lambda: profiles)
    sweep = sweep_of(write_sweep(tmp_path, {"gpu": ["my-gpu"]}))
    monkeypatch.undo()                          # this process now knows the bundled profiles only
    summary, table = run(sweep, tmp_path / "r.parquet", 1)
    assert summary.failed == () and table.column("gpu").to_pylist() == ["my-gpu"]
    assert table.column("status").to_pylist() == ["ok"]
    with installed(sweep.inputs):
        task = tasks(sweep)[0]
    row = evaluate_point(dataclasses.replace(sweep, inputs=Preloaded()), task)      # shipping nothing
    assert row.status == "invalid" and "unknown GPU 'my-gpu'" in row.reason


def test_kernel_tables_are_loaded_once_in_the_driver(tmp_path, monkeypatch):
    path = write_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"]})
    data = load_yaml(tmp_path / "base.yaml")
    data["hardware"] = {"gpu": "h100-sxm", "step_model": "kernel_tables"}    # vLLM tables bundled for both GPUs
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(data))
    sweep = sweep_of(path)
    # and SGLang's, whose rows price a kernel vLLM shares with it where vLLM's lack the shape (SHARED_MOE_KERNELS)
    assert {k: v.header.gpu for k, v in sweep.inputs.kernel_tables.items()} == {
        ("h100-sxm", "vllm"): "h100-sxm", ("h200", "vllm"): "h200", ("h100-sxm", "sglang"): "h100-sxm",
        ("h200", "sglang"): "h200"}

    def looked_up(*args):
        raise AssertionError("a point looked for the kernel tables' files")
    monkeypatch.setattr("sizer.timing.step_model.bundled_tables_dir", looked_up)
    summary, table = run(sweep, tmp_path / "r.parquet", 1)
    assert summary.failed == () and set(table.column("status").to_pylist()) == {"ok"}


def test_a_changed_model_config_at_the_same_path_changes_its_points(tmp_path):
    folder = model_folder(tmp_path)
    path = write_sweep(tmp_path, {"model": [str(folder), "llama-3.1-8b"], "gpu": ["h100-sxm"]})
    before = {t.point.model: t.point_hash for t in tasks(sweep_of(path))}
    assert before == {t.point.model: t.point_hash for t in tasks(sweep_of(path))}     # same file, same keys
    config = json.loads((folder / "config.json").read_text())
    config["max_position_embeddings"] //= 2                 # a shorter context: another model under the same path
    (folder / "config.json").write_text(json.dumps(config))
    after = {t.point.model: t.point_hash for t in tasks(sweep_of(path))}
    assert after[str(folder)] != before[str(folder)] and after["llama-3.1-8b"] == before["llama-3.1-8b"]



def test_a_speculative_heads_config_is_shipped_where_found_here_and_left_out_where_not(tmp_path, monkeypatch):
    # a head's config found here travels with the sweep; a Hugging Face id in no local cache is not an error (sizer
    # never downloads): each point estimates the head and its plan says so
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    shutil.copytree(REPO / "tests" / "data" / "spec_heads" / "eagle3-llama3.1-instruct-8b", tmp_path / "head")
    path = write_sweep(tmp_path, {"gpu": ["h100-sxm"]})
    data = load_yaml(tmp_path / "base.yaml")
    for model in ("head", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"):
        data["deployment"]["speculative_config"] = {"method": "eagle3", "model": model, "num_speculative_tokens": 3,
                                                    "acceptance_rate": 0.7}
        (tmp_path / "base.yaml").write_text(yaml.safe_dump(data))
        shipped = sweep_of(path).inputs.checkpoints
        assert ((str(tmp_path), model) in shipped) == (model == "head")
