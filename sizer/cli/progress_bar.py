"""The live progress bar on a terminal (rich): kind "live progress" (sizer/kinds.py), loaded by
sizer/cli/progress.py only where stderr may be a terminal, so that a run in a pipe, a log or CI imports no rich
for its progress."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sizer.cli import progress


def bar(label: str, unit: str, total: int | None) -> Iterator[Callable[..., None]]:
    """progress.progress's display where stderr may be a terminal: rich's live bar where rich says it is one,
    else the plain lines."""
    err = Console(stderr=True)
    if not err.is_terminal:
        yield from progress.lines(label, unit, total)
        return
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True,
                  auto_refresh=False) as live:
        task = live.add_task(label, total=total, rate="")
        start, next_s = time.monotonic(), 0.0

        def update(done: int, new_total: int | None = None) -> None:
            nonlocal next_s, total
            now = time.monotonic()
            if now < next_s and done != (new_total or total):
                return
            next_s, total = now + progress.REDRAW_S, new_total or total
            rate = progress.rate_text(done, now - start, unit)
            live.update(task, completed=done, total=total, rate=rate, refresh=True)

        yield update
