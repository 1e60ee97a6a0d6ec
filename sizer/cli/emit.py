"""--emit and --emit-to: the recommended configuration as a `vllm serve` command, a Kubernetes manifest, an
`sglang.launch_server` command, a `llama-server` command or an Ollama Modelfile (sizer/outputs/emit.py),
checked before the work and written after it. `sizer plan` loads this module only when given --emit or
--emit-to (sizer/cli/app.py, `kind`); search and report import it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from sizer.cli.flags import check_choices
from sizer.errors import InputError
from sizer.outputs.destination import check_destination, write_text
from sizer.outputs.emit import FORMATS, MEMORY_ONLY_NOTE, ServingConfig, emit, serving_config
from sizer.sizing.plan import Plan
from sizer.sizing.resolve import Resolved


def check_emit(fmt: str | None, emit_to: Path | None, as_json: bool = False,
               reads: tuple[str | Path | None, ...] = (), others: dict[str, Path | None] | None = None) -> None:
    """--emit and --emit-to, checked before the work (`reads`: the files the command reads, never written;
    `others`: the command's other outputs by flag, never the same file)."""
    if fmt is None:
        if emit_to is not None:
            raise InputError(str(emit_to), "--emit-to", f"needs --emit ({', '.join(FORMATS)})")
        return
    check_choices((fmt,), "--emit", FORMATS)
    if emit_to is not None:
        check_destination(emit_to, "--emit-to", reads, others)
    elif as_json:
        raise InputError(None, "--emit", "--json and --emit both print to stdout; write the configuration "
                                         "with --emit-to PATH")


def emitted(fmt: str | None, config: Callable[[], ServingConfig]) -> str | None:
    """--emit's text, made before anything is printed: a configuration that cannot be emitted is one line alone."""
    return None if fmt is None else emit(fmt, config())


def plan_emitted(fmt: str | None, resolved: Resolved, plan: Plan) -> str | None:
    """--emit's text for a plan (its deployment, cost and verdict). Without a simulated answer (and no
    replicas stated) the replica count is memory-only: a comment in the text and a line on stderr say so."""
    return emitted(fmt, lambda: serving_config(resolved, plan.cost, plan.verdict, memory_only(resolved, plan)))


def memory_only(resolved: Resolved, plan: Plan) -> bool:
    """A plan without a simulated answer whose scenario states no replicas: its count is for memory alone."""
    return plan.simulation is None and not resolved.deployment.replicas


def note_memory_only(resolved: Resolved, plan: Plan) -> None:
    """The stderr line beside the emitted comment, after the plan."""
    if memory_only(resolved, plan):
        typer.echo("note: " + MEMORY_ONLY_NOTE.format(replicas=plan.cost.replicas if plan.cost else 1), err=True)
    if resolved.workload.schedule is not None:
        typer.echo("note: workload.schedule and autoscaling are not emitted: the file holds a fixed replica count "
                   "(no HorizontalPodAutoscaler or KEDA object); `plan --simulate` gives the day's replicas",
                   err=True)


def write_emitted(text: str | None, emit_to: Path | None) -> None:
    if text is None:
        return
    if emit_to is None:
        typer.echo(text, nl=False)
    else:
        write_text(emit_to, "--emit-to", text)
        typer.echo(f"wrote {emit_to}")
