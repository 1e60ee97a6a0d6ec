"""Counts in words, for every line sizer prints: "1 GPU", "4 GPUs", "1 replica", never "1 GPUs" or "replica(s)"."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """`n` and `noun`, plural (an added s) unless n is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
