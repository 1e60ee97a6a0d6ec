"""Every file a command writes goes through here: `simulate --requests-csv`, `search --csv`,
`report -o` (and its `--pdf` sibling), `report --sweep --csv`, `--emit-to`, `check --junit` and
`sweep --results` (sizer/outputs/sweep_store.py); `check_folder_destination` for the folders
`calibrate --out` and `import-kernels --out` write into.

`check_destination` is called before the command does its work, so a path that cannot be
written (its folder missing, the path a directory, under a regular file, a folder without write
permission) is an `InputError` naming the flag and the path, exit 2, before minutes of search,
and before `check` decides a verdict that a bad `--junit` path would otherwise hide. The
writers turn an `OSError` while writing (a full disk, permissions changed meanwhile) into the
same one-line error.

Outputs go only to regular files (or stdout): an existing device, FIFO or socket, and any path in
the kernel's virtual file systems (/proc, /sys, /dev), is refused before the work, so nothing is
ever written into, or renamed over, something that is not a file; so is a file the command reads
(`--emit-to` naming its scenario, `--junit` its manifest: `reads`), another output of the same command
(`-o r.html --emit-to r.html`: `others`), a symbolic link another user left in a sticky shared folder
(/tmp; as Linux's fs.protected_symlinks), a regular file of another user's (or a link to one: replacing it would
make it this user's, a new inode and owner; root may write it, os.access says nothing), and `-` (standard input to
sizer's readers), which would have made a file named `-`. CSV cells a spreadsheet would
evaluate as a formula are written with a leading apostrophe (`frame_to_csv`). Every file (`replacing`: the
CSVs, the HTML and PDF reports, the emitted configuration, JUnit XML, a sweep's Parquet) is written to a temporary
file beside the destination (beside the file a link leads to) and renamed onto it at the end, so a write that fails
part way (a full disk) or is interrupted leaves the file that was there and no partial one; the destination is checked
again just before, so a FIFO or folder made there during the work is refused, never renamed over. A path is shown in
a message with its control characters escaped (`shown`): a name holding a newline is still one line.
"""

from __future__ import annotations

import csv
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from sizer.errors import InputError
from validation.errors import excerpt, printable
from validation.input_files import file_kind

# The kernel's virtual file systems: a path under them is never a plain output file.
VIRTUAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
# Rows of numbers made text at a time (`_write_columns`): a float's text is 128 bytes in numpy's '<U32', and a
# Python str after, so 65,536 rows of 25 columns at once would be about 300 MB; pandas' to_csv goes 4,000 at a time.
CSV_TEXT_ROWS = 4096
# A CSV cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets (OWASP CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Characters of the destination's name kept in its temporary file's (`.NAME.XXXXXXXX.part`): a name near the file
# system's 255 bytes would otherwise make a temporary name too long to create
TEMP_NAME_CHARS = 32


def shown(path: str | Path) -> str:
    """A path as an error message names it: control characters and line separators escaped (one line)."""
    return printable(str(path))


def _refuse_virtual(path: Path, flag: str, expected: str) -> None:
    seen = (Path(os.path.abspath(path)), Path(os.path.realpath(path)))        # as written, and where links lead
    root = next((r for r in VIRTUAL_ROOTS for p in seen if p == r or r in p.parents), None)
    if root is not None:
        raise InputError(shown(path), flag, f"is under {root}, a virtual file system; expected {expected}")


def _same_file(a: str | Path, b: str | Path) -> bool:
    """One file under two names: the same path once links are resolved, or (existing) the same inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_foreign_link(path: Path, flag: str) -> None:
    """A link the file is written through (`replacing` renames onto the file it leads to) is followed as Linux's
    fs.protected_symlinks follows one: not when it sits in a sticky folder anyone can write to (/tmp) and is owned by
    neither this user nor the folder's owner, the link another user leaves at a name someone will write to."""
    try:
        link, folder = os.lstat(path), os.stat(path.parent)
    except OSError:
        return
    sticky_shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if (stat.S_ISLNK(link.st_mode) and sticky_shared and link.st_uid not in (os.geteuid(), folder.st_uid)):
        raise InputError(shown(path), flag, f"is a symbolic link of another user's in {shown(path.parent)}, a "
                                            "folder anyone can write to; not written through (as Linux's "
                                            "fs.protected_symlinks); expected a regular file or a new name")


