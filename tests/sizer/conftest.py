"""Helpers for the planner tests: run `sizer plan --json` in-process and return the dict."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def plan_json():
    runner = CliRunner()
    cache = {}

    def run(scenario: str, *flags: str) -> dict:
        key = (scenario, flags)
        if key not in cache:
            result = runner.invoke(app, ["plan", str(REPO / "scenarios" / scenario), "--json", *flags])
            assert result.exit_code == 0, result.output
            cache[key] = json.loads(result.stdout)
        return cache[key]

    return run
