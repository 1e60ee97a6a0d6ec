"""The live progress bar on a terminal (rich): kind "live progress" (sizer/kinds.py), loaded by
sizer/cli/progress.py only where stderr may be a terminal, so that a run in a pipe, a log or CI imports no rich
for its progress."""

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

from sizer.cli import progress


def bar(label: str, unit: str, total: int | None) -> Iterator[progress.Display]:
    """progress.progress's display where stderr may be a terminal: rich's live bar where rich says it is one,
    else the plain lines. A part (progress.Display.part) is a second row under the job's, gone when it ends."""
    err = Console(stderr=True)
    if not err.is_terminal:
        yield from progress.lines(label, unit, total)
        return
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=err, transient=True, auto_refresh=False) as live:
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

        @contextmanager
        def part(name: str, part_unit: str, part_total: int | None) -> Iterator[Callable[[int], None]]:
            row = live.add_task(f"{label}, {name}", total=part_total, rate="")
            part_start, part_next_s = time.monotonic(), 0.0

            def part_update(done: int) -> None:
                nonlocal part_next_s
                now = time.monotonic()
                if now < part_next_s and done != part_total:
                    return
                part_next_s = now + progress.REDRAW_S
                rate = progress.rate_text(done, now - part_start, part_unit)
                live.update(row, completed=done, rate=rate, refresh=True)

            try:
                yield part_update
            finally:
                live.remove_task(row)
                live.refresh()

        yield progress.display(update, part)
