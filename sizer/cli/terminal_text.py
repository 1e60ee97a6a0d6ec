"""Text on the terminal as written: what a user wrote (a scenario's name, a path, a model's name) is never read as
rich markup and never reaches the terminal with control characters in it."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

# control characters but tab and newline (C0, DEL, C1): an ESC in a scenario's name would drive the terminal
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Terminal(Console):
    """A console whose text is printed as written: no rich markup (a scenario named "[/x]" or "[red]" is text, not a
    tag), no control characters (`CONTROL`, dropped). sizer's own emphasis comes from `styled`."""

    def render_str(self, text: str, **options) -> Text:
        return super().render_str(CONTROL.sub("", text), **options)


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line of `parts`, each text or (text, rich style), their control characters dropped as `Terminal` drops
    them from plain text."""
    return Text.assemble(*((CONTROL.sub("", p[0]), p[1]) if isinstance(p, tuple) else CONTROL.sub("", p)
                           for p in parts))