def check_destination(path: str | Path, flag: str, reads: tuple[str | Path | None, ...] = (),
                      others: dict[str, str | Path | None] | None = None) -> Path:
    """`path` if a file can be written there; otherwise an InputError(path, flag, why). `reads`: the files the
    command reads (None where not given), none of which it may overwrite (`--emit-to` naming the scenario).
    `others`: the command's other outputs by flag (None where not given), none of which may be the same file (`report
    -o r.html --emit-to r.html` wrote the report, then the manifest over it)."""
    if getattr(path, "names_folder", False) or (isinstance(path, str) and path.endswith(("/", os.sep))):
        raise InputError(shown(os.path.join(path, "")), flag, "ends in a path separator, so names a folder; expected "
                                                              "a file name")
    if str(path) == "-":
        raise InputError("-", flag, "names no file here (sizer reads '-' as standard input, and prints to standard "
                                    "output without the flag); expected a file name")
    path = Path(path)
    file = shown(path)
    _refuse_virtual(path, flag, "a regular file to write")
    same = next((other for other, p in (others or {}).items() if p is not None and _same_file(p, path)), None)
    if same is not None:
        raise InputError(file, flag, f"is also {same}'s file; expected another file for each output")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:          # some folder on the way is a file
        info = None
    except OSError as exc:
        raise InputError(file, flag, f"cannot write here: {exc.strerror or exc}") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise InputError(file, flag, "is a directory; expected a file name")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(file, flag, f"is {file_kind(info.st_mode)}; expected a regular file to write")
        if not os.access(path, os.W_OK):
            raise InputError(file, flag, "exists and is not writable")
        if info.st_uid != os.geteuid():     # os.access is always true for root
            raise InputError(file, flag, f"is a file of another user's (uid {info.st_uid}); replacing it (a new file "
                                         "renamed onto it) would make it this user's; expected a file of one's own "
                                         "or a new name")
        _refuse_foreign_link(path, flag)
        read = next((r for r in reads if r is not None and os.path.isfile(r) and os.path.samefile(r, path)), None)
        if read is not None:
            raise InputError(file, flag, f"is {shown(read)}, which this command reads; expected another file to write")
        folder = Path(os.path.realpath(path)).parent      # where `replacing` makes its temporary file
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(file, flag, f"folder {shown(folder)} is not writable (the file is replaced by a new one "
                                         "written beside it)")
        return path          # an existing regular file is replaced
    if path.is_symlink():     # a link to nothing: writing would make its target, wherever it points, or fail late
        raise InputError(file, flag, f"is a symbolic link to {excerpt(os.readlink(path))}, which does not exist; "
                                     "expected a regular file or a new name")
    parent = path.parent
    if not parent.is_dir():
        above = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if above is not None and not above.is_dir():
            raise InputError(file, flag, f"{shown(above)} is a file, not a folder")
        raise InputError(file, flag, f"folder {shown(parent)} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(file, flag, f"folder {shown(parent)} is not writable")
    return path


def check_folder_destination(path: str | Path, flag: str) -> Path:
    """`path` if a folder is there or can be made there, and written into; otherwise an InputError(path, flag, why)."""
    path = Path(path)
    _refuse_virtual(path, flag, "a folder to write into")
    try:
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):     # a new folder, or a file on the way (named below)
            pass
        found = next((p for p in (path, *path.parents) if os.path.lexists(p)), None)   # the nearest that exists
        if found is not None and found.is_symlink() and not found.exists():    # a link to nothing: the folder would
            where = "is" if found == path else f"{shown(found)} is"            # be made wherever it points
            raise InputError(shown(path), flag, f"{where} a symbolic link to {excerpt(os.readlink(found))}, which "
                                                "does not exist; expected a folder or a new name")
        mode = os.stat(found).st_mode if found is not None else None
    except OSError as exc:         # a name the file system cannot take (too long), a loop of links
        raise InputError(shown(path), flag, f"cannot write here: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISDIR(mode):
        kind = file_kind(mode)
        raise InputError(shown(path), flag, f"is {kind}; expected a folder to write into" if found == path
                         else f"{shown(found)} is {kind}, not a folder")
    if found is not None and not os.access(found, os.W_OK | os.X_OK):
        raise InputError(shown(path), flag, f"folder {shown(found)} is not writable")
    return path


@contextmanager
def replacing(path: str | Path, flag: str, binary: bool = False) -> Iterator[IO]:
    """For `with`: a file object to write `path`'s new content to. It is a temporary file beside `path` (beside the
    file a link leads to), renamed onto it when the `with` ends: a write that fails (a full disk) or is interrupted
    (Ctrl-C, SIGTERM) part way removes the temporary file and leaves whatever was at `path` untouched. `path` is
    checked again first (`check_destination`): something made there since the check before the work (a FIFO, a
    folder) is refused, never renamed over. An OSError while writing is an InputError naming `path` and `flag`."""
    check_destination(path, flag)
    target = Path(os.path.realpath(path))            # a link to a file: that file is replaced, the link stays
    with _writing(path, flag):
        mode = os.stat(target).st_mode & 0o7777 if target.exists() else 0o666 & ~_umask()
    temp = None
    with _terminated_as_exit():                    # a kill removes the part file too, from its creation on
        try:
            with _writing(path, flag):
                fd, temp = tempfile.mkstemp(prefix=f".{target.name[:TEMP_NAME_CHARS]}.", suffix=".part",
                                            dir=target.parent)
                f = open(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""}))
            try:
                with _writing(path, flag):
                    yield f
                    f.flush()
                    os.fsync(f.fileno())               # on disk before the rename: a crash leaves the old file
            finally:
                with _writing(path, flag):
                    f.close()
            with _writing(path, flag):
                os.chmod(temp, mode)
                os.replace(temp, target)
        except BaseException:
            if temp is not None:
                Path(temp).unlink(missing_ok=True)
            raise


