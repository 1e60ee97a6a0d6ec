"""The one progress display (sizer/cli/progress.py): stderr only, only on a terminal, with rate and ETA."""

import io

from rich.console import Console

from sizer.cli import progress as progress_module
from sizer.cli.progress import progress, rate_text


def test_rate_text_reads_at_any_scale():
    assert rate_text(0, 1.0, "requests") == ""            # no rate before anything is done
    assert rate_text(12_345, 2.0, "requests") == "6,172 requests/s"
    assert rate_text(3, 7.0, "points") == "0.43 points/s"


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys):
    # pytest's captured stderr is not a terminal: a pipe or a log file gets no bar, and stdout never does
    with progress("simulating", "requests", 1000) as update:
        assert update is None                # so the simulation calls nothing per request
    assert capsys.readouterr() == ("", "")


def test_on_a_terminal_the_bar_goes_to_stderr_with_count_rate_and_eta(monkeypatch, capsys):
    screen = io.StringIO()
    monkeypatch.setattr(progress_module, "Console",
                        lambda stderr: Console(file=screen, force_terminal=True, width=120))
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)          # draw every update
    with progress("simulating", "requests", 1000) as update:
        update(500)
        drawn = screen.getvalue()
        update(1000)
    assert "simulating" in drawn and "500/1000" in drawn and "requests/s" in drawn and "ETA" in drawn
    assert capsys.readouterr().out == ""
    # show=False (--json): nothing, even on a terminal
    screen.truncate(0)
    screen.seek(0)
    with progress("simulating", "requests", 10, show=False) as update:
        assert update is None
    assert screen.getvalue() == ""
