"""Reading JSON safely: every JSON file sizer reads comes through here (a model's config.json, a
catalog entry, a safetensors index, a manifest's --speculative-config value).

A file is read only if it is a regular file and only up to a size bound
(`validation.input_files.read_text`); the text gets the same nesting-depth bound as YAML and
duplicate keys are refused. Every refusal is a `FieldError` naming the file (and the line or
field), which the CLI prints as one line with exit code 2. YAML is read by `validation.safe_yaml`,
shared with the engine's calibrated-profile reader.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from validation.errors import FieldError, excerpt
from validation.input_files import read_text
from validation.safe_yaml import MAX_DEPTH, located

# A model's config.json is under 100 KB. A safetensors index lists every tensor (about 100 bytes
# each): the largest MoE checkpoints have about 100,000 tensors, about 10 MB. 16 MiB admits both.
MAX_JSON_BYTES = 16 << 20


# ---- JSON ----------------------------------------------------------------------------------------

# A JSON string or a bracket: the depth scan skips brackets inside strings. It scans the text with its escaped
# backslashes and quotes taken out (`_unescaped`), so a string is a plain run of other characters: a pattern that
# stepped over escapes one repetition at a time held memory for each (2.5 GB for a 60 MB string of escapes); a run
# matched a character at a time made a 16 MiB string take seconds.
_JSON_TOKENS = re.compile(r'"[^"]*"|[\[\]{}]')


def _unescaped(text: str) -> str:
    """`text` without JSON's escaped backslashes, then escaped quotes (`\\\\`, `\\"`): the same strings and brackets,
    and the same newlines before each (an escape holds none)."""
    return text.replace("\\\\", "").replace('\\"', "")


def _json_depth_check(text: str, file: str, field: str | None) -> None:
    """Refuse nesting deeper than MAX_DEPTH before parsing (json's decoder recurses)."""
    depth = 0
    text = _unescaped(text)
    for match in _JSON_TOKENS.finditer(text):
        ch = match.group()
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise located(file, field, line, f"nested deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1


def _no_duplicates(file: str, field: str | None):
    def pairs_hook(pairs: list) -> dict:
        out = {}
        for key, value in pairs:
            if key in out:
                raise FieldError(file, field, f"duplicate key {excerpt(key)}")
            out[key] = value
        return out
    return pairs_hook


def loads_json(text: str, file: str, field: str | None = None) -> Any:
    """JSON text under this module's depth bound, duplicate keys refused. `field` names where the
    text sits when it is a value inside another file (a manifest's --speculative-config)."""
    _json_depth_check(text, file, field)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(file, field))
    except FieldError:
        raise
    except json.JSONDecodeError as exc:
        raise located(file, field, exc.lineno, f"not valid JSON ({exc.msg})") from None
    except ValueError as exc:     # an integer past 4300 digits
        raise FieldError(file, field, f"not valid JSON ({excerpt(str(exc), quote=False)})") from None


def load_json(path: str | Path, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON file (a model's config.json, a catalog entry)."""
    return loads_json(read_text(path, max_bytes, "JSON file"), str(path))