def write_text(path: str | Path, flag: str, text: str) -> None:
    with replacing(path, flag) as f:
        f.write(text)


def write_bytes(path: str | Path, flag: str, data: bytes) -> None:
    with replacing(path, flag, binary=True) as f:
        f.write(data)


def neutralised(cell: object) -> object:
    """A text cell a spreadsheet would evaluate (`=cmd|...`, `@SUM(...)`) with a leading apostrophe; others as is."""
    return "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell


def frame_to_csv(path: str | Path, flag: str, frame) -> None:
    """A pandas DataFrame as CSV, its text cells neutralised (`neutralised`), written as `csv_frames` writes."""
    with csv_frames(path, flag) as write:
        write(frame)


@contextmanager
def csv_frames(path: str | Path, flag: str) -> Iterator[Callable[[object], int]]:
    """For `with`: `write(frame)` appends a pandas DataFrame, or a dict of equal-length numpy columns
    (`_write_columns`, no pandas), to the CSV (the header once, from the first; text cells neutralised) and returns
    the rows written so far. Written as `replacing` writes: a run that fails or is interrupted part way leaves no
    temporary file and whatever was at `path` untouched. An OSError while writing is an InputError naming `path`."""
    rows, frames = 0, 0
    with replacing(path, flag) as f:

        def write(frame) -> int:
            nonlocal rows, frames
            with _writing(path, flag):
                if isinstance(frame, dict):
                    rows += _write_columns(f, frame, not frames)
                else:
                    text = frame.select_dtypes(include=["object", "string"]).columns
                    frame.assign(**{c: frame[c].map(neutralised) for c in text}).to_csv(f, index=False,
                                                                                         header=not frames)
                    rows += len(frame)
                f.flush()                          # each chunk in the part file as it is written
            frames += 1
            return rows

        yield write


def _write_columns(f: IO, columns: dict, header: bool) -> int:
    """Columns of numbers, booleans and text as CSV rows, the bytes pandas' `to_csv` writes of their DataFrame
    without importing pandas (about 80 MB resident, which a run writing its rows as it goes would hold through its
    metrics): floats as numpy's `astype(str)` writes them (what `to_csv` calls) and NaN empty, integers and booleans
    as `astype(str)`, text neutralised, through `csv.writer` with `to_csv`'s defaults (minimal quoting, "\\n")."""
    out = csv.writer(f, lineterminator="\n")
    if header:
        out.writerow(columns)
    n = len(next(iter(columns.values()))) if columns else 0
    for start in range(0, n, CSV_TEXT_ROWS):
        cells = []
        for values in columns.values():
            values = values[start:start + CSV_TEXT_ROWS]
            if values.dtype.kind == "f":
                text = values.astype(str).astype(object)
                text[values != values] = ""        # NaN (numpy not imported here: `plan` does not load it)
            elif values.dtype.kind in "OU":
                text = [neutralised(v) for v in values.tolist()]
            else:
                text = values.astype(str)
            cells.append(text)
        out.writerows(zip(*cells, strict=True))
    return n


@contextmanager
def _terminated_as_exit() -> Iterator[None]:
    """SIGTERM (`kill`, a cancelled CI job) as SystemExit(143) inside, so that a run killed while it writes removes its
    part file as an interrupted one does (Python's default for SIGTERM ends the process at once)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _writing(path: str | Path, flag: str) -> Iterator[None]:
    """An OSError inside as the InputError of a file that cannot be written."""
    try:
        yield
    except OSError as exc:
        raise InputError(shown(path), flag, f"cannot write: {exc.strerror or exc}") from None


def _umask() -> int:
    """The process's umask (read by setting it, then restored): a new file's permission bits, as `open` makes it."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_with(path: str | Path, flag: str, writer: Callable[[IO], object], binary: bool = False) -> None:
    """`writer(file object)`: for writers that take a file (pandas' to_csv, ElementTree.write, pyarrow's
    write_table), written as `replacing` writes."""
    with replacing(path, flag, binary) as f:
        writer(f)
