"""The one error type user input can raise: it names the file, the field and what was expected.

The CLI turns it into a single line on stderr and exit code 2; nothing else reaches the user
as a traceback for bad input.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: `file: field: message`."""

    def __init__(self, file: str | None, field: str | None, message: str):
        self.file = file
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [p for p in (self.file, self.field) if p]
        return ": ".join(parts + [self.message])
