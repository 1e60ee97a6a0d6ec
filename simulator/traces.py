"""Trace readers: Mooncake JSONL (with 512-token prefix-block hashes) and Azure-style CSV.

Both give a `Workload` with arrivals in seconds from the first request. Bad files raise
`FieldError(file, field, message)`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simulator.errors import FieldError
from simulator.workload import Workload

MOONCAKE_BLOCK_TOKENS = 512
CSV_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def read_mooncake(path: str | Path, limit: int | None = None) -> Workload:
    """One JSON object a line: timestamp (ms), input_length, output_length, hash_ids."""
    arrival, prompt, output, segments = [], [], [], []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if limit is not None and len(arrival) >= limit:
                break
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                arrival.append(float(rec["timestamp"]) / 1000.0)
                prompt.append(int(rec["input_length"]))
                output.append(int(rec["output_length"]))
                segments.append(tuple(int(h) for h in rec.get("hash_ids", ())))
            except (ValueError, KeyError, TypeError) as e:
                raise FieldError(str(path), f"line {lineno}", f"not a Mooncake trace record ({e})") from None
    return _workload(str(path), arrival, prompt, output, segments, MOONCAKE_BLOCK_TOKENS)


def read_csv_trace(path: str | Path, limit: int | None = None) -> Workload:
    """Header TIMESTAMP,ContextTokens,GeneratedTokens; timestamps as date-times (Azure:
    `2023-11-16 18:17:03.9799600`) or as seconds. No prompt content, so no prefix sharing."""
    import pandas as pd

    try:
        df = pd.read_csv(path, nrows=limit)
    except (OSError, ValueError) as e:
        raise FieldError(str(path), None, f"cannot read CSV trace ({e})") from None
    missing = [c for c in CSV_COLUMNS if c not in df.columns]
    if missing:
        raise FieldError(str(path), "header",
                         f"missing column(s) {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}")
    ts = df["TIMESTAMP"]
    try:
        if pd.api.types.is_numeric_dtype(ts):
            t = ts.to_numpy(float)
        else:
            dt = pd.to_datetime(ts, format="ISO8601")
            t = (dt - dt.iloc[0]).dt.total_seconds().to_numpy()
    except (ValueError, TypeError) as e:
        raise FieldError(str(path), "TIMESTAMP", f"not a date-time or a number of seconds ({e})") from None
    n = len(df)
    return _workload(str(path), t.tolist(), df["ContextTokens"].tolist(), df["GeneratedTokens"].tolist(),
                     [()] * n, 1)


def _workload(path: str, arrival, prompt, output, segments, segment_tokens: int) -> Workload:
    arrival_s = np.asarray(arrival, float)
    if len(arrival_s) == 0:
        raise FieldError(path, None, "trace has no requests")
    order = np.argsort(arrival_s, kind="stable")
    arrival_s = arrival_s[order] - arrival_s[order[0]]
    segs = [segments[i] for i in order.tolist()]
    return Workload(arrival_s, np.asarray(prompt, np.int64)[order], np.asarray(output, np.int64)[order],
                    np.zeros(len(arrival_s), np.int64), segs, segment_tokens)
