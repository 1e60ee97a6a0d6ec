"""The installed sizer's version, from its package metadata: `sizer --version`, and the kernel tables `sizer
calibrate` writes. `--version` loads it as a kind (sizer/kinds.py): importlib.metadata, with the email package
it imports, is start-up a plan does not need."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def sizer_version() -> str:
    try:
        return version("sizer")
    except PackageNotFoundError:
        return "unknown"
