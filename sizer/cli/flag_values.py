"""A command's flag values read without pydantic, for the plain types sizer's flags have.

Typer (0.29) turns each command-line value into its parameter's type through a pydantic TypeAdapter,
built for every parameter of the command that runs (one given no value too): importing pydantic and
building the adapters of `plan`'s 25 parameters was a fifth of a plan's CPU time (docs/simulator.md,
Speed). Nearly every sizer flag is a str, int, float, bool or path (optional or not; an int or float
at most with a min and max), which need no pydantic: the command classes below give such a parameter
`PlainValue`, and leave any other (a list, a parser, a path with checks) to Typer. A Typer without the
per-parameter reader this replaces (its private `_runtime_param`) keeps its own for every parameter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

from validation.errors import excerpt
from validation.input_files import given_path

PLAIN = {str: "a string", int: "an integer", float: "a number", bool: "true or false", Path: "a path"}
# a bool's words, as Typer (pydantic) reads them from an environment variable (a flag's value is a bool already);
# Typer reads an empty one as False
BOOL_WORDS = {"": False, "1": True, "on": True, "t": True, "true": True, "y": True, "yes": True,
              "0": False, "off": False, "f": False, "false": False, "n": False, "no": False}
# Typer's path checks at their defaults: a path with any other is Typer's to check
PATH_DEFAULTS = {"exists": False, "file_okay": True, "dir_okay": True, "writable": False, "resolve_path": False,
                 "allow_dash": False, "path_type": None}


@dataclass(frozen=True)
class PlainValue:
    """One parameter's value: a str as given; an int or float as Python reads ASCII digits, within the
    parameter's min and max; a bool as it is or one of BOOL_WORDS; a path as pathlib's Path, readable
    where it exists (Typer's check). None (no value, no default) stays None. A bad value is Typer's
    BadParameter, which the app prints as one line naming the flag."""
    annotation: type
    min: float | None
    max: float | None

    def coerce(self, value: object, param: TyperOption | TyperArgument, ctx: typer.Context) -> object:
        if value is None:
            return None
        if isinstance(value, str) and self.annotation in (int, float, bool):
            try:
                if not value.isascii():
                    raise ValueError(value)
                value = BOOL_WORDS[value.strip().lower()] if self.annotation is bool else self.annotation(value)
            except (ValueError, KeyError):
                expected = f"expected {PLAIN[self.annotation]}, got {excerpt(value)}"
                raise typer.BadParameter(expected, ctx, param) from None
        elif isinstance(value, str) and self.annotation is Path:
            value = given_path(value)
        elif not isinstance(value, self.annotation):
            value = self.annotation(value)
        if self.min is not None and not value >= self.min:   # NaN is no number at least min
            raise typer.BadParameter(f"expected at least {self.min}, got {excerpt(value, quote=False)}", ctx, param)
        if self.max is not None and not value <= self.max:
            raise typer.BadParameter(f"expected at most {self.max}, got {excerpt(value, quote=False)}", ctx, param)
        if isinstance(value, Path) and os.path.exists(value) and not os.access(value, os.R_OK):
            raise typer.BadParameter(f"expected a readable path, got {excerpt(str(value))}", ctx, param)
        return value


def plain_value(param: TyperOption | TyperArgument) -> PlainValue | None:
    """The reader of a parameter of a plain type, else None (Typer reads it)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or descriptor.annotation not in PLAIN or param.multiple or param.nargs != 1:
        return None
    info = descriptor.parameter_info
    if info.parser is not None or info.clamp or descriptor.file_annotation is not None:
        return None
    if descriptor.annotation is Path and any(getattr(info, name) != default for name, default in PATH_DEFAULTS.items()):
        return None
    return PlainValue(descriptor.annotation, info.min, info.max)


class PlainValues:
    """For a Typer command class, first among its bases: its parameters (the --help option Typer adds as it
    parses too) each read by its PlainValue, if it is plain and Typer has not built its own reader yet."""

    def get_params(self, ctx: typer.Context) -> list:
        params = super().get_params(ctx)
        for param in params:
            reader = plain_value(param)
            if reader is not None and getattr(param, "_runtime_param", False) is None:
                param._runtime_param = reader
        return params


class PlainCommand(PlainValues, TyperCommand):
    """A Typer command whose plain parameters are read without pydantic."""
