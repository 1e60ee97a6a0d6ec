"""The one JSON writer behind every `--json` output (plan, simulate, search, check).

Dataclasses become objects (their fields, recursively), enums their values, tuples and sets
lists, numpy scalars and arrays plain numbers and lists, paths strings. JSON has no NaN or
infinity (Python's json module would print a bare `NaN`, which strict parsers reject), so a
non-finite float becomes null: a latency percentile of a run where nothing finished, for
example, is "not measured". The writer then refuses any non-finite number left over.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from pathlib import PurePath


def jsonable(obj):
    """`obj` as plain JSON values: dict, list, str, int, float (finite), bool or None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return jsonable(obj.value)
    if isinstance(obj, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if type(obj).__module__ == "numpy":     # an array or a scalar: told apart without importing numpy (a plan has none)
        return jsonable(obj.tolist())
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def to_json(obj, indent: int | None = 2) -> str:
    """`obj` as a JSON document; NaN and infinities are null (see the module docstring)."""
    return json.dumps(jsonable(obj), indent=indent, allow_nan=False)
