"""`sizer --version`: the installed distribution's version (importlib.metadata, which no command needs)."""

from __future__ import annotations

import importlib.metadata


def version() -> str:
    return importlib.metadata.version("sizer")
