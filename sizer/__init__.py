"""sizer: a capacity planner for LLM inference."""

# The one place of the version: pyproject.toml reads it (tool.setuptools.dynamic), `sizer --version` prints it and
# `sizer calibrate` writes it into the kernel tables' folder name and header, installed or run from a checkout
# (package metadata alone left a checkout's tables named 'unknown': the H200 run of 2026-12-04).
__version__ = "0.1.0"
