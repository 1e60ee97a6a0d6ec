"""`sizer check` (and `plan --simulate`, the same sizing) on a long operating point: the simulation of the scenario's
requests shows its progress as `sizer simulate`'s does (sizer/cli/progress.py), named as the sizing's operating
point, on stderr only; --json's stdout stays pure JSON."""

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import sizer.sizing.pipeline as pipeline
from sizer.cli import app
from sizer.cli import progress as progress_module

ROOT = Path(__file__).resolve().parents[3]
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
runner = CliRunner()
PART = re.compile(r"^sizing, operating point (\d+) \((\d+) replicas?\): ([\d,]+)/([\d,]+) requests, [\d,.]+ requests/s")


@pytest.mark.parametrize("command", [["check"], ["plan", "--simulate"]])
def test_a_long_operating_point_counts_its_requests_to_the_last_on_stderr(monkeypatch, tmp_path, command):
    # 3,000 requests, counted long (LONG_SIMULATION_REQUESTS: 10,000); LINE_S 0: a line at every request told (a
    # real run prints one every 5 s); CliRunner's stderr is no terminal: the plain lines
    data = yaml.safe_load(CHAT.read_text())
    data["workload"]["num_requests"] = 3000
    scenario = tmp_path / "chat-3000.yaml"
    scenario.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(pipeline, "LONG_SIMULATION_REQUESTS", 2000)
    monkeypatch.setattr(progress_module, "LINE_S", 0.0)
    result = runner.invoke(app, [command[0], str(scenario), *command[1:], "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)                              # stdout stays pure JSON
    sizing = answer["sizing"] if command == ["check"] else answer["simulation"]
    lines = result.stderr.splitlines()
    parts = [m.groups() for m in map(PART.match, lines) if m]
    # the first operating point: one replica at 6 req/s (the sizing's replicas), its 3,000 requests one by one
    assert parts[0][:2] == ("1", str(sizing["replicas"]))
    first = [int(done.replace(",", "")) for k, _, done, total in parts if k == "1" and total == "3,000"]
    assert first == list(range(1, 3001))
    assert "sizing, operating point 1 (1 replica): done, 3,000 requests in " in result.stderr
    assert lines[-1].startswith("sizing: done, ")                   # the job's closing line, last
    assert all(x.startswith("sizing") for x in lines), lines[:5]


def test_a_short_operating_point_is_one_simulation_counted(monkeypatch):
    # the bundled deployment's 2,000 requests, under LONG_SIMULATION_REQUESTS: counted, with no part of its own
    monkeypatch.setattr(progress_module, "LINE_S", 0.0)
    result = runner.invoke(app, ["check", str(ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert "operating point" not in result.stderr and "sizing: 1 simulations, " in result.stderr
