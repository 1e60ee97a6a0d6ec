"""Flags checked up front, like the scenario's fields: a value out of range is one line naming the
flag and exit 2, before the command reads a file or does any work."""

from __future__ import annotations

import math

from simulator.errors import excerpt
from sizer.errors import InputError

# Worker processes for a search: at most 1,024 (each forks a copy of sizer; more than the cores only queue).
MAX_WORKERS = 1024


def check_range(value: float | None, flag: str, lo: float, hi: float) -> None:
    """Refuse a numeric flag outside [lo, hi] (or not finite) with one line naming it; None is not given."""
    if value is not None and not (math.isfinite(value) and lo <= value <= hi):
        raise InputError(None, flag, f"expected a value from {lo:g} to {hi:g}, got {excerpt(value)}")


def check_choices(values: tuple | None, flag: str, choices: tuple[str, ...]) -> tuple | None:
    """Refuse any value not among `choices`, naming the flag and the choices."""
    for value in values or ():
        if value not in choices:
            raise InputError(None, flag, f"{excerpt(value)} is not one of {', '.join(choices)}")
    return values
