"""Malformed traces give one FieldError naming the file, the line (and key or column) and the
expectation; the bounds of simulator/traces.py hold; well-formed variants still read.

The corpus is tests/bad_inputs/trace/, one file per case; its README's table says which field
each must name.
"""

import csv
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import SchemaUse, traces, with_tags
from simulator.traces import read_csv_trace, read_mooncake
from validation.errors import FieldError

CORPUS = Path(__file__).resolve().parents[1] / "bad_inputs" / "trace"
ROW = re.compile(r"^\| `([^`]+)` \| (.+) \| `([^`]+)` \|$")


def corpus() -> list[tuple[str, str]]:
    rows = [ROW.match(line) for line in (CORPUS / "README.md").read_text().splitlines()]
    return [(m[1], m[3]) for m in rows if m]


CASES = corpus()


def read(path: Path, limit: int | None = None):
    return (read_mooncake if path.suffix == ".jsonl" else read_csv_trace)(path, limit)


def assert_one_line(e: FieldError, path: Path) -> None:
    assert e.file == str(path)
    text = e.one_line()
    assert "\n" not in text and "\r" not in text
    assert len(e.message) <= 250, e.message          # an excerpt of the value, never all of it


def test_the_readme_lists_every_file_and_there_are_enough():
    listed = {name for name, _ in CASES}
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != "README.md"}
    assert listed == on_disk
    assert len(CASES) >= 20
    assert {Path(n).suffix for n in listed} == {".jsonl", ".csv"}


@pytest.mark.parametrize(("name", "field"), CASES, ids=[n for n, _ in CASES])
def test_each_bad_trace_gives_one_field_error_naming_its_field(name, field):
    path = CORPUS / name
    with pytest.raises(FieldError) as info:
        read(path)
    assert info.value.field == field, info.value.one_line()
    assert_one_line(info.value, path)


# -- The bounds, with the constants lowered so that the files stay small.

GOOD = '{"timestamp": %d, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}\n'


def jsonl(tmp_path, n, extra="") -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(GOOD % (100 * i) for i in range(n)) + extra)
    return p


def test_more_requests_than_the_bound_are_refused_unless_a_slice_is_asked_for(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_TRACE_REQUESTS", 3)
    p = jsonl(tmp_path, 5)
    with pytest.raises(FieldError) as info:
        read_mooncake(p)
    assert info.value.field == "line 4" and "3 requests" in info.value.message
    assert len(read_mooncake(p, limit=2)) == 2                 # a slice within the bound reads
    with pytest.raises(FieldError, match="line 4"):
        read_mooncake(p, limit=10)                             # a limit above the bound does not lift it
    assert len(read_mooncake(jsonl(tmp_path, 3, "\n\n"))) == 3  # exactly the bound, trailing blank lines
    c = tmp_path / "t.csv"
    c.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{i},10,10\n" for i in range(5)))
    with pytest.raises(FieldError) as info:
        read_csv_trace(c)
    assert info.value.field == "line 5"
    assert len(read_csv_trace(c, limit=3)) == 3


def test_a_flood_of_blank_lines_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_TRACE_LINES", 10)
    p = jsonl(tmp_path, 1, "\n" * 20)
    with pytest.raises(FieldError) as info:
        read_mooncake(p)
    assert info.value.field == "line 11"


def test_a_line_longer_than_the_bound_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_LINE_BYTES", 200)
    p = jsonl(tmp_path, 2, '{"timestamp": 0, "pad": "' + "x" * 1000 + '"}\n')
    with pytest.raises(FieldError) as info:
        read_mooncake(p)
    assert info.value.field == "line 3" and "longer than 200 bytes" in info.value.message
    assert_one_line(info.value, p)
    c = tmp_path / "t.csv"
    c.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "1" * 300 + ",10,10\n")
    with pytest.raises(FieldError, match="line 2: longer than"):
        read_csv_trace(c)


def test_block_hashes_in_the_whole_trace_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_TRACE_HASH_IDS", 5)
    with pytest.raises(FieldError) as info:
        read_mooncake(jsonl(tmp_path, 4))                      # 2 a line: the third line makes 6
    assert info.value.field == "line 3, hash_ids"


