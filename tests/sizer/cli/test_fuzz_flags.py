"""Property: every command's numeric and text flags, given any string or number, answer (exit 0, or
`check`'s exit-1 verdict) or refuse the value in one line naming the flag (exit 2); never a
traceback, another exit code or a hang.

Each command runs in process (typer's CliRunner) on a small base invocation. Where an accepted
value would start minutes of work (a search, a report, a calibration, a replay on the engine),
that work is stubbed: reaching it raises `Accepted`, which counts as an answer (the flags were
checked and the command went on). `simulate` runs for real with the simulated requests and
replicas clamped, so an accepted value still gives a sane answer quickly.
"""

from __future__ import annotations

import tempfile
import typing
from pathlib import Path

import pytest
import typer
from fuzzhelp import HOSTILE_TEXT, answered_or_refused, wall_clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import engine.calibrate
import engine.collectives
import engine.validate
import sizer.cli.import_kernels
import sizer.cli.report
import sizer.cli.search
import sizer.cli.simulate
import sizer.cli.sweep
from sizer.cli import app

REPO = Path(__file__).resolve().parents[3]
CHAT = str(REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
PER_EXAMPLE_S = 30


class Accepted(Exception):
    """The command checked its flags and reached the (stubbed) work."""


def reached(*args, **kwargs):
    raise Accepted


BASES = {
    "plan": ["plan", CHAT],
    "simulate": ["simulate", CHAT, "--num-requests", "20"],
    "search": ["search", CHAT, "--gpus", "h100", "--tp", "1", "--weights", "bf16", "--kv-cache-dtype", "auto",
               "--workers", "1"],
    "report": ["report", CHAT, "--no-search", "-o", "OUT"],
    "sweep": ["sweep", str(REPO / "scenarios" / "sweeps" / "sweep-llama-8b.yaml"), "--results", "OUT",
              "--workers", "1"],
    "check": ["check", str(REPO / "scenarios" / "deploy" / "fail-memory-llama-70b-h100.yaml")],
    "compare": ["compare", str(REPO / "tests" / "data" / "bench" / "guidellm-report-2-benchmarks.json"),
                str(REPO / "tests" / "data" / "bench" / "scenario-llama-3.1-8b-h100.yaml")],
    "calibrate": ["calibrate", "--model", "tiny", "--device", "cpu", "--out", "OUT"],
    "import-kernels": ["import-kernels", str(REPO), "--gpu", "h100-sxm", "--out", "OUT"],
    "validate": ["validate", str(REPO / "engine" / "scenarios" / "tiny-cpu.yaml"), "--profile",
                 str(REPO / "hardware_profiles" / "calibrated" / "cpu-tiny-tp1")],
}


def params(name: str) -> list:
    group = typer.main.get_command(app)
    return group.get_command(None, name).params


def fuzzable(name: str) -> list:
    """The command's options that take a number or text (not a path, not an on/off flag)."""
    return [p for p in params(name) if p.opts[0].startswith("-") and not p.is_flag
            and Path not in (p.type_descriptor.annotation, *typing.get_args(p.type_descriptor.annotation))]


OPTIONS = [(name, option.opts[-1]) for name in BASES for option in fuzzable(name)]


@pytest.fixture
def stubbed(monkeypatch):
    """The long work stubbed: reaching it is `Accepted`; simulate clamped to 20 requests, 4 replicas."""
    for module, function in ((sizer.cli.search, "search"), (sizer.cli.report, "build_report"),
                             (sizer.cli.sweep, "run_sweep"), (sizer.cli.import_kernels, "convert"),
                             (engine.calibrate, "calibrate"), (engine.collectives, "allreduce_table"),
                             (engine.validate, "validate")):
        monkeypatch.setattr(module, function, reached)
    real = sizer.cli.simulate.simulate_scenario

    def clamped(resolved, num_requests, replicas, router, *rest, **named):
        return real(resolved, min(num_requests or 20, 20), replicas and min(replicas, 4), router, *rest, **named)

    monkeypatch.setattr(sizer.cli.simulate, "simulate_scenario", clamped)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(option=st.sampled_from(OPTIONS), value=HOSTILE_TEXT)
def test_a_flag_answers_or_is_refused_naming_it(stubbed, tmp_path, option, value):
    name, flag = option
    # A fresh output path per example: hypothesis reuses tmp_path, and a file one command wrote (report's -o)
    # would be refused as another's --out folder (calibrate's), naming --out rather than the fuzzed flag.
    out = Path(tempfile.mkdtemp(dir=tmp_path)) / "out.html"
    args = [str(out) if a == "OUT" else a for a in BASES[name]] + [f"{flag}={value}"]
    with wall_clock(PER_EXAMPLE_S):
        result = CliRunner().invoke(app, args)
    if isinstance(result.exception, Accepted):
        return
    line = answered_or_refused(result, (args, value), answers=(0, 1) if name == "check" else (0,))
    if line is not None:
        opts = next(p for p in params(name) if flag in p.opts).opts
        assert any(opt in line for opt in opts), (args, line)


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_base_invocations_answer(stubbed, tmp_path, name):
    """Each base runs as it stands (or reaches its stubbed work): a refusal of every value would prove nothing."""
    result = CliRunner().invoke(app, [str(tmp_path / "out.html") if a == "OUT" else a for a in BASES[name]])
    assert isinstance(result.exception, Accepted) or result.exit_code in ((0, 1) if name == "check" else (0,)), \
        result.output


def test_every_command_with_options_is_fuzzed():
    group = typer.main.get_command(app)
    with_options = {name for name in group.list_commands(None) if fuzzable(name)}
    assert with_options == set(BASES)
