"""The one validation layer: every input's fields declared with their types and bounds, checked
with one-line errors naming the file, the field path and what was expected.

Two ways to declare a field, one checker behind both:

- a dataclass whose type hints are the schema and whose `field(ge=, gt=, le=, doc=)` metadata are
  the bounds, built from a mapping by `build` (unknown keys refused): sizer's own formats (the
  scenario's sections, a manifest's `sizer:` block, a calibrated profile's `profile.yaml`);
- a `Key`, one key read from someone else's document by `read_key` (other keys ignored, a null
  read as "not stated"): a model's config.json, a manifest's Kubernetes fields and vLLM flags,
  a trace's rows. `key_for` makes one from a dataclass field, so a vLLM flag is checked against
  the very declaration of the scenario field it sets.

Every refusal is a `FieldError(file, "a.b.c", "expected ..., got <excerpt>")`. Keys are quoted
through `excerpt` (`join`), so even a key with a control character in it stays on one line.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from decimal import Decimal
from typing import Any, Literal

from validation.errors import FieldError, excerpt


def field(default: Any = dataclasses.MISSING, *, ge: float | None = None, gt: float | None = None,
          le: float | None = None, doc: str = "", default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with bounds (applied to the value, or to each number of a list or mapping)
    and a one-line description (docs/scenario.md is generated from it)."""
    meta = {"ge": ge, "gt": gt, "le": le, "doc": doc}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def join(path: str, key: Any) -> str:
    """`path.key`, the key as an error message may show it (an excerpt, control characters escaped)."""
    name = excerpt(key, quote=False)
    return f"{path}.{name}" if path else name


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if origin in (list, tuple) or tp is list:
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
        errors = []
        for arg in real:
            try:
                return convert(arg, value, path, file)
            except FieldError as error:
                errors.append((arg, error))
        # one alternative of the value's own shape (a list for `list[int] | Range`, a mapping for the Range): what
        # is wrong inside it is the useful error, not the shapes the field takes
        shaped = [error for arg, error in errors if _same_shape(arg, value)]
        if len(shaped) == 1:
            raise shaped[0]
        raise FieldError(file, path, f"expected {_type_name(tp)}, got {excerpt(value)}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise FieldError(file, path, f"expected {_type_name(tp)}, got {excerpt(value)}")
        return value
    if origin in (list, tuple) or tp is list:
        if not isinstance(value, list):
            raise FieldError(file, path, f"expected a list, got {excerpt(value)}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [convert(item_tp, v, f"{path}[{i}]", file) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise FieldError(file, path, f"expected a mapping, got {excerpt(value)}")
        if not typing.get_args(tp):
            return dict(value)
        key_tp, value_tp = typing.get_args(tp)
        return {convert(key_tp, k, join(path, k), file): convert(value_tp, v, join(path, k), file)
                for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path, file)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise FieldError(file, path, f"expected true or false, got {excerpt(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, str) and (whole := _whole_number(value)) is not None:
                return whole
            raise FieldError(file, path, f"expected an integer, got {excerpt(value)}")
        return value
    if tp is float:
        # YAML 1.1 reads `8e9` (and `1.5e3`: no sign in the exponent) as a string; any other text is no number
        if isinstance(value, str) and _EXPONENT_FORM.fullmatch(value):
            value = float(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:   # past float64 (10^400)
                value = math.inf
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise FieldError(file, path, f"expected a finite number, got {excerpt(value)}")
        return float(value)
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            try:
                return str(value)
            except ValueError:      # an int past Python's 4,300 printable digits
                pass
        raise FieldError(file, path, f"expected a string, got {excerpt(value)}")
    raise TypeError(f"unsupported schema type {tp!r}")


# A number in exponent form, which YAML 1.1 reads as a string unless it has a dot and a signed exponent (`8e9`,
# `4e1`, `1.5e1`); `convert` reads it as the number it writes, for a float field and, when whole, for an integer one.
_EXPONENT_FORM = re.compile(r"[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+")


def _whole_number(text: str) -> int | None:
    """The integer `text` writes in exponent form (`4e1`: 40, exactly), or None: another form, a fraction, or a
    magnitude of 2^63 or more (no field takes one)."""
    text = text.strip()
    if not _EXPONENT_FORM.fullmatch(text):
        return None
    number = Decimal(text.replace("_", ""))
    if number.adjusted() > 18 or abs(number) >= 2 ** 63 or number != number.to_integral_value():
        return None         # (adjusted: the power of ten of its first digit; 2^63 is 9.2e18)
    return int(number)


def _same_shape(tp: Any, value: Any) -> bool:
    """`value` is the container `tp` is: a list for a list or tuple type, a mapping for a dict type or a dataclass."""
    origin = typing.get_origin(tp)
    if origin in (list, tuple) or tp is list:
        return isinstance(value, list)
    return isinstance(value, dict) and (origin is dict or tp is dict or dataclasses.is_dataclass(tp))


def _numbers(value: Any, path: str) -> list[tuple[str, Any]]:
    """(path, number) of `value`, or of each item of a list or mapping: what bounds apply to."""
    if isinstance(value, (list, tuple)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        items = [(join(path, k), v) for k, v in value.items()]
    else:
        items = [(path, value)]
    return [(p, v) for p, v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _outside(value: float, ge: float | None, gt: float | None, le: float | None) -> str | None:
    """The bound `value` breaks, as "value >= 1", or None."""
    if ge is not None and value < ge:
        return f"a value >= {ge}"
    if gt is not None and value <= gt:
        return f"a value > {gt}"
    if le is not None and value > le:
        return f"a value <= {le}"
    return None


def _check_bounds(f: dataclasses.Field, value: Any, path: str, file: str | None) -> None:
    ge, gt, le = f.metadata.get("ge"), f.metadata.get("gt"), f.metadata.get("le")
    if ge is None and gt is None and le is None:
        return
    for where, number in _numbers(value, path):
        broken = _outside(number, ge, gt, le)
        if broken:
            raise FieldError(file, where, f"expected {broken}, got {excerpt(number)}")


def build(cls: type, data: Any, path: str, file: str | None) -> Any:
    """Instantiate dataclass `cls` from a mapping, rejecting unknown keys."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FieldError(file, path or "(top level)", f"expected a mapping, got {excerpt(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in data:
        if key not in fields:
            known = ", ".join(fields)
            raise FieldError(file, join(path, key), f"unknown key; expected one of: {known}")
    kwargs = {}
    for name, f in fields.items():
        sub = join(path, name)
        if name in data:
            kwargs[name] = _checked(f, hints[name], data[name], sub, file)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise FieldError(file, sub, f"missing; expected {_type_name(hints[name])}")
    return cls(**kwargs)


def _checked(f: dataclasses.Field, tp: Any, value: Any, path: str, file: str | None) -> Any:
    value = convert(tp, value, path, file)
    _check_bounds(f, value, path, file)
    return value


def field_value(cls: type, name: str, value: Any, path: str, file: str | None) -> Any:
    """`value` checked (and converted) as field `name` of dataclass `cls` declares it, as `build` checks the same
    key of a mapping: a value set on a built object (a CLI flag's) is refused with the same one line, at `path`."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return _checked(f, typing.get_type_hints(cls)[name], value, path, file)


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(field path, type, default, doc) rows for every field, nested sections included."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        tp = hints[f.name]
        path = join(prefix, f.name)
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


# ---- keys of a foreign document (a model's config.json, a manifest, a trace row) ----------------
#
# The scenario is sizer's own format, so its schema is a dataclass and unknown keys are refused.
# A config.json is someone else's: sizer reads a few of its keys (under several spellings), ignores
# the rest, and treats a null as "not stated" where Hugging Face does. `Key` declares one such key.


@dataclasses.dataclass(frozen=True)
class Key:
    """One key sizer reads from a foreign mapping: its type, bounds (on the value, or on each number
    of a list) and the other spellings (aliases) that mean the same thing. The first spelling present
    with a non-null value wins."""
    name: str
    tp: Any                              # as `convert` takes it: int, float, bool, str, list, list[str], dict
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


def key_for(cls: type, name: str, key: str | None = None) -> Key:
    """The `Key` of dataclass field `name` (its type without None, its bounds; a null is an error),
    read under the spelling `key` (default the field's name): a value from a foreign document that
    sets that field is checked against the field's own declaration."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    tp = typing.get_type_hints(cls)[name]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (tp,) = [a for a in typing.get_args(tp) if a is not type(None)]
    return Key(key or name, tp, f.metadata.get("ge"), f.metadata.get("gt"), f.metadata.get("le"),
               nullable=False, doc=f.metadata.get("doc", ""))


def read_key(spec: Key, data: dict, file: str | None, prefix: str = "") -> tuple[Any, str]:
    """(value, the key it was read from) of `spec` in mapping `data`, checked against the spec's type
    and bounds; the spec's default (and its name) when no spelling is present. Raises FieldError
    naming `prefix` + the key as written."""
    for key in spec.keys:
        if key not in data:
            continue
        value = data[key]
        if value is None and spec.nullable:
            continue
        return check_key(spec, value, file, prefix + key), key
    return spec.default, spec.name


def check_key(spec: Key, value: Any, file: str | None, path: str) -> Any:
    """`value` checked against `spec`'s type and bounds (a null refused), or a FieldError at `path`."""
    if value is None:
        raise FieldError(file, path, f"expected {_expectation(spec)}, got null")
    if spec.tp is int and isinstance(value, float) and value.is_integer() and math.isfinite(value):
        value = int(value)  # `8.0` for 8 in a hand-edited config; `convert` says the same for YAML
    try:
        if not _json_kind_ok(spec.tp, value):  # JSON has real types: "1e-5" is text, not a number
            raise FieldError(file, path, "")
        value = convert(spec.tp, value, path, file)
    except FieldError:
        raise FieldError(file, path, f"expected {_expectation(spec)}, got {excerpt(value)}") from None
    for _, number in _numbers(value, path):
        if _outside(number, spec.ge, spec.gt, spec.le):
            bad = value if number is value else number
            raise FieldError(file, path, f"expected {_expectation(spec)}, got {excerpt(bad)}")
    return value


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
    if typing.get_origin(spec.tp) in (typing.Union, types.UnionType):     # each form with its bounds
        forms = [a for a in typing.get_args(spec.tp) if a is not type(None)]
        text = " or ".join(_expectation(dataclasses.replace(spec, tp=form, nullable=False)) for form in forms)
    elif spec.tp is int or spec.tp is float:
        text = _type_name(spec.tp) + _bounds_text(spec)
    elif typing.get_origin(spec.tp) in (list, tuple) or spec.tp is list:
        (item, *_) = typing.get_args(spec.tp) or (Any,)
        text = "a list" if item is Any else f"a list of {_type_name(item).split(' ', 1)[1]}s" + _bounds_text(spec)
    elif spec.tp is dict:
        text = "a mapping"
    else:
        text = _type_name(spec.tp)
    return text + (" or null" if spec.nullable else "")


def _bounds_text(spec: Key) -> str:
    if spec.ge is not None and spec.le is not None:
        return f" in [{_num(spec.ge)}, {_num(spec.le)}]"
    bounds = " and ".join(f"{op} {_num(b)}" for op, b in ((">=", spec.ge), (">", spec.gt), ("<=", spec.le))
                          if b is not None)
    return f" {bounds}" if bounds else ""


def _num(x: float) -> str:
    """A bound as a reader takes it in: 10485760 in full, 1e+14 and 9.22337e+18 (2^63 - 1) short."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e12 else f"{x:g}"
