"""`sizer import-kernels` on bad sources (issue 25): a parquet that is not one, a missing column, no rows, text
where numbers are read, NaN or non-positive latencies, and a missing or garbage system YAML are one line and exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
from test_aiconfigurator_import import fake_package  # noqa: E402

runner = CliRunner()
GEMM = ("aiconfigurator_core", "systems", "data", "h100_sxm", "gemm", "vllm", "0.9.9", "gemm_perf.parquet")
SYSTEM = ("aiconfigurator_core", "systems", "h100_sxm.yaml")


def gemm_frame(**change):
    rows = [dict(framework="VLLM", version="0.9.9", device="Test GPU", kernel_source="torch", gemm_dtype="bfloat16",
                 m=m, n=4096, k=4096, latency=0.015) for m in (1, 8)]
    frame = pd.DataFrame(rows)
    for column, value in change.items():
        if value is None:
            frame = frame.drop(columns=[column])
        else:
            frame[column] = value
    return frame


CASES = {
    "not parquet": (GEMM, b"PAR1 not a parquet file", None, None),
    "empty file": (GEMM, b"", None, None),
    "missing column": (GEMM, gemm_frame(n=None), "n", "missing"),
    "no rows": (GEMM, gemm_frame().iloc[0:0], None, "no rows"),
    "text in a number": (GEMM, gemm_frame(k=["4096", "big"]), "k", "expected numbers"),
    "NaN latency": (GEMM, gemm_frame(latency=[0.015, float("nan")]), "latency (row 1)", "a latency of at least 1e-06"),
    "negative latency": (GEMM, gemm_frame(latency=[-1.0, 0.015]), "latency (row 0)", "a latency of at least 1e-06"),
    # past what sizer's tables read back (10^9 us = 10^6 ms), infinity among them
    "huge latency": (GEMM, gemm_frame(latency=[0.015, 2e6]), "latency (row 1)", "at most 1e+06 (milliseconds)"),
    "system garbage": (SYSTEM, b"gpu: [unclosed", None, "not valid YAML"),
    "system missing key": (SYSTEM, b"gpu: {mem_bw: 1.0e+12}\n", "gpu.mem_bw_empirical_scaling_factor", None),
    "system infinite": (SYSTEM, b"gpu: {mem_bw: .inf, mem_bw_empirical_scaling_factor: 0.8, "
                                b"mem_empirical_constant_latency: 3.0e-6}\n", "gpu.mem_bw", "got inf"),
    "system a list": (SYSTEM, b"- 1\n", "gpu", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_sources_are_one_line(tmp_path, case):
    where, content, field, says = CASES[case]
    source = fake_package(tmp_path / "wheel")
    path = source.joinpath(*where)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        content.to_parquet(path)
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(tmp_path / "out"),
                                 "--all-shapes"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), result.stderr
    if field:
        assert lines[0].startswith(f"error: {path}: {field}: "), lines[0]
    if says:
        assert says in lines[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_system_file_that_is_missing(tmp_path):
    source = fake_package(tmp_path / "wheel")
    source.joinpath(*SYSTEM).unlink()
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "file not found" in result.stderr


@pytest.mark.parametrize("case", ["a file", "a FIFO", "a dangling link", "under /dev/shm"])
def test_a_bad_out_folder_is_refused_before_the_tables_are_read(tmp_path, monkeypatch, case):
    # --out was first used when the tables were written: a file or FIFO there was refused after the conversion, a
    # dangling link as "File exists", and /dev/shm (a virtual file system calibrate --out refuses) took the tables
    import sizer.cli.import_kernels as command

    def no_work(*args, **kwargs):
        raise AssertionError("the tables were read before --out was checked")

    monkeypatch.setattr(command, "convert", no_work)
    out = {"a file": tmp_path / "file", "a FIFO": tmp_path / "fifo", "a dangling link": tmp_path / "link",
           "under /dev/shm": Path("/dev/shm")}[case]
    if case == "a file":
        out.write_text("x")
    elif case == "a FIFO":
        os.mkfifo(out)
    elif case == "a dangling link":
        out.symlink_to(tmp_path / "gone")
    result = runner.invoke(app, ["import-kernels", str(tmp_path), "--gpu", "h100-sxm", "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {out}: --out: "), result.stderr
