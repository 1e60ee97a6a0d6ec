"""A number as a manifest, a serving command or a flag writes it: "32k", "10M", "1e4". Its own module, so
that the CLI's flags read it without the manifest code (sizer/inputs/manifests/fields.py)."""

from __future__ import annotations

import re

# vLLM's suffixes (vllm/utils/argparse_utils.py human_readable_int): decimal lower case, binary upper case
_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def parse_number(value):
    """A number written as text ("2", "0.9", "1e4", vLLM's "32k" and "10M": decimal suffixes lower
    case, binary upper case) as that number; anything else as it is, for its key to check."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    scale = _SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    if len(digits) > 40:                  # a 5,000-digit number is no count of anything
        return value
    for parse in (int, float):
        try:
            return parse(digits) * scale
        except ValueError:
            continue
    return value


def human_readable_int(text: str) -> int:
    """An integer as vLLM's human_readable_int reads it: digits, or digits with a suffix (a decimal one after a
    fraction too: 25.6k is 25,600; a binary one after whole digits only); ValueError for anything else."""
    m = _SUFFIXED.fullmatch(text.strip())
    if m is None:
        return int(text)
    number, suffix = m.groups()
    if suffix.islower():
        return int(float(number) * _SUFFIXES[suffix])
    return int(number) * _SUFFIXES[suffix]
