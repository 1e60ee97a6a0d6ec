"""The one progress display (sizer/cli/progress.py): stderr only, with the count, the rate and the time left; a
live bar on a terminal, plain rate-limited lines anywhere else (a pipe, a log, CI), never on stdout."""

import io
import json
import types
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sizer.cli import app, progress_bar
from sizer.cli import progress as progress_module
from sizer.cli.progress import duration_text, progress, rate_text

ROOT = Path(__file__).resolve().parents[3]
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
runner = CliRunner()


def test_rate_text_reads_at_any_scale():
    assert rate_text(0, 1.0, "requests") == ""            # no rate before anything is done
    assert rate_text(12_345, 2.0, "requests") == "6,172 requests/s"
    assert rate_text(3, 7.0, "points") == "0.43 points/s"


def test_duration_text_reads_at_any_scale():
    assert duration_text(42.4) == "42 s"
    assert duration_text(185) == "3 min 05 s"             # 3 x 60 + 5
    assert duration_text(3720) == "1 h 02 min"            # 3,600 + 2 x 60


class Clock:
    """A stand-in for time.monotonic that the test moves."""
    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now


def test_off_a_terminal_lines_are_rate_limited_with_count_rate_and_eta(monkeypatch, capsys):
    # pytest's captured stderr is not a terminal: the plain-line display
    clock = Clock()
    monkeypatch.setattr(progress_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    with progress("simulating", "requests", 100) as update:
        clock.now = 1.0
        update(2)                          # within the first LINE_S (5 s): nothing
        clock.now = 5.0
        update(10)                         # 10 in 5 s: 2.00/s; 90 left at that rate: 45 s
        clock.now = 6.0
        update(20)                         # 1 s after the last line: nothing
        clock.now = 10.0
        update(100)                        # 5 s later: a line, no ETA once done
        clock.now = 12.0
    out, err = capsys.readouterr()
    assert out == ""                       # never stdout
    assert err.splitlines() == ["simulating: 10/100 requests, 2.00 requests/s, ETA 45 s",
                                "simulating: 100/100 requests, 10.00 requests/s",
                                # 100 requests in 12 s: 8.33/s
                                "simulating: done, 100 requests in 12 s (8.33 requests/s)"]


def test_off_a_terminal_a_short_job_prints_nothing_and_an_unknown_total_prints_the_count(monkeypatch, capsys):
    clock = Clock()
    monkeypatch.setattr(progress_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    with progress("sizing", "simulations") as update:
        clock.now = 4.9
        update(3)
    assert capsys.readouterr() == ("", "")          # done within LINE_S: no line, not even a closing one
    with progress("sizing", "simulations") as update:
        clock.now += 8.0
        update(4)                                   # 4 in 8 s: 0.50/s; no total, so no ETA
    assert capsys.readouterr().err.splitlines() == ["sizing: 4 simulations, 0.50 simulations/s",
                                                    "sizing: done, 4 simulations in 8 s (0.50 simulations/s)"]


def test_a_failed_run_prints_no_closing_line(monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "LINE_S", 0.0)
    with pytest.raises(ValueError), progress("searching", "configurations", 4) as update:
        update(1)
        raise ValueError
    err = capsys.readouterr().err
    assert err.startswith("searching: 1/4 configurations") and "done" not in err


def test_on_a_terminal_the_bar_goes_to_stderr_with_count_rate_and_eta(monkeypatch, capsys):
    screen = io.StringIO()
    monkeypatch.setattr(progress_bar, "Console", lambda stderr: Console(file=screen, force_terminal=True, width=120))
    monkeypatch.setenv("TTY_COMPATIBLE", "1")      # stderr may be a terminal: the bar's module, and rich, decide
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)          # draw every update
    with progress("simulating", "requests", 1000) as update:
        update(500)
        drawn = screen.getvalue()
        update(1000)
    assert "simulating" in drawn and "500/1000" in drawn and "requests/s" in drawn and "ETA" in drawn
    assert capsys.readouterr().out == ""
    # show=False (a gateway plan without a search): nothing, even on a terminal
    screen.truncate(0)
    screen.seek(0)
    with progress("simulating", "requests", 10, show=False) as update:
        assert update is None
    assert screen.getvalue() == ""


@pytest.mark.parametrize("args, line", [
    (["simulate", str(CHAT), "--num-requests", "200", "--json"], "simulating: 200/200 requests, "),
    # a cluster of two replicas and a gateway count their requests the same way
    (["simulate", str(CHAT), "--num-requests", "200", "--replicas", "2", "--json"], "simulating: 200/200 requests, "),
    (["simulate", str(ROOT / "scenarios" / "gateway-residency.yaml"), "--num-requests", "100", "--json"],
     "simulating: 100/100 requests, "),
    (["plan", str(CHAT), "--simulate", "--json"], "sizing: 1 simulations, "),
    (["check", str(ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"), "--json"], "sizing: 1 simulations, "),
    (["search", str(CHAT), "--gpus", "h100-sxm", "--tp", "1,2", "--weights", "bf16", "--kv-cache-dtype", "auto",
      "--num-requests", "100", "--workers", "1", "--json"], "searching: 1/2 configurations, "),
])
def test_a_command_with_stderr_captured_prints_progress_lines_and_pure_json(monkeypatch, args, line):
    # LINE_S 0: a line at every update (a real run prints one every 5 s); CliRunner's stderr is no terminal
    monkeypatch.setattr(progress_module, "LINE_S", 0.0)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)                          # stdout stays pure JSON
    lines = result.stderr.splitlines()
    assert any(x.startswith(line) and x.split(", ")[1].endswith("/s") for x in lines), lines
    assert lines[-1].split(": done, ")[0] in ("simulating", "sizing", "searching"), lines


@pytest.mark.parametrize("scenario", [CHAT, ROOT / "scenarios" / "gateway-residency.yaml"])
def test_the_requests_csv_is_written_under_the_simulations_progress(monkeypatch, tmp_path, scenario):
    # the rows are written as requests finish (here every 32): the simulation's own count is the CSV's progress,
    # shown to the last request and closed once; no second display waits after it; stdout stays pure JSON
    import simulator.records as records
    from sizer.cli import gateway as gateway_cli

    monkeypatch.setattr(progress_module, "LINE_S", 0.0)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 32)
    monkeypatch.setattr(gateway_cli, "REQUEST_CHUNK_ROWS", 32)
    out = tmp_path / "r.csv"
    result = runner.invoke(app, ["simulate", str(scenario), "--num-requests", "100", "--json", "--requests-csv",
                                 str(out)])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    lines = result.stderr.splitlines()
    assert [x.split(", ")[0] for x in lines[-2:]] == ["simulating: 100/100 requests", "simulating: done"], lines
    assert all(x.startswith("simulating: ") for x in lines), lines
    assert len(out.read_text().splitlines()) == 101                 # the header and one row per request


def test_off_a_terminal_a_part_prints_its_own_lines_within_the_one_line_every_line_s(monkeypatch, capsys):
    # a sizing counting simulations, with two long operating points shown as parts (Display.part): a part's lines
    # name it under the job's label, with its own count, rate and time left; one line every LINE_S (5 s) for the
    # job and its parts together, a part's first once it has run that long; a closing line for each that printed
    clock = Clock()
    monkeypatch.setattr(progress_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    with progress("sizing", "simulations") as update:
        clock.now = 6.0
        update(8)                                           # a line; the next no sooner than 11 s
        with update.part("operating point 1 (2 replicas)", "requests", 1000) as requests_done:
            clock.now = 9.0
            requests_done(300)                              # within the part's first 5 s: nothing
            clock.now = 11.0
            requests_done(500)                              # 500 in 5 s: 100/s, 500 left: 5 s
            clock.now = 12.0
            requests_done(600)                              # 1 s after the last line: nothing
            clock.now = 16.0
            requests_done(1000)
        update(9)                                           # within 5 s of the part's last line: nothing
        with update.part("operating point 2 (1 replica)", "requests", 1000) as requests_done:
            clock.now = 19.0
            requests_done(1000)                             # 3 s long: no line, no closing line
        update(10)
        clock.now = 22.0
        update(10)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "sizing: 8 simulations, 1.33 simulations/s",
        "sizing, operating point 1 (2 replicas): 500/1,000 requests, 100 requests/s, ETA 5 s",
        "sizing, operating point 1 (2 replicas): 1,000/1,000 requests, 100 requests/s",
        "sizing, operating point 1 (2 replicas): done, 1,000 requests in 10 s (100 requests/s)",
        "sizing: 10 simulations, 0.45 simulations/s",
        "sizing: done, 10 simulations in 22 s (0.45 simulations/s)"]


def test_on_a_terminal_a_part_is_a_second_row_gone_when_it_ends(monkeypatch, capsys):
    screen = io.StringIO()
    monkeypatch.setattr(progress_bar, "Console", lambda stderr: Console(file=screen, force_terminal=True, width=120))
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    with progress("sizing", "simulations") as update:
        update(8)
        with update.part("operating point 1 (2 replicas)", "requests", 1000) as requests_done:
            requests_done(500)
            drawn = screen.getvalue()
        after = screen.getvalue()[len(drawn):]              # the redraw once the part ended
    assert "sizing, operating point 1 (2 replicas)" in drawn and "500/1000" in drawn and "requests/s" in drawn
    assert "sizing" in drawn.replace("sizing, operating point", "") and "8/?" in drawn      # the job's row too
    assert "sizing" in after and "operating point" not in after
    assert capsys.readouterr().out == ""
