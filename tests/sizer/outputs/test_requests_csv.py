"""`--requests-csv` written a chunk of requests at a time (sizer/outputs/destination.py `csv_frames`):
the file is the one-frame CSV, byte for byte, no frame of every request is built, the rows are written while the run
goes (simulator/live_rows.py), and the file is renamed into place at the end (a failed run leaves the old one)."""

import contextlib
import dataclasses
import math
import os
import signal
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import simulator.gateway as gateway_module
import simulator.live_rows as live_rows
import simulator.records as records
import simulator.run as run_module
from sizer.cli import gateway as gateway_cli
from sizer.cli import simulate as simulate_cli
from sizer.cli.app import app
from sizer.inputs.gateway import load_gateway
from sizer.outputs.destination import csv_frames, frame_to_csv
from sizer.sizing.gateway import resolve_gateway, run_gateway

ROOT = Path(__file__).resolve().parents[3]
def frames_to_csv(path, flag, frames) -> list[int]:
    """The frames written one by one through `csv_frames`: the rows written so far after each."""
    with csv_frames(path, flag) as write:
        return [write(frame) for frame in frames]


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
    seen = frames_to_csv(chunked, "--requests-csv", (whole.iloc[a:b] for a, b in ((0, 4), (4, 7), (7, 10))))
    assert chunked.read_bytes() == one.read_bytes()
    assert "'=cmd" in one.read_text() and "'@SUM" in one.read_text()
    assert seen == [4, 7, 10]                          # rows written so far, after each chunk


def test_columns_written_without_pandas_are_pandas_csv(tmp_path, monkeypatch):
    # the rows of a run are written from numpy columns without pandas (destination._write_columns): the same bytes
    # as pandas' to_csv of their frame, for floats at every scale (numpy's astype(str) is what to_csv writes them
    # with), NaN, -0.0, booleans, wide integers, and text that needs quoting (a comma, a quote, a line break) or
    # neutralising; made text 4 rows at a time (the second chunk's 7 rows in two pieces)
    from sizer.outputs import destination

    monkeypatch.setattr(destination, "CSV_TEXT_ROWS", 4)
    columns = {"id": np.arange(10), "ok": np.array([True, False] * 5),
               "t_ms": np.array([1.5, math.nan, 1e-7, 2.0 / 3.0, 1e20, math.nan, -0.0, 3.0, 0.1,
                                 1.2345678901234567e17]),
               "why": np.array(["", "=cmd|' /C calc'!A0", "a,b", 'q"x', "", "line\nbreak", "+1", "", "-2", "@SUM(A1)"],
                               object),
               "big": np.array([-1, 2 ** 40, 0, 5, 6, 7, 8, 9, 10, 2 ** 62])}
    one, chunked = tmp_path / "one.csv", tmp_path / "chunked.csv"
    frame_to_csv(one, "--requests-csv", pd.DataFrame(columns))
    frames_to_csv(chunked, "--requests-csv", ({k: v[a:b] for k, v in columns.items()} for a, b in ((0, 3), (3, 10))))
    assert chunked.read_bytes() == one.read_bytes()
    assert '"a,b"' in one.read_text() and "'=cmd" in one.read_text()


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


def _spy_on_the_part_file(monkeypatch, tmp_path, final_name):
    """Each time a table of rows is written: (its rows, the requests done by then, the part file's size after it,
    whether the final file exists yet)."""
    from sizer.outputs import destination

    seen, done = [], [0]
    real_csv = destination.csv_frames

    class Counting(live_rows.LiveRecorder):
        def request_done(self, req, replica):
            super().request_done(req, replica)
            done[0] += 1

    @contextlib.contextmanager
    def spying(path, flag):
        with real_csv(path, flag) as write:
            def spy(table):
                rows = write(table)
                part = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
                assert len(part) == 1, part
                seen.append((len(table["request_id"]), done[0], part[0].stat().st_size,
                             (tmp_path / final_name).exists()))
                return rows
            yield spy

    for module in (run_module, gateway_module):
        monkeypatch.setattr(module, "LiveRecorder", Counting)
    for module in (simulate_cli, gateway_cli):
        monkeypatch.setattr(module, "csv_frames", spying)
    return seen


