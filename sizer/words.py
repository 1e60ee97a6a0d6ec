"""Counts and numbers in words, for every line sizer prints: "1 GPU", "4 GPUs", "1 replica", never "1 GPUs" or
"replica(s)"; "12,500", never "1.25e+04"."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """`n` and `noun`, plural (an added s) unless n is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def significant(value: float, digits: int = 4) -> str:
    """`value` to `digits` significant digits, or every digit of its whole part where it has more (12,500 rather
    than 1.25e+04), grouped in thousands: 33.33, 2,000, 12,500."""
    whole_digits = len(f"{abs(value):.0f}")
    return f"{value:,.{max(digits, whole_digits)}g}"
