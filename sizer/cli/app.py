"""The `sizer` Typer app: every command registered in one place, bad input turned into one line and exit 2.

Each command lives in its own module (sizer/cli/<command>.py); terminal rendering is sizer/cli/render.py.
"""

from __future__ import annotations

import functools
import sys

import typer

from sizer.cli import calibrate, catalogs, check, plan, report, search, simulate, validate
from simulator.errors import FieldError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Capacity planner for LLM inference: memory, parallelism, simulated latency, goodput and cost.")


def input_errors_exit_2(command):
    """Wrap a command so that bad input (a FieldError: sizer's InputError, a bad trace, a model the
    engine cannot run) is one line on stderr and exit code 2."""
    @functools.wraps(command)
    def guarded(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FieldError as error:
            typer.echo(f"error: {error.one_line()}", err=True)
            raise typer.Exit(2) from None
    return guarded

for name, module in (("plan", plan), ("simulate", simulate), ("search", search), ("report", report), ("check", check),
                     ("calibrate", calibrate), ("validate", validate)):
    app.command(name)(input_errors_exit_2(module.command))
app.command("models")(catalogs.models)
app.command("gpus")(catalogs.gpus)


def main() -> None:  # pragma: no cover - `python -m sizer`
    sys.exit(app())
