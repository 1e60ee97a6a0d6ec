"""Counts and numbers in words, for every line sizer prints: "1 GPU", "4 GPUs", "1 replica", never "1 GPUs" or
"replica(s)"; "12,500", never "1.25e+04"."""

from __future__ import annotations

import math


def count(n: int, noun: str) -> str:
    """`n` and `noun`, plural (an added s) unless n is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def listed(items) -> str:
    """(1, 2, 4, 8) -> '1, 2, 4 and 8'; one item alone."""
    *rest, last = map(str, items)
    return f"{', '.join(rest)} and {last}" if rest else last


def significant(value: float, digits: int = 4) -> str:
    """`value` to `digits` significant digits, or every digit of its whole part where it has more (12,500 rather
    than 1.25e+04), grouped in thousands, trailing zeros of the fraction dropped, never in exponent form: 33.33,
    2,000, 12,500, 0.00005."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def dollars(value: float) -> str:
    """Dollars to the cent, or with every digit a price has below a cent (0.125, not 0.12; at most 6 significant
    digits), so that a line multiplying a price out shows the price it used: 3.99, 2.50, 0.125, 1,234.50."""
    if abs(value - round(value, 2)) < 1e-9 * max(1.0, abs(value)):
        return f"{value:,.2f}"
    return significant(value, 6)
