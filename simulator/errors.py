"""The one error type for bad input data below sizer: it names the file, the field and what was expected.

The simulator raises it for a trace it cannot replay and the engine for a model or device it
cannot run; sizer's `InputError` is the same type, and sizer's CLI turns any of them into one
line on stderr and exit code 2.
"""

from __future__ import annotations


class FieldError(ValueError):
    """Bad input: `file: field: message`."""

    def __init__(self, file: str | None, field: str | None, message: str):
        self.file = file
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return ": ".join([p for p in (self.file, self.field) if p] + [self.message])
