"""Reading an input file safely: only a regular file (a FIFO or a device could block or never
end), at most a stated size, UTF-8 text. Shared by the trace reader, the engine's profile reader
and sizer's YAML/JSON loader, each passing its own bound and error type; and a path as a command line gave it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from validation.errors import FieldError


class GivenPath(type(Path())):
    """A path as a command line gave it, remembering a trailing separator, which pathlib drops ('out/' and 'out'
    are one Path): a file destination written so names a folder (sizer/outputs/destination.py)."""
    names_folder: bool = False


def given_path(text: str) -> Path:
    """`text` as a path, a GivenPath that says whether `text` ended in a separator."""
    path = GivenPath(text)
    path.names_folder = text.endswith(("/", os.sep))
    return path


_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def read_text(path: str | Path, max_bytes: int, what: str = "file", error: type[FieldError] = FieldError) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes`; anything else is `error` (file, field, message)."""
    file = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(file, None, "file not found") from None
    except OSError as exc:
        raise error(file, None, f"cannot read: {exc.strerror or exc}") from None
    _check_regular(info, file, max_bytes, what, error)
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, opening it does not wait
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            _check_regular(os.fstat(f.fileno()), file, max_bytes, what, error)
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise error(file, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise _too_big(file, max_bytes, what, error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise error(file, f"line {line}", "not UTF-8 text") from None


def file_kind(mode: int) -> str:
    """What a file is ("a file", "a directory", "a FIFO", "a character device", ...), for a message."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _check_regular(info: os.stat_result, file: str, max_bytes: int, what: str, error: type[FieldError]) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise error(file, None, f"{file_kind(info.st_mode)}, not a regular file")
    if info.st_size > max_bytes:
        raise _too_big(file, max_bytes, what, error)


def _too_big(file: str, max_bytes: int, what: str, error: type[FieldError]) -> FieldError:
    bound = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes:,} bytes"
    return error(file, None, f"larger than {bound}, the most a {what} may be")
