"""A sweep's results as one Parquet file, one row per point, written as they arrive and resumable.

Rows stream into part files beside the result (`results.parquet.parts/part-NNNNNN.parquet`, each
written to a temporary name and renamed, so a crash leaves only whole parts); `close` merges the
file and its parts into `results.parquet`, rows sorted by point hash, so the same points give the
same file whichever backend and worker order produced them. A sweep that is run again reads the
hashes already in the file and its parts and skips those points.

The columns and their types are `SweepRow`'s (`sizer.sizing.sweep`); a missing value is null.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import time
import typing
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sizer.errors import InputError
from sizer.inputs.sweep_file import MAX_POINTS
from sizer.outputs.destination import check_destination, frame_to_csv, shown, write_with
from sizer.sizing.sweep import STATUSES, SweepRow
from validation.errors import excerpt
from validation.input_files import file_kind

# A part is written every FLUSH_ROWS rows or FLUSH_S seconds, whichever comes first: a crash loses
# at most that much work, and a 10,000-point sweep leaves at most a few hundred small parts.
FLUSH_ROWS = 64
FLUSH_S = 10.0
MAX_RESULT_BYTES = 2 << 30          # decompressed: a million points' rows are about 1 GB
_ARROW = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
# Columns SweepRow gained after files were written without them: such a file's rows have none of the value (the
# tpot_ms axis and slo.tpot_ms in rows came later, then the enable_attention_dp axis), read as nulls so that the
# file still resumes and reports.
LATER_COLUMNS = ("tpot_target_ms", "enable_attention_dp")


def schema() -> pa.Schema:
    """SweepRow's fields as Arrow columns (every one nullable)."""
    hints = typing.get_type_hints(SweepRow)
    out = []
    for f in dataclasses.fields(SweepRow):
        tp = hints[f.name]
        base = next(a for a in typing.get_args(tp) if a is not type(None)) if typing.get_args(tp) else tp
        out.append(pa.field(f.name, _ARROW[base]))
    return pa.schema(out)


