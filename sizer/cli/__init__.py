"""The command line: the Typer app (app.py), one module per command, terminal rendering (render.py)."""

from sizer.cli.app import app, main

__all__ = ["app", "main"]
