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

from simulator.errors import excerpt
from sizer.errors import InputError


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


# ---- keys of a foreign JSON document (a model's config.json) -------------------------------
#
# The scenario is sizer's own format, so its schema is a dataclass and unknown keys are refused.
# A config.json is someone else's: sizer reads a few of its keys (under several spellings), ignores
# the rest, and treats a null as "not stated" where Hugging Face does. `Key` declares one such key.


@dataclasses.dataclass(frozen=True)
class Key:
    """One key sizer reads from a foreign JSON mapping: its type, bounds and the other spellings
    (aliases) that mean the same thing. The first spelling present with a non-null value wins."""
    name: str
    tp: Any                              # as `convert` takes it: int, float, bool, str, list[str], dict
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    aliases: tuple[str, ...] = ()
    nullable: bool = True                # null means "not stated" (the default applies); else it is an error
    default: Any = None
    doc: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


def read_key(spec: Key, data: dict, file: str | None, prefix: str = "") -> tuple[Any, str]:
    """(value, the key it was read from) of `spec` in mapping `data`, checked against the spec's type
    and bounds; the spec's default (and its name) when no spelling is present. Raises InputError
    naming `prefix` + the key as written."""
    for key in spec.keys:
        if key not in data:
            continue
        value, path = data[key], prefix + key
        if value is None:
            if spec.nullable:
                continue
            raise InputError(file, path, f"expected {_expectation(spec)}, got null")
        if spec.tp is int and isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)  # `8.0` for 8 in a hand-edited config; `convert` says the same for YAML
        try:
            if not _json_kind_ok(spec.tp, value):  # JSON has real types: "1e-5" is text, not a number
                raise InputError(file, path, "")
            value = convert(spec.tp, value, path, file)
        except InputError:
            raise InputError(file, path, f"expected {_expectation(spec)}, got {excerpt(value)}") from None
        for bound, ok in ((spec.ge, lambda v, b: v >= b), (spec.gt, lambda v, b: v > b),
                          (spec.le, lambda v, b: v <= b)):
            if bound is not None and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and not ok(value, bound):
                raise InputError(file, path, f"expected {_expectation(spec)}, got {excerpt(value)}")
        return value, key
    return spec.default, spec.name


def _json_kind_ok(tp: Any, value: Any) -> bool:
    if tp is str:
        return isinstance(value, str)
    if tp in (int, float):
        return not isinstance(value, str)
    if typing.get_origin(tp) in (list, tuple):
        (item, *_) = typing.get_args(tp) or (Any,)
        return not isinstance(value, list) or all(_json_kind_ok(item, v) for v in value)
    return True


def _expectation(spec: Key) -> str:
    """`an integer in [1, 1000]`, `a number > 0`, `a list of strings`: what the key must hold."""
    if spec.tp is int or spec.tp is float:
        text = _type_name(spec.tp)
        if spec.ge is not None and spec.le is not None:
            return f"{text} in [{_num(spec.ge)}, {_num(spec.le)}]"
        bounds = " and ".join(f"{op} {_num(b)}" for op, b in ((">=", spec.ge), (">", spec.gt), ("<=", spec.le))
                              if b is not None)
        text = f"{text} {bounds}" if bounds else text
    elif typing.get_origin(spec.tp) in (list, tuple):
        (item,) = typing.get_args(spec.tp) or (Any,)
        text = "a list" if item is Any else f"a list of {_type_name(item).split(' ', 1)[1]}s"
    elif spec.tp is dict:
        text = "a JSON object"
    else:
        text = _type_name(spec.tp)
    return text + (" or null" if spec.nullable else "")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"
