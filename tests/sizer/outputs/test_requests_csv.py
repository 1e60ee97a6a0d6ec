"""`--requests-csv` written a chunk of requests at a time (sizer/outputs/destination.py `frames_to_csv`): the file is
the one-frame CSV, byte for byte, and no frame of every request is built."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

import simulator.records as records
from sizer.cli import gateway as gateway_cli
from sizer.cli import simulate as simulate_cli
from sizer.cli.app import app
from sizer.inputs.gateway import load_gateway
from sizer.outputs.destination import frame_to_csv, frames_to_csv
from sizer.sizing.gateway import resolve_gateway, run_gateway

ROOT = Path(__file__).resolve().parents[3]
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
RESIDENCY = ROOT / "scenarios" / "gateway-residency.yaml"


def test_frames_written_one_by_one_are_the_one_frames_csv(tmp_path):
    # text cells a spreadsheet would evaluate get an apostrophe in every chunk; NaN, booleans, integers and floats
    # are written as the one frame writes them, whatever the chunk (one chunk all NaN, one with no text)
    whole = pd.DataFrame({"id": np.arange(10), "ok": [True, False] * 5,
                          "t_ms": [1.5, math.nan, 1e-7, 2.0 / 3.0, 1e20, math.nan, math.nan, 3.0, 0.1, -0.0],
                          "why": ["", "=cmd|' /C calc'!A0", "", "", "", "", "+1", "", "-2", "@SUM(A1)"]})
    one, chunked = tmp_path / "one.csv", tmp_path / "chunked.csv"
    frame_to_csv(one, "--requests-csv", whole)
    seen = []
    frames_to_csv(chunked, "--requests-csv", (whole.iloc[a:b] for a, b in ((0, 4), (4, 7), (7, 10))), seen.append)
    assert chunked.read_bytes() == one.read_bytes()
    assert "'=cmd" in one.read_text() and "'@SUM" in one.read_text()
    assert seen == [4, 7, 10]                          # rows written so far, after each chunk


def test_a_csv_whose_frames_fail_midway_is_not_left_behind(tmp_path):
    # review: the frames are built while the file is open, so a failure at the second chunk (memory, Ctrl-C) left
    # a well-formed CSV of the first chunk alone; the part written is removed and the failure goes on
    def frames():
        yield pd.DataFrame({"id": [0, 1]})
        raise KeyboardInterrupt

    target = tmp_path / "requests.csv"
    try:
        frames_to_csv(target, "--requests-csv", frames())
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interruption was swallowed")
    assert not target.exists()


def test_simulate_writes_its_requests_csv_in_chunks_byte_for_byte(tmp_path, monkeypatch):
    # 200 requests in chunks of 64: four frames of at most 64 rows reach the writer, never one of every request;
    # the file is the CSV of the one frame of the same run (same seed: the same columns to the bit)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 64)
    sizes = []
    real = simulate_cli.frames_to_csv

    def spy(path, flag, frames, written=None):
        real(path, flag, (sizes.append(len(f)) or f for f in frames), written)

    monkeypatch.setattr(simulate_cli, "frames_to_csv", spy)
    out = tmp_path / "requests.csv"
    result = CliRunner().invoke(app, ["simulate", str(CHAT), "--num-requests", "200", "--json",
                                      "--requests-csv", str(out)])
    assert result.exit_code == 0, result.output
    assert sizes == [64, 64, 64, 8]
    _, sim, _ = simulate_cli.run(CHAT, 200, None, "least_outstanding")
    frame = pd.DataFrame(sim.columns)
    frame["reject_reason"] = [sim.reject_reasons.get(i, "") for i in frame["request_id"].tolist()]
    reference = tmp_path / "reference.csv"
    frame_to_csv(reference, "--requests-csv", frame)
    assert out.read_bytes() == reference.read_bytes()


def test_a_gateways_records_in_chunks_are_its_records_one_by_one(tmp_path):
    # gateway-residency at 300 requests has fallbacks and rejections (a reason each): its records written 7 at a
    # time are the CSV of one frame of `GatewayRecord`s, read one by one (records[i])
    doc, name = load_gateway(RESIDENCY)
    result, _ = run_gateway(resolve_gateway(doc, name, str(RESIDENCY)), 300)
    recs = result.records
    assert recs.fallbacks and recs.reject_reasons
    rows = []
    for rec in recs:
        row = dataclasses.asdict(rec)
        row["fallbacks"] = " > ".join(f"{t}: {why}" for t, why in rec.fallbacks)
        rows.append(row)
    reference, chunked = tmp_path / "reference.csv", tmp_path / "chunked.csv"
    frame_to_csv(reference, "--requests-csv", pd.DataFrame(rows))
    frames = list(gateway_cli.records_frames(recs, 7))
    assert [len(f) for f in frames] == [7] * 42 + [6]
    frames_to_csv(chunked, "--requests-csv", frames)
    assert chunked.read_bytes() == reference.read_bytes()