@pytest.mark.parametrize("scenario", [CHAT, RESIDENCY])
def test_the_rows_are_written_as_requests_finish_byte_for_byte(tmp_path, monkeypatch, scenario):
    # chunks of 64 finished requests: rows reach the part file (beside the destination, renamed onto it at the end)
    # while requests are still running, written without pandas, and the file is pandas' CSV of the one frame of the
    # whole run (same seed: the same columns to the bit; the gateway's, of its records at the end)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 64)
    monkeypatch.setattr(gateway_cli, "REQUEST_CHUNK_ROWS", 64)
    seen = _spy_on_the_part_file(monkeypatch, tmp_path, "requests.csv")
    out = tmp_path / "requests.csv"
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--num-requests", "300", "--json",
                                      "--requests-csv", str(out)])
    assert result.exit_code == 0, result.output
    assert sum(rows for rows, *_ in seen) == 300 and all(rows <= 64 for rows, *_ in seen)
    during = [s for s in seen if s[1] < 300]
    assert len(during) >= 2, seen                                  # several chunks before the last request finished
    assert during[1][2] > during[0][2] > 0                          # ... each one's rows in the file already
    assert not any(exists for *_, exists in seen)                   # the destination appears only at the end
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
    reference = tmp_path / "reference.csv"
    if scenario == CHAT:
        _, sim, _, _ = simulate_cli.run(CHAT, 300, None, "least_outstanding")
        frame = pd.DataFrame(sim.columns)
        frame["reject_reason"] = [sim.reject_reasons.get(i, "") for i in frame["request_id"].tolist()]
        frame_to_csv(reference, "--requests-csv", frame)
    else:
        doc, name = load_gateway(RESIDENCY)
        recs = run_gateway(resolve_gateway(doc, name, str(RESIDENCY)), 300)[0].records
        frame_to_csv(reference, "--requests-csv", pd.DataFrame(next(gateway_cli.records_tables(recs, 300))))
    assert out.read_bytes() == reference.read_bytes()


def test_a_run_that_fails_midway_leaves_the_old_file_and_no_part_file(tmp_path, monkeypatch):
    # the rows go to a part file renamed at the end: an interruption after chunks were written (here, the third
    # chunk of 32 finished requests) leaves the file that was there byte for byte, and removes the part file
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 32)
    out = tmp_path / "requests.csv"
    out.write_text("the old file\n")
    calls = [0]
    real = live_rows.InOrder.take

    def take(self, rows, final):
        real(self, rows, final)
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(live_rows.InOrder, "take", take)
    with pytest.raises(KeyboardInterrupt):
        simulate_cli.command(CHAT, True, out, 200, None, "least_outstanding", None, None, None, None, None, None,
                             None, False)
    assert out.read_text() == "the old file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requests.csv"]


def test_a_run_killed_while_writing_removes_its_part_file(tmp_path):
    # SIGTERM (kill, a cancelled CI job) ends Python at once by default, which left the part file behind (seen: a
    # killed 250,000-request run left 32 MB); while a CSV is written it is SystemExit(143) instead, then restored
    out = tmp_path / "requests.csv"
    out.write_text("the old file\n")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped, csv_frames(out, "--requests-csv") as write:
        write({"id": np.arange(3)})
        os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert out.read_text() == "the old file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requests.csv"]
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_gateways_records_in_chunks_are_its_records_one_by_one(tmp_path):
    # gateway-residency at 300 requests has fallbacks and rejections (a reason each): its records written 7 at a
    # time (tables of columns, written without pandas) are pandas' CSV of one frame of `GatewayRecord`s, read one by
    # one (records[i])
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
    frames = list(gateway_cli.records_tables(recs, 7))
    assert [len(f["request_id"]) for f in frames] == [7] * 42 + [6]
    frames_to_csv(chunked, "--requests-csv", frames)
    assert chunked.read_bytes() == reference.read_bytes()


def test_the_rename_follows_a_link_and_keeps_the_files_permissions(tmp_path):
    # the part file is renamed onto the file a link leads to (the link stays a link); a new file gets the umask's
    # permissions (as open() makes it: 0o666 less the umask), a file that was there keeps its own
    frame = pd.DataFrame({"id": [1, 2]})
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old\n")
    real.chmod(0o600)
    link.symlink_to(real)
    frames_to_csv(link, "--requests-csv", [frame])
    assert link.is_symlink() and real.read_text() == "id\n1\n2\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    mask = os.umask(0o022)
    os.umask(mask)
    new = tmp_path / "new.csv"
    frames_to_csv(new, "--requests-csv", [frame])
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "new.csv", "real.csv"]
