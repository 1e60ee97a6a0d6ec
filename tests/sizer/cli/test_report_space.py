"""`sizer report` (and `search`) says what it searches before it starts, searches the scenario's GPU by
default (not every data-centre GPU: 288 configurations, an hour on a loaded machine) and reports the scenario
as given with --no-search (issue 27)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

import sizer.cli.report
from sizer.cli import app
from sizer.cli.search_space import report_space, space_from_options
from sizer.errors import InputError
from sizer.inputs.scenario import load_scenario
from sizer.sizing.search import candidates

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "scenarios" / "llama-3.1-70b-h200.yaml"         # hardware.gpu: h200
LAPTOP = ROOT / "scenarios" / "llamacpp-laptop-m4-pro.yaml"    # llama.cpp on an Apple laptop
runner = CliRunner()


def test_the_default_report_space_is_the_scenarios_gpu():
    scenario = load_scenario(H200)
    space = report_space(scenario, None, None, None, None, None)
    assert space.gpus == ("h200",)
    # TP 1,2,4,8 x weights bf16,fp8 x KV auto,fp8 (SearchSpace's defaults) = 4 x 2 x 2
    assert len(candidates(space)) == 16
    # search's default: every data-centre profile, the same axes; the report's is that many times smaller
    searched = space_from_options(scenario, None, None, None, None, None, False)
    assert len(candidates(searched)) == 16 * len(searched.gpus) and len(searched.gpus) > 1
    # --gpus widens it as search's does
    assert report_space(scenario, "h100-sxm,b200", None, None, None, None).gpus == ("h100-sxm", "b200")


def test_llama_cpp_reports_keep_their_local_devices():
    scenario = load_scenario(LAPTOP)
    space = report_space(scenario, None, None, None, None, None)
    assert space == space_from_options(scenario, None, None, None, None, None, False) and len(space.gpus) > 1


def stop(*args, **kwargs):
    raise InputError(None, "test", "stopped before the work")


@pytest.mark.parametrize("flags, said", [
    ([], "report: searching 16 configurations: GPU h200; TP 1,2,4,8; weights bf16,fp8; KV auto,fp8 "
         "(--gpus to widen it, --no-search to skip it)"),
    (["--gpus", "h200,b200", "--tp", "8", "--weights", "fp8"],
     # 2 GPUs x TP 8 x fp8 x KV auto,fp8 = 4
     "report: searching 4 configurations: GPUs h200,b200; TP 8; weights fp8; KV auto,fp8 "
     "(--gpus to widen it, --no-search to skip it)"),
    (["--no-search"], "report: the scenario's configuration as given (--no-search)"),
])
def test_the_report_states_what_it_searches_before_it_starts(monkeypatch, tmp_path, flags, said):
    seen = {}

    def build(data, file, space, workers, progress):
        seen["space"] = space
        stop()
    monkeypatch.setattr(sizer.cli.report, "build_report", build)
    result = runner.invoke(app, ["report", str(H200), "-o", str(tmp_path / "r.html"), *flags])
    assert result.exit_code == 2
    assert " ".join(result.stderr.split()).startswith(said + " error: ")    # the statement (wrapped at 80 columns),
    assert max(map(len, result.stderr.splitlines())) <= 80              # then the work
    assert (seen["space"] is None) == ("--no-search" in flags)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("flag, value", [("--gpus", "b200"), ("--tp", "8"), ("--weights", "fp8"),
                                         ("--kv-cache-dtype", "fp8")])
def test_no_search_refuses_a_search_axis(tmp_path, flag, value):
    result = runner.invoke(app, ["report", str(H200), "-o", str(tmp_path / "r.html"), "--no-search", flag, value])
    assert result.exit_code == 2
    assert result.stderr == f"error: {flag}: is a search axis; --no-search reports the scenario's own configuration\n"


def test_search_states_what_it_searches_before_it_starts(monkeypatch):
    import sizer.cli.search

    monkeypatch.setattr(sizer.cli.search, "search", stop)
    result = runner.invoke(app, ["search", str(H200), "--gpus", "h200,b200", "--tp", "4,8"])
    assert result.exit_code == 2
    # 2 GPUs x TP 4,8 x weights bf16,fp8 x KV auto,fp8 (the defaults) = 16
    assert " ".join(result.stderr.split()).startswith("search: 16 configurations: GPUs h200,b200; TP 4,8; weights "
                                                      "bf16,fp8; KV auto,fp8 error: ")