def test_the_bounds_are_what_the_module_states():
    assert traces.MAX_REQUEST_TOKENS == 10_485_760
    assert traces.MAX_TRACE_REQUESTS == 1_000_000
    # a line holds the record of the longest request: one hash per 512-token block, each up to 19 digits
    longest = traces.MAX_REQUEST_TOKENS // traces.MOONCAKE_BLOCK_TOKENS * len(f"{traces.MAX_HASH_ID}, ") + 200
    assert traces.MAX_LINE_BYTES >= longest


# -- Well-formed variants still read.

def test_well_formed_variants_read(tmp_path):
    p = tmp_path / "ok.jsonl"
    # BOM, CRLF, blank lines, no final newline, integral float lengths, no hash_ids, extra keys,
    # negative and out-of-order timestamps (sorted), ints beyond 2^53 as hashes, exactly the token bound
    p.write_bytes(b"\xef\xbb\xbf" + (
        b'{"timestamp": 2000, "input_length": 600.0, "output_length": 20, "hash_ids": [9007199254740993, 1]}\r\n'
        b"\r\n"
        b'{"timestamp": -1000, "input_length": 10485759, "output_length": 1, "extra": {"a": [1]}}\r\n'
        b'{"timestamp": 500.5, "input_length": 1, "output_length": 1, "hash_ids": []}'))
    w = read_mooncake(p)
    assert np.allclose(w.arrival_s, [0.0, 1.5005, 3.0])
    assert w.prompt_tokens.tolist() == [10485759, 1, 600] and w.output_tokens.tolist() == [1, 1, 20]
    assert w.segments == [(), (), (9007199254740993, 1)]
    assert w.unread == ("extra",)               # read and named (sizer says it is not modelled), not used
    c = tmp_path / "ok.csv"
    c.write_bytes(b"\xef\xbb\xbfTIMESTAMP, ContextTokens ,GeneratedTokens,Other\r\n"
                  b"1700000000.25,374,44,x\r\n\r\n1700000001,396.0,109,y")
    w = read_csv_trace(c)
    assert np.allclose(w.arrival_s, [0.0, 0.75]) and w.prompt_tokens.tolist() == [374, 396]
    assert w.unread == ("Other",)
    d = tmp_path / "tz.csv"
    d.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16T18:15:46+01:00,1,1\n2023-11-16 17:15:47Z,1,1\n")
    assert np.allclose(read_csv_trace(d).arrival_s, [0.0, 1.0])


# -- Fuzzing: any value in any field gives a FieldError or a workload, nothing else.

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10)
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=JSON_VALUES, line=st.integers(1, 3))
def test_fuzzed_mooncake_fields(tmp_path, field, value, line):
    records = [json.loads(GOOD % (100 * i)) for i in range(3)]
    records[line - 1][field] = value
    p = tmp_path / "fuzz.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    try:
        w = read_mooncake(p)
    except FieldError as e:
        assert e.field.startswith(f"line {line}"), e.one_line()
        assert_one_line(e, p)
    else:
        assert len(w) == 3 and np.isfinite(w.arrival_s).all() and (w.prompt_tokens >= 1).all()


CELLS = (st.text(max_size=30) | st.integers().map(str) | st.floats().map(repr)
         | st.sampled_from(["", " ", "nan", "-inf", "1e30", "1_000", "0x10", "2023-11-16 18:15:47", '"5"']))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.integers(0, 2), cell=CELLS, row=st.integers(1, 3))
def test_fuzzed_csv_cells(tmp_path, column, cell, row):
    rows = [["2023-11-16 18:15:46", "374", "44"], ["2023-11-16 18:15:47", "396", "109"],
            ["2023-11-16 18:15:48", "10", "1"]]
    rows[row - 1][column] = cell
    p = tmp_path / "fuzz.csv"
    with open(p, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["TIMESTAMP", "ContextTokens", "GeneratedTokens"], *rows])
    try:
        w = read_csv_trace(p)
    except FieldError as e:
        assert_one_line(e, p)
    else:
        assert len(w) == 3 and np.isfinite(w.arrival_s).all() and (w.output_tokens >= 1).all()


