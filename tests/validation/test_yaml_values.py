"""How the validation leaf reads and quotes YAML's own kinds of value: a number in exponent form in a whole-number
field, YAML 1.1's base-60 numbers, and dates, each as the user wrote it (validation/schema.py, safe_yaml.py,
errors.py)."""

from __future__ import annotations

import datetime

import pytest

from validation.errors import FieldError, excerpt
from validation.safe_yaml import loads_yaml
from validation.schema import convert


@pytest.mark.parametrize(("text", "number"), [("4e1", 40), ("8e9", 8_000_000_000), ("1.5e1", 15), ("4E+1", 40),
                                              ("1_0e1", 100)])
def test_a_whole_number_in_exponent_form_is_an_integer(text, number):
    # YAML 1.1 reads `4e1` (no dot) as text; docs/scenario.md promises numbers like 8e9 are read as numbers
    assert loads_yaml(f"n: {text}", "f.yaml")["n"] == text
    assert convert(int, text, "n", "f.yaml") == number


@pytest.mark.parametrize("text", ["1.25e1", "1e30", "1e999999999", "40", "4 0", "0x10"])
def test_anything_else_is_no_integer(text):
    # a fraction (12.5); 10^30, past any integer field (2^63); the text "40" (quoted in YAML: not a number to it)
    with pytest.raises(FieldError, match=f"n: expected an integer, got '{text}'"):
        convert(int, text, "n", "f.yaml")


def test_a_base_60_number_is_read_as_the_text_it_is():
    # YAML 1.1 reads 1:00 as 60 and 1:30.5 as 90.5; YAML 1.2 (and Kubernetes) read text, and so does sizer, so
    # that a refusal shows the value as written
    assert loads_yaml("a: 1:00\nb: 1:30.5\nc: 100\nd: !!int 1:00", "f.yaml") == {"a": "1:00", "b": "1:30.5",
                                                                               "c": 100, "d": 60}
    with pytest.raises(FieldError, match="tp: expected an integer, got '1:00'"):
        convert(int, loads_yaml("tp: 1:00", "f.yaml")["tp"], "tp", "f.yaml")


def test_a_leading_zero_octal_is_read_as_the_text_it_is():
    # YAML 1.1 reads 020000 as octal 8,192, YAML 1.2 as 20,000: the text, which a number field then refuses; a plain
    # 0, a hex 0x1F and a decimal 0.5 are read as before
    assert loads_yaml("a: 020000\nb: 0\nc: 0x1F\nd: 0.5\ne: -017", "f.yaml") == {
        "a": "020000", "b": 0, "c": 31, "d": 0.5, "e": "-017"}
    with pytest.raises(FieldError, match="max_model_len: expected an integer, got '020000'"):
        convert(int, loads_yaml("max_model_len: 020000", "f.yaml")["max_model_len"], "max_model_len", "f.yaml")


def test_a_date_is_quoted_as_yaml_read_it():
    assert loads_yaml("seed: 2024-01-01", "f.yaml")["seed"] == datetime.date(2024, 1, 1)
    assert excerpt(datetime.date(2024, 1, 1)) == "2024-01-01 (a date, as YAML reads it)"
    with pytest.raises(FieldError, match=r"seed: expected an integer, got 2024-01-01 \(a date, as YAML reads it\)"):
        convert(int, datetime.date(2024, 1, 1), "seed", "f.yaml")
