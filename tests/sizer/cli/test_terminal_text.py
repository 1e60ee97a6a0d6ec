"""What a user wrote reaches the terminal as written: never read as rich markup (a scenario named "[/x]" made
rich raise MarkupError: a traceback), never with its control characters (an ESC in a name drove the terminal)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.terminal_text import styled

ROOT = Path(__file__).resolve().parents[3]


def test_a_scenario_name_with_markup_and_escapes_prints_as_text(tmp_path):
    scenario = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    scenario["name"] = "chat [/nope] [bold]v2\x1b[31m red\x07"
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 0, result.output
    # the tags print as written; ESC (0x1b) and BEL (0x07) are dropped, the text after them kept
    assert result.output.splitlines()[0].startswith("chat [/nope] [bold]v2[31m red: llama-3.1-8b on 1 x")
    assert "\x1b" not in result.output and "\x07" not in result.output


def test_styled_keeps_tabs_and_newlines_and_drops_other_controls():
    text = styled(("a\tb", "bold"), "\nc\x00d\x9b")      # 0x9b: the C1 control sequence introducer
    assert text.plain == "a\tb\ncd"
    assert [(span.start, span.end, span.style) for span in text.spans] == [(0, 3, "bold")]
