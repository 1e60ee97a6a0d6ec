"""The `sizer` Typer app: every command registered in one place, bad input turned into one line and exit 2.

Each command lives in its own module (sizer/cli/<command>.py, a `command` function); terminal
rendering is sizer/cli/render.py. The app loads a command's module only when that command
runs (`LazyCommands`), and the code of an input or output kind only when a run has one
(sizer/kinds.py: a gateway document, --emit, --simulate, a trace, a calibrated profile), so a plain
`sizer plan` imports neither the report, search, sweep, check and engine code nor the gateway's, the
simulator's and numpy. These two tables are the only deferred imports of sizer's own code: every
module keeps its imports at the top.
"""

from __future__ import annotations

import functools
import gc
import importlib
import sys

import typer
from typer.core import TyperCommand, TyperGroup

from sizer import __version__ as sizer_version
from sizer.cli.flag_values import PlainCommand, PlainValues
from sizer.inputs.hardware import skipped_profiles
from validation.errors import FieldError

# name -> (module, function): the module is imported when the command runs or its help is shown
COMMANDS = {
    "plan": ("sizer.cli.plan", "command"),
    "simulate": ("sizer.cli.simulate", "command"),
    "compare": ("sizer.cli.compare", "command"),
    "search": ("sizer.cli.search", "command"),
    "sweep": ("sizer.cli.sweep", "command"),
    "report": ("sizer.cli.report", "command"),
    "check": ("sizer.cli.check", "command"),
    "calibrate": ("sizer.cli.calibrate", "command"),
    "import-kernels": ("sizer.cli.import_kernels", "command"),
    "validate": ("sizer.cli.validate", "command"),
    "models": ("sizer.cli.catalogs", "models"),
    "gpus": ("sizer.cli.catalogs", "gpus"),
}


def input_errors_exit_2(command):
    """Wrap a command so that bad input (a FieldError: sizer's InputError, a bad trace, a model the
    engine cannot run) is one line on stderr and exit code 2. Any other exception is a bug and
    keeps its traceback."""
    @functools.wraps(command)
    def guarded(*args, **kwargs):
        if not gc.isenabled():      # main() paused collection for start-up, which is over:
            gc.freeze()             # what it made lives as long as the process; no collection scans it again
            gc.enable()
        try:
            return command(*args, **kwargs)
        except FieldError as error:
            typer.echo(f"error: {error.one_line()}", err=True)
            raise typer.Exit(2) from None
        finally:
            for refusal in skipped_profiles():
                typer.echo(f"warning: {refusal}; skipped (asked for by id it is refused)", err=True)
    return guarded


class LazyCommands(PlainValues, TyperGroup):
    """The commands of COMMANDS, each built from its module on first use. A usage error (an unknown
    option, a value of the wrong type, a missing argument) is one line on stderr and exit code 2, as
    bad input is; running `sizer` alone still shows the help."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.TyperException as error:      # click's ClickException and its usage errors
            if type(error).__name__ == "NoArgsIsHelpError":
                error.show()
                sys.exit(error.exit_code)
            param = getattr(error, "param", None)
            hint = f"{'/'.join(param.opts) or param.name}: " if param is not None else ""
            typer.echo(f"error: {hint}{' '.join(error.format_message().split())}", err=True)
            sys.exit(error.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code or 0)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, name: str) -> TyperCommand | None:
        if name not in COMMANDS:
            return None
        module_name, function = COMMANDS[name]
        single = typer.Typer(add_completion=False)     # completion is the app's, once
        run = input_errors_exit_2(getattr(importlib.import_module(module_name), function))
        single.command(name, cls=PlainCommand)(run)     # its flags read without pydantic (flag_values.py)
        return typer.main.get_command(single)


app = typer.Typer(cls=LazyCommands, no_args_is_help=True)


def print_version(value: bool) -> None:
    if value:
        typer.echo(f"sizer {sizer_version}")
        raise typer.Exit()


@app.callback()
def sizer(version: bool = typer.Option(False, "--version", callback=print_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Capacity planner for LLM inference: memory, parallelism, simulated latency, goodput and cost."""


def main() -> None:  # pragma: no cover - `sizer` and `python -m sizer`
    # No garbage collection while the command's modules load: start-up makes classes, functions and tables
    # that live as long as the process, and each collection would scan them all for nothing. The command
    # starts with them frozen (input_errors_exit_2): together, a third of a plan's CPU time
    # (benchmarks/speed_vs.py)
    gc.disable()
    sys.exit(app())