def read_rows(path: Path, flag: str) -> pa.Table:
    """A results file, checked against the schema (a file of another shape is refused naming `flag`): a regular
    file only, its rows and decompressed bytes (from the footer) bounded before any column is read."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InputError(str(path), flag, f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(str(path), flag, f"{file_kind(info.st_mode)}, not a regular file")
    try:
        meta = pq.ParquetFile(path).metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if meta.num_rows > MAX_POINTS or size > MAX_RESULT_BYTES:
            raise InputError(str(path), flag, f"holds {meta.num_rows:,} rows, {size:,} bytes decompressed; a sweep "
                                              f"writes at most {MAX_POINTS:,} rows ({MAX_RESULT_BYTES:,} bytes)")
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise InputError(str(path), flag, f"expected a Parquet file written by `sizer sweep`: {error}") from None
    for name in LATER_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(schema().field(name), pa.nulls(table.num_rows, schema().field(name).type))
    missing = [name for name in schema().names if name not in table.column_names]
    if missing:
        raise InputError(str(path), flag, f"expected sweep result columns; missing {', '.join(missing[:5])}")
    extra = [name for name in table.column_names if name not in schema().names]
    if extra:       # not read, and not written back: a resumed sweep's merge would drop it
        raise InputError(str(path), f"{flag} column {excerpt(extra[0], quote=False)}",
                         f"not a column `sizer sweep` writes ({len(extra)} such); expected its columns only")
    table = table.select(schema().names)
    for want, got in zip(schema(), table.schema, strict=True):
        if got.type != want.type and not pa.types.is_null(got.type):
            raise InputError(str(path), f"{flag} column {want.name}", f"expected {want.type} values as `sizer sweep` "
                                                                      f"writes them, got {got.type}")
    table = table.cast(schema())
    check_keys(table, str(path), flag)
    return table


def check_keys(table: pa.Table, file: str, flag: str) -> None:
    """Each row a point of its own (a point hash, none twice: a resumed sweep skips a hash, and a report counted
    a repeated row twice) and a status `sizer sweep` writes (one it does not was counted under its own name)."""
    hashes = table.column("point_hash")
    if hashes.null_count:
        raise InputError(file, f"{flag} column point_hash", "expected a point hash in every row, got nulls")
    empty = pc.index(hashes, "").as_py()
    if empty >= 0:
        raise InputError(file, f"{flag} row {empty} point_hash", "expected a point hash, got ''")
    if len(pc.unique(hashes)) < table.num_rows:
        seen: dict[str, int] = {}
        for i, h in enumerate(hashes.to_pylist()):
            if h in seen:
                raise InputError(file, f"{flag} row {i} point_hash", f"{excerpt(h[:12])}... repeats row {seen[h]}; "
                                                                     "expected one row a point")
            seen[h] = i
    status = table.column("status")
    bad = pc.invert(pc.fill_null(pc.is_in(status, value_set=pa.array(STATUSES)), False))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise InputError(file, f"{flag} row {i} status", f"expected one of {', '.join(STATUSES)}, got "
                                                         f"{excerpt(status[i].as_py())}")


class ResultStore:
    def __init__(self, path: Path, flag: str = "--output", reads: tuple[str | Path | None, ...] = ()):
        self.path, self.flag = check_destination(path, flag, reads), flag
        self.parts = path.with_name(path.name + ".parts")
        if self.parts.is_symlink():          # its parts would be written, read and deleted wherever it points
            raise InputError(shown(self.parts), flag, "expected the folder of this results file's parts, got a "
                                                      "symbolic link")
        if self.parts.exists() and not self.parts.is_dir():     # a FIFO was named "a file"
            raise InputError(shown(self.parts), flag, "expected the folder of this results file's parts, got "
                                                      f"{file_kind(self.parts.stat().st_mode)}")
        self.buffer: list[dict] = []
        self.added = 0                  # rows added through this store (a run that added none has nothing to merge)
        self.flushed_at = time.monotonic()

    def _part_files(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []

    def _tables(self) -> list[pa.Table]:
        files = ([self.path] if self.path.exists() and self.path.stat().st_size else []) + self._part_files()
        return [read_rows(f, self.flag) for f in files]

    def done(self) -> set[str]:
        """Point hashes already written (the file and its parts)."""
        return {h for t in self._tables() for h in t.column("point_hash").to_pylist()}

    def add(self, row: SweepRow) -> None:
        self.buffer.append(dataclasses.asdict(row))
        self.added += 1
        if len(self.buffer) >= FLUSH_ROWS or time.monotonic() - self.flushed_at >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self.flushed_at = time.monotonic()
        if not self.buffer:
            return
        made = not self.parts.exists()
        try:
            self.parts.mkdir(exist_ok=True)
        except OSError as exc:
            raise InputError(shown(self.parts), self.flag, f"cannot make a folder: {exc.strerror or exc}") from None
        number = len(self._part_files())
        target = self.parts / f"part-{number:06d}.parquet"
        try:
            self._write(pa.Table.from_pylist(self.buffer, schema=schema()), target)
        except BaseException:
            if made and not any(self.parts.iterdir()):     # the folder made for the part that failed: not left empty
                self.parts.rmdir()
            raise
        self.buffer = []

    def close(self) -> int:
        """Merge the file and its parts into the file (sorted by point hash, one row per hash); rows in all."""
        self.flush()
        tables = self._tables()
        table = pa.concat_tables(tables) if tables else schema().empty_table()
        hashes = table.column("point_hash").to_pylist()
        first = {h: i for i, h in reversed(list(enumerate(hashes)))}
        order = sorted(first, key=str)
        table = table.take(pa.array([first[h] for h in order], type=pa.int64()))
        self._write(table, self.path)
        for part in self._part_files():
            part.unlink()
        if self.parts.is_dir():
            self.parts.rmdir()
        return table.num_rows

    def _write(self, table: pa.Table, target: Path) -> None:
        """`table` as `target`, written as every output is (`write_with`): a temporary file of its own beside it (a
        fixed `.tmp` name was written through when a link of that name was already there), renamed onto it, removed
        if the write fails; `target` checked again now, never renamed over a non-file."""
        write_with(target, self.flag, lambda f: pq.write_table(table, f), binary=True)


def write_csv(table: pa.Table, path: Path, flag: str) -> None:
    frame_to_csv(path, flag, table.to_pandas())

