"""sizer/cli/flag_values.py: plain flags read without pydantic, as Typer's own reader reads them."""

import json
from pathlib import Path

import pytest
import typer
import typer.main
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.flag_values import PlainCommand, plain_value

SCENARIO = str(Path(__file__).resolve().parents[3] / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
SWEEP = Path(__file__).resolve().parents[3] / "scenarios" / "sweeps" / "sweep-llama-8b.yaml"


def one_command(function) -> typer.core.TyperCommand:
    single = typer.Typer(add_completion=False)
    single.command(cls=PlainCommand)(function)
    return typer.main.get_command(single)


def both_readers(param, value):
    """(plain, Typer's): what each reader makes of `value` (its type and repr: nan is nan, 3 is not 3.0), or
    "refused" where it raised Typer's BadParameter."""
    def read(reader):
        try:
            got = reader.coerce(value, param=param, ctx=None)
        except typer.BadParameter:
            return "refused"
        if isinstance(got, Path):      # the plain reader's GivenPath is a Path that also remembers a trailing "/"
            return "Path", str(got)
        return type(got).__name__, repr(got)
    return read(plain_value(param)), read(build_runtime_param(param.type_descriptor))


def test_plain_values_read_as_typer_reads_them():
    def command(n: int | None = typer.Option(None), x: float = typer.Option(1.0), s: str = typer.Option("a"),
                b: bool | None = typer.Option(None, "--b"), p: Path | None = typer.Option(None)):
        pass

    params = {p.name: p for p in one_command(command).params}
    cases = {"n": ["3", " 3 ", "-2", "+3", "1_000", "3.0", "3.5", "1e3", "x", "", "\uff13", None],
             "x": ["1.5", " 2 ", "1e3", "-inf", "nan", "1_0.5", "0x10", "one", "", None],
             "s": ["plain", "", " spaced ", None],
             "b": ["true", "False", " yes ", "0", "off", "maybe", "", None, True],
             "p": ["a/b", "", "~", str(Path(__file__)), None]}
    # Where the two differ, on purpose: pydantic takes "3.0" as the int 3 (the plain reader refuses a fraction,
    # as Python's int() does)
    differ = {("n", "3.0")}
    for name, values in cases.items():
        for value in values:
            plain, typers = both_readers(params[name], value)
            assert (plain == typers) != ((name, value) in differ), (name, value, plain, typers)


def test_a_path_remembers_a_trailing_separator():
    # pathlib reads "out/" as "out": a file destination written so names a folder (sizer/outputs/destination.py)
    def command(p: Path | None = typer.Option(None)):
        pass

    reader = plain_value(one_command(command).params[0])
    given = {text: reader.coerce(text, param=None, ctx=None) for text in ("out/", "out", "a/b/")}
    assert [(str(p), p.names_folder) for p in given.values()] == [("out", True), ("out", False), ("a/b", True)]


def test_a_min_and_max_bound_the_value():
    def command(n: int = typer.Option(1, min=1, max=8)):
        pass

    (param,) = one_command(command).params
    read = {value: both_readers(param, value) for value in ("0", "1", "8", "9", 0, 4)}
    assert all(plain == typers for plain, typers in read.values()), read
    # the bounds are inclusive, as pydantic's ge and le
    assert [read[v][0] for v in ("0", "1", "8", "9")] == ["refused", ("int", "1"), ("int", "8"), "refused"]


def test_nan_is_outside_any_bound():
    # NaN compares false both ways: a float flag with bounds (check's --budget, --kv-share) must refuse it as
    # pydantic's ge/le did, not pass it on to a traceback
    def command(share: float = typer.Option(0.5, min=0.0, max=1.0)):
        pass

    (param,) = one_command(command).params
    plain, typers = both_readers(param, "nan")
    assert plain == typers == "refused"


def test_what_is_not_plain_stays_typers():
    def command(many: list[str] | None = typer.Option(None), checked: Path = typer.Option(Path("."), exists=True),
                parsed: str = typer.Option("a", parser=str.upper), clamped: int = typer.Option(1, min=1, clamp=True)):
        pass

    assert [plain_value(p) for p in one_command(command).params] == [None] * 4


def test_a_bad_plain_value_is_one_line_naming_the_flag():
    result = CliRunner().invoke(app, ["plan", SCENARIO, "--max-model-len", "4k"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --max-model-len: Invalid value for '--max-model-len': expected an " \
                                    "integer, got '4k'"
    # calibrate's --tp has min=1 (Typer's bound, read by the plain reader; calibrate itself never runs)
    result = CliRunner().invoke(app, ["calibrate", "--tp", "0"])
    assert result.exit_code == 2 and result.stderr.strip().startswith("error: --tp: ")
    assert "expected at least 1, got 0" in result.stderr


@pytest.mark.parametrize("value", ["2", "2.5"])
def test_a_plain_value_reaches_the_command(value):
    # --rate is a float flag: 2 and 2.5 requests/s reach the plan as numbers
    result = CliRunner().invoke(app, ["plan", SCENARIO, "--rate", value, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["capacity"]["arrival_rate_per_s"] == float(value)


def test_an_integer_too_long_for_a_float_is_refused_in_one_line():
    # the fuzz test's example: `sweep --workers=9...9` (3,000 digits) read as an int, then check_range's
    # math.isfinite converted it to a float: OverflowError, a traceback; the range check compares ints exactly
    result = CliRunner().invoke(app, ["sweep", str(SWEEP), "--results", "/tmp/never.parquet", "--workers", "9" * 3000])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --workers: expected a value from 1 to 1024, got 999")
    assert len(result.stderr) < 300 and result.stderr.count("\n") == 1