def test_only_a_regular_file_is_read(tmp_path):
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)                                        # reading it would block forever
    for path, why in ((fifo, "a FIFO, not a regular file"), (tmp_path, "a directory, not a regular file"),
                      (tmp_path / "missing.csv", "cannot read")):
        with pytest.raises(FieldError, match=why) as info:
            read_mooncake(path) if path.suffix != ".csv" else read_csv_trace(path)
        assert_one_line(info.value, path)


# -- Blank lines and numbers in CSV cells.

def test_whitespace_only_lines_are_skipped_in_both_formats(tmp_path):
    # a line of spaces or tabs is no request: Mooncake skipped it, CSV read it as a row of one cell and refused it
    # ("1 cell(s); expected 3"); before the header, between rows and at the end alike
    c = tmp_path / "ws.csv"
    c.write_text("   \nTIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\n \t \n1,200,20\n   \n")
    w = read_csv_trace(c)
    assert w.prompt_tokens.tolist() == [100, 200] and np.allclose(w.arrival_s, [0.0, 1.0])
    m = tmp_path / "ws.jsonl"
    m.write_text(GOOD % 0 + " \t \n" + GOOD % 1000 + "   \n")
    assert len(read_mooncake(m)) == 2


@pytest.mark.parametrize(("rows", "field", "cell"), [
    ("0,1_000,10\n", "line 2, ContextTokens", "'1_000'"),           # int('1_000') is 1000
    ("0,\uff11\uff10\uff10,10\n", "line 2, ContextTokens", "'１００'"),   # full-width digits: int() reads 100
    ("0,100,\u0663\u0660\u0660\n", "line 2, GeneratedTokens", "'٣٠٠'"),  # Arabic-Indic digits: int() reads 300
    ("0,100,10\n1_0,100,10\n", "line 3, TIMESTAMP", "'1_0'"),        # float('1_0') is 10.0
])
def test_only_ascii_decimal_numbers_are_read_from_csv_cells(tmp_path, rows, field, cell):
    c = tmp_path / "n.csv"
    c.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows, encoding="utf-8")
    with pytest.raises(FieldError) as info:
        read_csv_trace(c)
    assert info.value.field == field and info.value.message.endswith(f"got {cell}"), info.value.one_line()


def test_a_bad_adapter_cell_names_the_empty_cell_not_null(tmp_path):
    # CSV has no null: the expectation said "or null"; an empty Adapter cell is the base model
    c = tmp_path / "a.csv"
    c.write_text("TIMESTAMP,ContextTokens,GeneratedTokens,Adapter\n0,100,10,\n1,100,10,x\n")
    with pytest.raises(FieldError) as info:
        read_csv_trace(c)
    assert info.value.one_line() == (f"{c}: line 3, Adapter: expected an integer in [-1, 2147483647], got 'x'; an "
                                     "empty cell is the base model")


def test_unread_keys_and_columns_are_named_in_order_and_bounded(tmp_path, monkeypatch):
    # every key no request field uses, in the order first seen over all records (a key on line 3 alone too); the
    # used ones (adapter included) are not; time scaling and tags keep the names
    m = tmp_path / "x.jsonl"
    m.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "session_id": "a", "adapter": 0}\n'
                 '{"timestamp": 1, "input_length": 5, "output_length": 1, "priority": 2, "session_id": "a"}\n'
                 '{"timestamp": 2, "input_length": 5, "output_length": 1, "hash_ids": [], "model": "m"}\n')
    w = read_mooncake(m)
    assert w.unread == ("session_id", "priority", "model")
    assert w.time_scaled(2.0).unread == w.unread and with_tags(w, None, SchemaUse(0.5, 2), 0).unread == w.unread
    c = tmp_path / "x.csv"
    c.write_text("TIMESTAMP,HashIds,ContextTokens,GeneratedTokens,Priority,Adapter\n0,1,5,1,high,\n")
    assert read_csv_trace(c).unread == ("HashIds", "Priority")
    # at most MAX_UNREAD_NAMES names are kept, however many keys the lines hold
    monkeypatch.setattr(traces, "MAX_UNREAD_NAMES", 2)
    assert read_mooncake(m).unread == ("session_id", "priority")
