"""The one error type user input can raise: it names the file, the field and what was expected.

`InputError` is the validation leaf's `FieldError` under sizer's name, so a bad trace (raised in
simulator/) and a bad scenario (raised here) reach the user the same way: the CLI turns any
`FieldError` into a single line on stderr and exit code 2. Nothing else is caught, so a bug
still shows its traceback.
"""

from __future__ import annotations

from validation.errors import FieldError


class InputError(FieldError):
    """Bad user input: `file: field: message`."""
