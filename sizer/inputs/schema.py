"""Build typed dataclasses from YAML mappings, with one-line errors naming file and field.

Each scenario section is a dataclass; its type hints are the schema. Unknown keys, wrong
types and values outside a field's `metadata` bounds raise `InputError(file, "a.b.c", ...)`.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal

from sizer.errors import InputError
from sizer.inputs.safe_load import excerpt


def field(default: Any = dataclasses.MISSING, *, ge: float | None = None, gt: float | None = None,
          le: float | None = None, doc: str = "", default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with bounds and a one-line description (docs/scenario.md is generated from it)."""
    meta = {"ge": ge, "gt": gt, "le": le, "doc": doc}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if origin in (list, tuple):
        return "a list"
    if origin is dict or tp is dict or dataclasses.is_dataclass(tp):
        return "a mapping"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))


def convert(tp: Any, value: Any, path: str, file: str | None) -> Any:
    """Check `value` against type `tp`, converting ints to floats where a float is expected."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        real = [a for a in args if a is not type(None)]
        if len(real) == 1:  # Optional[X]: X's own error is the useful one
            return convert(real[0], value, path, file)
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(arg, value, path, file)
            except InputError:
                continue
        raise InputError(file, path, f"expected {_type_name(tp)}, got {excerpt(value)}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise InputError(file, path, f"expected {_type_name(tp)}, got {excerpt(value)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise InputError(file, path, f"expected a list, got {excerpt(value)}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [convert(item_tp, v, f"{path}[{i}]", file) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise InputError(file, path, f"expected a mapping, got {excerpt(value)}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path, file)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise InputError(file, path, f"expected true or false, got {excerpt(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise InputError(file, path, f"expected an integer, got {excerpt(value)}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads `8e9` (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(file, path, f"expected a finite number, got {excerpt(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise InputError(file, path, f"expected a string, got {excerpt(value)}")
        return str(value)
    raise TypeError(f"unsupported schema type {tp!r}")


def _check_bounds(f: dataclasses.Field, value: Any, path: str, file: str | None) -> None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    ge, gt, le = f.metadata.get("ge"), f.metadata.get("gt"), f.metadata.get("le")
    if ge is not None and value < ge:
        raise InputError(file, path, f"expected a value >= {ge}, got {excerpt(value)}")
    if gt is not None and value <= gt:
        raise InputError(file, path, f"expected a value > {gt}, got {excerpt(value)}")
    if le is not None and value > le:
        raise InputError(file, path, f"expected a value <= {le}, got {excerpt(value)}")


def build(cls: type, data: Any, path: str, file: str | None) -> Any:
    """Instantiate dataclass `cls` from a mapping, rejecting unknown keys."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(file, path or "(top level)", f"expected a mapping, got {excerpt(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in data:
        if key not in fields:
            known = ", ".join(fields)
            raise InputError(file, _join(path, excerpt(key, quote=False)), f"unknown key; expected one of: {known}")
    kwargs = {}
    for name, f in fields.items():
        sub = _join(path, name)
        if name in data:
            value = convert(hints[name], data[name], sub, file)
            _check_bounds(f, value, sub, file)
            kwargs[name] = value
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(file, sub, f"missing; expected {_type_name(hints[name])}")
    return cls(**kwargs)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(field path, type, default, doc) rows for every field, nested sections included."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        tp = hints[f.name]
        path = _join(prefix, f.name)
        is_union = typing.get_origin(tp) in (typing.Union, types.UnionType)
        inner = [a for a in typing.get_args(tp) if a is not type(None)] if is_union else [tp]
        if len(inner) == 1 and dataclasses.is_dataclass(inner[0]):
            rows.append((path, "section", "", f.metadata.get("doc", "")))
            rows.extend(describe(inner[0], path))
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "required"
        rows.append((path, _type_name(tp), default, f.metadata.get("doc", "")))
    return rows
