"""The one progress display of long commands (simulate, sweep, search, report): on stderr, only when
stderr is a terminal (nothing in pipes, logs or --json output; stdout is never touched), with the count
done, the rate and the time left; redrawn at most ten times a second however often it is told."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

REDRAW_S = 0.1          # at most ten redraws a second: a million calls cost a few clock reads each


def rate_text(done: int, elapsed_s: float, unit: str) -> str:
    """'1,234 requests/s', '0.42 points/s'; '' before there is a rate."""
    if not done or elapsed_s <= 0:
        return ""
    rate = done / elapsed_s
    return f"{rate:,.0f} {unit}/s" if rate >= 100 else f"{rate:.2f} {unit}/s"


@contextmanager
def progress(label: str, unit: str, total: int | None = None,
             show: bool = True) -> Iterator[Callable[..., None] | None]:
    """A bar for `with`: yields `update(done, total=None)`, cheap enough to call once per request, or
    None when nothing is to be drawn (`show=False`, e.g. under --json, or a stderr that is not a
    terminal), so that the work calls nothing. No refresh thread: the sweep and the search fork their
    worker processes while it is open."""
    err = Console(stderr=True)
    if not (show and err.is_terminal):
        yield None
        return
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True,
                  auto_refresh=False) as bar:
        task = bar.add_task(label, total=total, rate="")
        start, next_s = time.monotonic(), 0.0

        def update(done: int, new_total: int | None = None) -> None:
            nonlocal next_s, total
            now = time.monotonic()
            if now < next_s and done != (new_total or total):
                return
            next_s, total = now + REDRAW_S, new_total or total
            bar.update(task, completed=done, total=total, rate=rate_text(done, now - start, unit), refresh=True)

        yield update
