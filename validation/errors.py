"""The one error type for bad input data below sizer: it names the file, the field and what was expected.

The simulator raises it for a trace it cannot replay and the engine for a model or device it
cannot run; sizer's `InputError` is the same type, and sizer's CLI turns any of them into one
line on stderr and exit code 2.
"""

from __future__ import annotations

import datetime
import reprlib
from typing import Any

# The longest quote of an input value in an error message.
EXCERPT_CHARS = 80

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = EXCERPT_CHARS
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = 8


class FieldError(ValueError):
    """Bad input: `file: field: message`."""

    def __init__(self, file: str | None, field: str | None, message: str):
        self.file = file
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return ": ".join([p for p in (self.file, self.field) if p] + [self.message])


def excerpt(value: Any, limit: int = EXCERPT_CHARS, quote: bool = True) -> str:
    """`value` for an error message: its repr (`quote=False`: a string as it is, but for its control
    characters, escaped as repr escapes them, so a message stays one line), cut to `limit` characters
    with "..." where it was cut. Never builds the full repr of a big value."""
    if isinstance(value, str) and not quote:
        text = printable(value[:limit + 1])
    elif isinstance(value, datetime.date):       # YAML reads an unquoted 2024-01-01 as a date
        text = f"{value.isoformat()} (a date, as YAML reads it)"
    else:
        try:
            text = _REPR.repr(value)
        except ValueError:       # an int too long to print (sys.get_int_max_str_digits)
            text = f"<an integer of {value.bit_length()} bits>" if isinstance(value, int) else "<unprintable>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def printable(text: str) -> str:
    """`text` with its non-printable characters (control characters, line and paragraph separators, NEL)
    escaped as repr escapes them: whatever it holds, one line."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
