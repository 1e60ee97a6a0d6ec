"""The one progress display of long commands (simulate, plan --simulate, sweep, search, report, a gateway's
simulation and search): on stderr only (stdout, and so --json output, is never touched), with the count done, the
rate and the time left.

On a terminal it is a live bar, redrawn at most ten times a second however often it is told (rich's, in
sizer/cli/progress_bar.py: an output kind, sizer/kinds.py, loaded only where stderr may be a terminal). Anywhere
else (a pipe, a log file, CI) it is plain lines, at most one every LINE_S seconds, the first once a run has taken
that long, and a closing line when a run printed any: a job that ends within a few seconds prints nothing."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sizer.kinds import kind

REDRAW_S = 0.1          # at most ten redraws a second: a million calls cost a few clock reads each
LINE_S = 5.0            # not a terminal: at most one line every 5 s (a log of an hour-long report: 720 lines)


def rate_text(done: int, elapsed_s: float, unit: str) -> str:
    """'1,234 requests/s', '0.42 points/s'; '' before there is a rate."""
    if not done or elapsed_s <= 0:
        return ""
    rate = done / elapsed_s
    return f"{rate:,.0f} {unit}/s" if rate >= 100 else f"{rate:.2f} {unit}/s"


def duration_text(seconds: float) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min': a time left or taken, as a reader wants it."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def progress_line(label: str, unit: str, done: int, total: int | None, elapsed_s: float) -> str:
    """One plain line: 'searching: 12/288 configurations, 0.52 configurations/s, ETA 8 min 58 s'
    (no total: the count and the rate)."""
    rate = rate_text(done, elapsed_s, unit)
    parts = [f"{label}: {done:,}/{total:,} {unit}" if total else f"{label}: {done:,} {unit}"]
    if rate:
        parts.append(rate)
        if total and done < total:
            parts.append(f"ETA {duration_text((total - done) * elapsed_s / done)}")
    return ", ".join(parts)


def final_line(label: str, unit: str, done: int, elapsed_s: float) -> str:
    """'searching: done, 288 configurations in 9 min 12 s (0.52 configurations/s)'."""
    rate = rate_text(done, elapsed_s, unit)
    return f"{label}: done, {done:,} {unit} in {duration_text(elapsed_s)}" + (f" ({rate})" if rate else "")


@contextmanager
def progress(label: str, unit: str, total: int | None = None,
             show: bool = True) -> Iterator[Callable[..., None] | None]:
    """A display for `with`: yields `update(done, total=None)`, cheap enough to call once per request, or None
    when nothing is to be shown (`show=False`), so that the work calls nothing. No refresh thread: the sweep and
    the search fork their worker processes while it is open."""
    if not show:
        yield None
        return
    if not may_be_terminal():
        yield from lines(label, unit, total)
        return
    yield from kind("live progress").bar(label, unit, total)


def may_be_terminal() -> bool:
    """Whether rich could call stderr a terminal (rich.console.Console.is_terminal: TTY_COMPATIBLE or FORCE_COLOR
    in the environment, else stderr's isatty()). Where it could not, the plain lines need no rich, a tenth of
    `sizer simulate --json`'s start-up; where it could, the live bar's module asks rich itself."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):         # no isatty, or a closed stream: no terminal, as rich says
        return False


def lines(label: str, unit: str, total: int | None) -> Iterator[Callable[..., None]]:
    """The plain-line display (stderr not a terminal): rate-limited lines, then a closing one if any was printed."""
    start = time.monotonic()
    next_s, done_so_far, printed = start + LINE_S, 0, False

    def update(done: int, new_total: int | None = None) -> None:
        nonlocal next_s, total, done_so_far, printed
        done_so_far, total = done, new_total or total
        now = time.monotonic()
        if now < next_s:
            return
        next_s, printed = now + LINE_S, True
        print(progress_line(label, unit, done, total, now - start), file=sys.stderr, flush=True)

    yield update
    if printed:
        print(final_line(label, unit, done_so_far, time.monotonic() - start), file=sys.stderr, flush=True)
