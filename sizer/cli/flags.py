"""Flags checked up front, like the scenario's fields: a value out of range is one line naming the
flag and exit 2, before the command reads a file or does any work."""

from __future__ import annotations

import contextlib
import importlib.util
import math
from pathlib import Path

from sizer.errors import InputError
from sizer.inputs.checkpoint import find_config
from sizer.inputs.hardware import is_profile_path, scenario_hardware
from sizer.inputs.model_spec import CATALOG_DIR
from sizer.inputs.scenario import MAX_REPLICAS, SETTABLE, StatedValueError
from sizer.inputs.variant import Variant
from validation.errors import FieldError, excerpt

# Worker processes for a search: at most 1,024 (each forks a copy of sizer; more than the cores only queue).
MAX_WORKERS = 1024


def check_engine(command: str) -> None:
    """Before any work: torch and triton, which the bundled engine runs on, are installed (looked up, not
    imported: torch takes seconds). They are the `engine` extra, not core dependencies (README)."""
    missing = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(None, None, f"sizer {command} runs the bundled engine, which needs {' and '.join(missing)}: "
                                     "pip install 'sizer[engine]'")


def check_range(value: float | None, flag: str, lo: float, hi: float) -> None:
    """Refuse a numeric flag outside [lo, hi] (or not finite) with one line naming it; None is not given."""
    if value is not None and not ((isinstance(value, int) or math.isfinite(value)) and lo <= value <= hi):
        # an int is finite and compares exactly, however long (math.isfinite converts it to a float: overflow)
        raise InputError(None, flag, f"expected a value from {lo:g} to {hi:g}, got {excerpt(value)}")


def check_choices(values: tuple | None, flag: str, choices: tuple[str, ...]) -> tuple | None:
    """Refuse any value not among `choices`, naming the flag and the choices."""
    for value in values or ():
        if value not in choices:
            raise InputError(None, flag, f"{excerpt(value)} is not one of {', '.join(choices)}")
    return values


def parse_list(text: str | None, cast, flag: str) -> tuple | None:
    """`1,2,4` -> (1, 2, 4); None stays None (the default applies)."""
    if text is None:
        return None
    try:
        items = tuple(cast(x.strip()) for x in text.split(",") if x.strip())
    except ValueError:              # int's: a list of strings cannot fail
        raise InputError(None, flag, f"expected a comma-separated list of whole numbers, got {excerpt(text)}") from None
    if not items:
        raise InputError(None, flag, "expected at least one value")
    return items


def parallel_sizes(text: str | None, flag: str) -> tuple | None:
    """`1,2,4` as parallel degrees: whole numbers from 1 to MAX_REPLICAS."""
    sizes = parse_list(text, int, flag)
    for size in sizes or ():
        check_range(size, flag, 1, MAX_REPLICAS)
    return sizes


def check_model(name: str | None, flag: str = "--model") -> str | None:
    """A model flag, read before any work (a catalog name, a config.json or checkpoint folder path from
    the working directory, a cached Hugging Face id) so that an unknown one is refused naming the
    flag, not the scenario field it sets; a path comes back absolute, so a scenario in another
    folder reads the same file."""
    if name is None:
        return None
    found_as = find_config(name, CATALOG_DIR, None, flag)[1]    # found, not read: resolve reads it once
    return str(Path(name).resolve()) if found_as == "path" else name


def check_gpu(name: str | None, flag: str = "--gpu") -> str | None:
    """An accelerator flag, checked before any work (a profile id or alias, cpu, or a profile file), naming the
    flag; a file's path comes back absolute, so a scenario in another folder reads the same file."""
    if name is not None:
        scenario_hardware(name, None, flag)
        if is_profile_path(name):
            return str(Path(name).resolve())
    return name


@contextlib.contextmanager
def naming_flags(variant: Variant, flags: dict[str, str], scenario_file: str | None):
    """A refusal of a field of the scenario (`scenario_file`, None for one from flags alone) that a
    flag set (from flags alone: that a flag sets) names the flag, not the file: `flags` maps Variant fields to their
    flags (`tensor_parallel_size` -> `--tp`). Any other error passes: another file's, another field's, and the file's
    own value of a field a flag sets, refused as the file is read (`StatedValueError`: a flag replaces no invalid
    value)."""
    set_by = {path: flags[name] for name, path in variant.fields_set().items() if name in flags}
    if scenario_file is None:       # a plan from flags alone: a field's value is a flag's, or its default
        set_by = {SETTABLE[name]: flag for name, flag in flags.items() if name in SETTABLE} | set_by
    try:
        yield
    except FieldError as error:
        if isinstance(error, StatedValueError) or error.file != scenario_file or error.field not in set_by:
            raise
        raise InputError(None, set_by[error.field], f"{error.message} (as {error.field})") from None
