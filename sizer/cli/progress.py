"""The one progress display of long commands (simulate, plan --simulate, sweep, search, report, a gateway's
simulation and search): on stderr only (stdout, and so --json output, is never touched), with the count done, the
rate and the time left.

On a terminal it is a live bar, redrawn at most ten times a second however often it is told (rich's, in
sizer/cli/progress_bar.py: an output kind, sizer/kinds.py, loaded only where stderr may be a terminal). Anywhere
else (a pipe, a log file, CI) it is plain lines, at most one every LINE_S seconds, the first once a run has taken
that long, and a closing line when a run printed any: a job that ends within a few seconds prints nothing.

A job may show one long piece of itself as it goes, in the same display (`Display.part`): the sizing of `check` and
`plan --simulate`, which counts simulations, shows an operating point's simulation of the scenario's requests as
"sizing, operating point 2 (3 replicas): 412,000/1,000,000 requests, ..." (a second row under the bar on a terminal;
elsewhere lines of its own, within the same one line every LINE_S)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

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
    """One plain line: 'searching: 12/320 configurations, 0.52 configurations/s, ETA 9 min 52 s'
    (no total: the count and the rate)."""
    rate = rate_text(done, elapsed_s, unit)
    parts = [f"{label}: {done:,}/{total:,} {unit}" if total else f"{label}: {done:,} {unit}"]
    if rate:
        parts.append(rate)
        if total and done < total:
            parts.append(f"ETA {duration_text((total - done) * elapsed_s / done)}")
    return ", ".join(parts)


def final_line(label: str, unit: str, done: int, elapsed_s: float) -> str:
    """'searching: done, 320 configurations in 10 min 15 s (0.52 configurations/s)'."""
    rate = rate_text(done, elapsed_s, unit)
    return f"{label}: done, {done:,} {unit} in {duration_text(elapsed_s)}" + (f" ({rate})" if rate else "")


class Display(Protocol):
    """What `progress` yields: `display(done, total=None)` tells it the count done (cheap enough once per request);
    `with display.part(name, unit, total) as update:` shows one long piece of the job under the job's label
    ("sizing, operating point 2 (3 replicas)"), its own count told to `update(done)` (once per request: the
    simulator's per-request callback), its own rate and time left."""

    def __call__(self, done: int, total: int | None = None) -> None: ...

    def part(self, name: str, unit: str, total: int | None) -> AbstractContextManager[Callable[[int], None]]: ...


def display(update: Callable[..., None],
            part: Callable[[str, str, int | None], AbstractContextManager[Callable[[int], None]]]) -> Display:
    """`update` itself with `part` beside it: `simulate` hands the display to the simulator as its per-request
    callback, with no call between them."""
    update.part = part              # type: ignore[attr-defined]
    return update                   # type: ignore[return-value]


@contextmanager
def progress(label: str, unit: str, total: int | None = None, show: bool = True) -> Iterator[Display | None]:
    """A display for `with`: yields a `Display`, called as `update(done, total=None)`, cheap enough to call once per
    request, or None when nothing is to be shown (`show=False`), so that the work calls nothing. No refresh thread:
    the sweep and the search fork their worker processes while it is open."""
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


def lines(label: str, unit: str, total: int | None) -> Iterator[Display]:
    """The plain-line display (stderr not a terminal): rate-limited lines, the job's and its parts' together (at
    most one every LINE_S), then a closing one for each that printed any."""
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

    @contextmanager
    def part(name: str, part_unit: str, part_total: int | None) -> Iterator[Callable[[int], None]]:
        part_label, part_start = f"{label}, {name}", time.monotonic()
        first_s, part_done, part_printed = part_start + LINE_S, 0, False    # its first line once it has run LINE_S

        def part_update(done: int) -> None:
            nonlocal next_s, printed, part_done, part_printed
            part_done = done
            now = time.monotonic()
            if now < next_s or now < first_s:
                return
            next_s, printed, part_printed = now + LINE_S, True, True
            print(progress_line(part_label, part_unit, done, part_total, now - part_start), file=sys.stderr,
                  flush=True)

        yield part_update
        if part_printed:
            print(final_line(part_label, part_unit, part_done, time.monotonic() - part_start), file=sys.stderr,
                  flush=True)

    yield display(update, part)
    if printed:
        print(final_line(label, unit, done_so_far, time.monotonic() - start), file=sys.stderr, flush=True)
