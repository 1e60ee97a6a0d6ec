"""Trace readers: Mooncake JSONL (with 512-token prefix-block hashes) and Azure-style CSV.

Both give a `Workload` with arrivals in seconds from the first request, in arrival order
(a file out of order is sorted; with `limit`, the first `limit` requests of the file are
taken, then sorted). Every row is checked as it is read, against the bounds of
validation/trace_limits.py, before anything is kept; a bad file raises
`FieldError(file, "line N, field", expectation)` quoting at most a short excerpt of the bad value.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from simulator.workload import Workload
from validation.errors import EXCERPT_CHARS, FieldError, excerpt
from validation.input_files import file_kind
from validation.schema import Key, check_key, read_key
from validation.trace_limits import (
    MAX_HASH_ID,
    MAX_LINE_BYTES,
    MAX_REQUEST_TOKENS,
    MAX_TIMESTAMP_S,
    MAX_TRACE_HASH_IDS,
    MAX_TRACE_LINES,
    MAX_TRACE_REQUESTS,
)

MOONCAKE_BLOCK_TOKENS = 512

# -- The fields of a request row, declared once (validation/schema.py checks them). The readers
# -- test the common row against the same declarations inline, for speed; any other row goes
# -- through `read_key`/`check_key`, which refuse what breaks them naming line and field.
_TOKENS = {"ge": 1, "le": MAX_REQUEST_TOKENS, "nullable": False}
MOONCAKE_FIELDS = (
    Key("timestamp", float, ge=-MAX_TIMESTAMP_S * 1e3, le=MAX_TIMESTAMP_S * 1e3, nullable=False,
        doc="arrival, milliseconds"),
    Key("input_length", int, **_TOKENS, doc="prompt tokens"),
    Key("output_length", int, **_TOKENS, doc="output tokens"),
    Key("hash_ids", list[int], ge=0, le=MAX_HASH_ID, doc=f"prefix-block hashes, one a {MOONCAKE_BLOCK_TOKENS}-token "
                                                          "block (optional)"),
)
CSV_FIELDS = (
    Key("TIMESTAMP", float, ge=-MAX_TIMESTAMP_S, le=MAX_TIMESTAMP_S, nullable=False,
        doc="arrival, seconds; or ISO 8601 date-times, when the first row's is one"),
    Key("ContextTokens", int, **_TOKENS, doc="prompt tokens"),
    Key("GeneratedTokens", int, **_TOKENS, doc="output tokens"),
)
CSV_COLUMNS = tuple(k.name for k in CSV_FIELDS)
# Optional, both formats: the LoRA adapter a request asks for (simulator/lora.py), -1 or absent the
# base model; CSV column `Adapter` (an empty cell: the base model), Mooncake key `adapter`.
MAX_ADAPTER_ID = 2 ** 31 - 1
ADAPTER_KEY = Key("adapter", int, ge=-1, le=MAX_ADAPTER_ID, doc="LoRA adapter id, -1 the base model (optional)")
CSV_ADAPTER_COLUMN = "Adapter"
# The keys and columns a reader uses; any other is kept by name (Workload.unread) for sizer to name as not modelled,
# at most MAX_UNREAD_NAMES of them (a file whose every line has keys of its own holds no more than that many names)
MOONCAKE_KEYS = frozenset(k.name for k in MOONCAKE_FIELDS) | {ADAPTER_KEY.name}
CSV_KEYS = frozenset(CSV_COLUMNS) | {CSV_ADAPTER_COLUMN}
MAX_UNREAD_NAMES = 100
# A CSV cell has no null: an empty Adapter cell is the base model, said so in a refusal of any other
CSV_ADAPTER_KEY = Key(CSV_ADAPTER_COLUMN, int, ge=-1, le=MAX_ADAPTER_ID, nullable=False,
                      doc="LoRA adapter id, -1 or empty the base model (optional)")


def _lines(path: str, f) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a binary file, each at most MAX_LINE_BYTES and
    UTF-8 (a leading byte-order mark dropped), at most MAX_TRACE_LINES of them."""
    for lineno in itertools.count(1):
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if lineno > MAX_TRACE_LINES:
            raise FieldError(path, f"line {lineno:,}", f"more than {MAX_TRACE_LINES:,} lines; a trace holds at most "
                             f"{MAX_TRACE_REQUESTS:,} requests (replay a slice of a longer one)")
        if len(raw) > MAX_LINE_BYTES:
            raise FieldError(path, f"line {lineno:,}", f"longer than {MAX_LINE_BYTES:,} bytes; expected one request "
                             f"a line: {excerpt(raw[:EXCERPT_CHARS].decode('utf-8', 'replace'))}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FieldError(path, f"line {lineno:,}", f"not UTF-8 text (byte 0x{raw[e.start]:02x} at byte "
                             f"{e.start + 1} of the line); expected a text trace") from None
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        yield lineno, text


def _open(path: str):
    """The trace file, opened for reading in binary; only a regular file (a FIFO or a device
    could block or never end)."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise FieldError(path, None, f"{file_kind(mode)}, not a regular file; expected a trace file")
        return open(path, "rb")
    except OSError as e:
        raise FieldError(path, None, f"cannot read the trace ({e.strerror or e})") from None


def _request_tokens(path: str, where: str, prompt: int, output: int, output_name: str) -> None:
    """Prompt and output share one context window: together at most MAX_REQUEST_TOKENS."""
    if prompt + output > MAX_REQUEST_TOKENS:
        raise FieldError(path, f"{where}, {output_name}", f"{prompt:,} + {output:,} tokens; a request's prompt and "
                         f"output share one context, expected at most {MAX_REQUEST_TOKENS:,} together")


_INT = {int}


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {excerpt(key)} given twice")
    return record


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
_MOONCAKE_KEYS = tuple(k.name for k in MOONCAKE_FIELDS if not k.nullable)      # hash_ids may be left out


def read_mooncake(path: str | Path, limit: int | None = None) -> Workload:
    """One JSON object a line: timestamp (ms), input_length, output_length, hash_ids (optional),
    adapter (optional: a LoRA adapter id, -1 the base model); any other key is named in `Workload.unread`."""
    path = str(path)
    cap = MAX_TRACE_REQUESTS if limit is None else min(limit, MAX_TRACE_REQUESTS)
    arrival, prompt, output, segments, adapters = [], [], [], [], []
    unread: dict[str, None] = {}        # in the order first seen
    num_hash_ids = 0
    t_key, p_key, o_key, h_key = MOONCAKE_FIELDS
    t_lo, t_hi, least, most, h_lo, h_hi = t_key.ge, t_key.le, p_key.ge, p_key.le, h_key.ge, h_key.le
    with _open(path) as f:
        for lineno, text in _lines(path, f):
            if not text.strip():
                continue
            if len(arrival) >= cap:
                if limit is None or limit > MAX_TRACE_REQUESTS:
                    raise FieldError(path, f"line {lineno:,}", f"more than {MAX_TRACE_REQUESTS:,} requests; a trace "
                                     f"replays at most that many (workload.trace.max_requests or "
                                     f"workload.num_requests cuts a longer one)")
                break
            rec = _json(path, lineno, text)
            # The common record, checked inline against MOONCAKE_FIELDS (input and output lengths
            # share the token bound); any other record goes through _mooncake_record, which refuses
            # what breaks them and normalises what it accepts.
            if type(rec) is dict:
                t, p, o = rec.get("timestamp"), rec.get("input_length"), rec.get("output_length")
                h = rec.get("hash_ids")
                if (type(p) is int and type(o) is int and least <= p and least <= o and p + o <= most
                        and type(t) in _NUMBER and t_lo <= t <= t_hi
                        and type(h) is list and len(h) <= -(-p // MOONCAKE_BLOCK_TOKENS)
                        and (not h or (set(map(type, h)) == _INT and min(h) >= h_lo and max(h) <= h_hi))):
                    t, h = t * 1e-3, tuple(h)
                else:
                    t, p, o, h = _mooncake_record(path, lineno, rec)
            else:
                t, p, o, h = _mooncake_record(path, lineno, rec)
            num_hash_ids += len(h)
            if num_hash_ids > MAX_TRACE_HASH_IDS:
                raise FieldError(path, f"line {lineno:,}, hash_ids", f"more than {MAX_TRACE_HASH_IDS:,} block hashes "
                                 f"in the trace up to here; expected at most that many (replay a slice of it)")
            arrival.append(t)
            prompt.append(p)
            output.append(o)
            segments.append(h)
            if not rec.keys() <= MOONCAKE_KEYS and len(unread) < MAX_UNREAD_NAMES:
                unread.update(dict.fromkeys(k for k in rec if k not in MOONCAKE_KEYS))
            a = rec.get(ADAPTER_KEY.name, -1) if type(rec) is dict else -1
            if not (type(a) is int and -1 <= a <= MAX_ADAPTER_ID):
                a = check_key(ADAPTER_KEY, a, path, f"line {lineno:,}, {ADAPTER_KEY.name}")
            adapters.append(a)
    return _workload(path, arrival, prompt, output, segments, MOONCAKE_BLOCK_TOKENS, adapters,
                     tuple(unread)[:MAX_UNREAD_NAMES])


_NUMBER = (int, float)


def _json(path: str, lineno: int, text: str):
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise FieldError(path, f"line {lineno:,}", "not a JSON object: nested too deeply") from None
    except ValueError as e:
        why = (f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError)
               else str(e).split(":")[0][:2 * EXCERPT_CHARS])        # a duplicate key; a number too long
        raise FieldError(path, f"line {lineno:,}", f"not JSON ({why}): {excerpt(text.rstrip())}") from None


def _mooncake_record(path: str, lineno: int, rec) -> tuple[float, int, int, tuple[int, ...]]:
    """(arrival s, prompt, output, hashes) of one record, or a FieldError naming its line and key."""
    where = f"line {lineno:,}"
    if type(rec) is not dict:
        raise FieldError(path, where, f"expected a JSON object with {', '.join(_MOONCAKE_KEYS)} and "
                         f"hash_ids, not {excerpt(rec)}")
    for key in _MOONCAKE_KEYS:
        if key not in rec:
            raise FieldError(path, f"{where}, {key}", f"missing; expected a Mooncake record with "
                             f"{', '.join(_MOONCAKE_KEYS)} and hash_ids")
    t, p, o, h = (read_key(key, rec, path, f"{where}, ")[0] for key in MOONCAKE_FIELDS)
    _request_tokens(path, where, p, o, "output_length")
    blocks = -(-p // MOONCAKE_BLOCK_TOKENS)
    if h is not None and len(h) > blocks:
        raise FieldError(path, f"{where}, hash_ids", f"{len(h):,} block hashes for a {p:,}-token prompt; expected at "
                         f"most {blocks:,} (one a {MOONCAKE_BLOCK_TOKENS}-token block)")
    return t * 1e-3, p, o, tuple(h or ())


def _plain(text: str) -> bool:
    """Does `text` hold only ASCII, and no digit-group underscore? Python's int() and float() also read '1_000' and
    other scripts' digits ('１００', '٣٠٠'), which are no trace's numbers."""
    return text.isascii() and "_" not in text


def _blank(row: list[str]) -> bool:
    """A CSV line of nothing but whitespace (csv reads it as one cell of spaces), skipped as an empty line is."""
    return not row or (len(row) == 1 and not row[0].strip())


def _number(cell: str):
    """A CSV cell as an int, else a float; the cell itself when it is neither (or not `_plain`)."""
    if not _plain(cell):
        return cell
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return cell


def read_csv_trace(path: str | Path, limit: int | None = None) -> Workload:
    """Header TIMESTAMP,ContextTokens,GeneratedTokens, optionally Adapter (a LoRA adapter id; empty or
    -1: the base model); any other column is named in `Workload.unread`. Timestamps as
    date-times (Azure: `2023-11-16 18:17:03.9799600`) or, when the first row's is a number, as
    seconds. No prompt content, so no prefix sharing."""
    path = str(path)
    cap = MAX_TRACE_REQUESTS if limit is None else min(limit, MAX_TRACE_REQUESTS)
    stamps, prompt, output, lines_of, adapters = [], [], [], [], []
    numeric = None
    with _open(path) as f:
        lines = _lines(path, f)
        reader = csv.reader(text for _, text in lines)
        try:
            header = next((row for row in reader if not _blank(row)), None)
            if header is None:
                raise FieldError(path, "line 1", f"empty; expected a header {','.join(CSV_COLUMNS)} and one row a "
                                 f"request")
            names = [name.strip() for name in header]
            missing = [c for c in CSV_COLUMNS if c not in names]
            if missing:
                raise FieldError(path, f"line {reader.line_num}",
                                 f"missing column(s) {', '.join(missing)}; expected a header "
                                 f"{','.join(CSV_COLUMNS)}, not {excerpt(','.join(header))}")
            twice = next((c for c in CSV_COLUMNS if names.count(c) > 1), None)
            if twice:
                raise FieldError(path, f"line {reader.line_num}", f"column {twice} given twice")
            at = tuple(names.index(c) for c in CSV_COLUMNS)
            ti, pi, oi = at
            ai = names.index(CSV_ADAPTER_COLUMN) if CSV_ADAPTER_COLUMN in names else None
            t_key, p_key, _ = CSV_FIELDS
            t_lo, t_hi, least, most = t_key.ge, t_key.le, p_key.ge, p_key.le
            for row in reader:
                if _blank(row):
                    continue
                lineno = reader.line_num
                if len(prompt) >= cap:
                    if limit is None or limit > MAX_TRACE_REQUESTS:
                        raise FieldError(path, f"line {lineno:,}", f"more than {MAX_TRACE_REQUESTS:,} requests; a "
                                         f"trace replays at most that many (workload.trace.max_requests or "
                                         f"workload.num_requests cuts a longer one)")
                    break
                if len(row) != len(names):
                    raise FieldError(path, f"line {lineno:,}", f"{len(row)} cell(s); expected {len(names)}, one for "
                                     f"each column of the header")
                if numeric is None:
                    numeric = not isinstance(_number(row[ti].strip()), str)
                # The common row, checked inline against CSV_FIELDS (the two lengths share the token
                # bound); any other row goes through _csv_row.
                stamp = row[ti].strip()
                try:
                    if not _plain(row[pi] + row[oi] + stamp):
                        raise ValueError
                    p, o = int(row[pi]), int(row[oi])
                    t = float(stamp) if numeric else stamp
                except ValueError:
                    p = o = 0
                if not (least <= p and least <= o and p + o <= most and (t_lo <= t <= t_hi if numeric else t)):
                    t, p, o = _csv_row(path, lineno, row, at, numeric)
                stamps.append(t)
                prompt.append(p)
                output.append(o)
                lines_of.append(lineno)
                if ai is not None:
                    cell = row[ai].strip()
                    adapters.append(_csv_adapter(path, lineno, cell) if cell else -1)
        except csv.Error as e:
            raise FieldError(path, f"line {reader.line_num:,}", f"not CSV ({e})") from None
    if not prompt:
        raise FieldError(path, f"line {reader.line_num + 1:,}", f"no requests after the header; expected one row a "
                         f"request ({','.join(CSV_COLUMNS)})")
    t = stamps if numeric else _datetimes_s(path, stamps, lines_of)
    # a column with no header name (a pandas index, a trailing comma) is named by its place
    unread = tuple(dict.fromkeys(n or f"{i + 1} (no name)" for i, n in enumerate(names)
                                 if n not in CSV_KEYS))[:MAX_UNREAD_NAMES]
    return _workload(path, t, prompt, output, [()] * len(prompt), 1, adapters, unread)


def _csv_row(path: str, lineno: int, row: list[str], at: tuple[int, int, int], numeric: bool):
    """(timestamp, prompt, output) of one row, or a FieldError naming its line and column."""
    where = f"line {lineno:,}"
    cells = [row[i].strip() for i in at]
    t_key, p_key, o_key = CSV_FIELDS
    if numeric:
        t = check_key(t_key, _number(cells[0]), path, f"{where}, {t_key.name}")
    elif not cells[0]:
        raise FieldError(path, f"{where}, {t_key.name}", "empty; expected a date-time (as on the first row)")
    else:
        t = cells[0]
    p = check_key(p_key, _number(cells[1]), path, f"{where}, {p_key.name}")
    o = check_key(o_key, _number(cells[2]), path, f"{where}, {o_key.name}")
    _request_tokens(path, where, p, o, o_key.name)
    return t, p, o


def _csv_adapter(path: str, lineno: int, cell: str) -> int:
    """An Adapter cell that is not empty: an id from -1 (the base model, as an empty cell is) up."""
    try:
        return check_key(CSV_ADAPTER_KEY, _number(cell), path, f"line {lineno:,}, {CSV_ADAPTER_COLUMN}")
    except FieldError as e:
        raise FieldError(e.file, e.field, f"{e.message}; an empty cell is the base model") from None


def _datetimes_s(path: str, stamps: list[str], lines_of: list[int]) -> np.ndarray:
    """Date-times as seconds from the first; naive ones are taken as UTC, like offset ones."""
    import pandas as pd

    try:
        dt = pd.to_datetime(pd.Series(stamps, dtype=object), format="ISO8601", errors="coerce", utc=True)
    except (ValueError, TypeError) as e:        # coerce leaves few: a format pandas cannot even try
        raise FieldError(path, CSV_COLUMNS[0], f"expected ISO 8601 date-times ({str(e)[:EXCERPT_CHARS]})") from None
    bad = np.flatnonzero(dt.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise FieldError(path, f"line {lines_of[i]:,}, {CSV_COLUMNS[0]}", f"expected an ISO 8601 date-time like "
                         f"2023-11-16 18:15:46.6805900 (as on the first row), not {excerpt(stamps[i])}")
    return (dt - dt.iloc[0]).dt.total_seconds().to_numpy()


def _workload(path: str, arrival, prompt, output, segments, segment_tokens: int, adapters: list[int],
              unread: tuple[str, ...] = ()) -> Workload:
    arrival_s = np.asarray(arrival, float)
    if len(arrival_s) == 0:
        raise FieldError(path, "line 1", "no requests; expected one JSON object a line")
    order = np.argsort(arrival_s, kind="stable")
    arrival_s = arrival_s[order] - arrival_s[order[0]]
    segs = [segments[i] for i in order.tolist()]
    adapter = np.asarray(adapters, np.int64)[order] if any(a >= 0 for a in adapters) else None
    return Workload(arrival_s, np.asarray(prompt, np.int64)[order], np.asarray(output, np.int64)[order],
                    np.zeros(len(arrival_s), np.int64), segs, segment_tokens, adapter, unread=unread)
