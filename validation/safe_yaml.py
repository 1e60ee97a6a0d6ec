"""Reading YAML safely: every YAML file sizer and the engine read comes through here (scenarios,
hardware profiles, manifests, Helm values, a calibrated profile's profile.yaml).

The file is read by `validation.input_files.read_text` (a regular file only, up to a size bound).
The document is composed from the parser's events by a loop of our own, which refuses duplicate
keys, nesting deeper than `MAX_DEPTH`, more than `MAX_ALIASES` aliases and documents whose aliases
expand to more than `MAX_NODES` nodes (a "billion laughs" document is refused while it is being
read, before anything is expanded). Every refusal is a `FieldError` naming the file (and the line
where YAML says it), which sizer's CLI prints as one line with exit code 2. Values quoted in a
message go through `excerpt`, so a huge or deeply nested value never becomes a huge message.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from validation.errors import FieldError, excerpt
from validation.input_files import read_text

# Scenarios, manifests and Helm values are a few KB (the bundled ones at most 30 KB); the largest
# public Helm charts' values files are a few hundred KB. 1 MiB admits them all and keeps a
# mistaken path (a log, a binary) from being read and parsed whole.
MAX_YAML_BYTES = 1 << 20
# Real inputs nest less than 15 levels (a Kubernetes Deployment's container resources are 8 deep,
# a quantization_config 4). 50 is generous, and keeps every reader that walks the data
# recursively (the schema, the manifest search) far from Python's 1000-frame limit. JSON
# (validation/safe_load.py) has the same bound.
MAX_DEPTH = 50
# Helm values use anchors for repeated blocks (resources, tolerations): a few dozen aliases at
# most. No bundled file uses one.
MAX_ALIASES = 100
# Nodes of a document with every alias expanded. A 1 MiB document written out without aliases
# has at most ~500,000 nodes (each at least 2 characters), so this never refuses a literal
# document: it only keeps aliases from making a document bigger than one could be written.
MAX_NODES = 1_000_000

# libyaml's loader when PyYAML has it (about 3x faster than the pure-Python one, as in hardware.py);
# only its parser's events and its constructor are used: _compose builds the nodes itself.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_OCTAL = re.compile(r"[-+]?0[0-7_]+")       # YAML 1.1's octal integer: a leading 0, then digits


class _Refused(Exception):
    def __init__(self, mark, message: str):
        self.line = mark.line + 1 if mark is not None else None
        self.message = message


def _compose(parser, constructor: yaml.SafeLoader, counts: dict) -> Any:
    """One document's node graph from the parser's events, with an explicit stack (no recursion):
    libyaml's own composer recurses in C and crashes the process on deeply nested input."""
    anchors: dict[str, tuple[Any, int | None]] = {}      # anchor -> (node, expanded size once complete)
    stack: list[list] = []        # [node, expanded size so far, anchor, pending mapping key]
    root = None
    while root is None:
        event = parser.get_event()
        kind = type(event)
        if kind is ScalarEvent or kind is AliasEvent:
            if kind is AliasEvent:
                counts["aliases"] += 1
                if counts["aliases"] > MAX_ALIASES:
                    raise _Refused(event.start_mark, f"more than {MAX_ALIASES} aliases")
                if event.anchor not in anchors:
                    raise _Refused(event.start_mark, f"alias *{excerpt(event.anchor, quote=False)} is not defined")
                node, size = anchors[event.anchor]
                if size is None:
                    raise _Refused(event.start_mark, f"alias *{excerpt(event.anchor, quote=False)} refers to a "
                                                     "collection that contains it")
            else:
                tag = event.tag
                if tag is None or tag == "!":
                    tag = constructor.resolve(ScalarNode, event.value, event.implicit)
                    if tag in _NUMBER_TAGS and (":" in event.value or _OCTAL.fullmatch(event.value)):
                        # YAML 1.1's base 60 (`1:00` is 60) and octal (`020000` is 8,192): text, as YAML 1.2
                        # reads the first, and the second refused as a number by the field it sets
                        tag = _STR_TAG
                node, size = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style), 1
                if event.anchor is not None:
                    anchors[event.anchor] = (node, 1)
        elif kind is SequenceStartEvent or kind is MappingStartEvent:
            if len(stack) >= MAX_DEPTH:
                raise _Refused(event.start_mark, f"nested deeper than {MAX_DEPTH} levels")
            tag, node_type = event.tag, SequenceNode if kind is SequenceStartEvent else MappingNode
            if tag is None or tag == "!":
                tag = constructor.resolve(node_type, None, event.implicit)
            node = node_type(tag, [], event.start_mark, None, flow_style=event.flow_style)
            if event.anchor is not None:
                anchors[event.anchor] = (node, None)
            stack.append([node, 1, event.anchor, None])
            continue
        elif kind is SequenceEndEvent or kind is MappingEndEvent:
            node, size, anchor, _ = stack.pop()
            node.end_mark = event.end_mark
            if kind is MappingEndEvent:
                _check_duplicate_keys(node, constructor)
            if anchor is not None:
                anchors[anchor] = (node, size)
        else:     # the parser emits nothing else inside a document
            raise _Refused(event.start_mark, f"unexpected {kind.__name__}")
        if size > MAX_NODES:
            raise _Refused(event.start_mark, f"aliases expand it to more than {MAX_NODES:,} nodes")
        if not stack:
            root = node
            continue
        parent = stack[-1]
        parent[1] += size
        if parent[1] > MAX_NODES:
            raise _Refused(event.start_mark, f"aliases expand it to more than {MAX_NODES:,} nodes")
        if isinstance(parent[0], SequenceNode):
            parent[0].value.append(node)
        elif parent[3] is None:
            parent[3] = node
        else:
            parent[0].value.append((parent[3], node))
            parent[3] = None
    return root


def _check_duplicate_keys(node: MappingNode, constructor: yaml.SafeLoader) -> None:
    """A key written twice in one mapping (PyYAML would keep the last silently). Keys that `<<:`
    merges in are not the mapping's own, so a key may override one merged from an anchor."""
    seen: dict = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        key = key_node.value if key_node.tag == _STR_TAG else constructor.construct_object(key_node, deep=True)
        try:
            first = seen.setdefault(key, key_node)
        except TypeError:         # unhashable: the constructor refuses it with its own message
            continue
        if first is not key_node:
            raise _Refused(key_node.start_mark, f"duplicate key {excerpt(key)} "
                                                f"(first at line {first.start_mark.line + 1})")


def located(file: str, field: str | None, line: int | None, message: str) -> FieldError:
    where = " ".join(p for p in (field, f"line {line}" if line is not None else None) if p)
    return FieldError(file, where or None, message)


def loads_yaml_all(text: str, file: str, field: str | None = None) -> list:
    """Every document of a YAML stream, read under this module's bounds. `field` names where the
    text sits when it is a value inside another file (a manifest's annotation)."""
    parser = constructor = _LOADER(text)
    counts = {"aliases": 0}
    docs = []
    try:
        parser.get_event()                                  # StreamStartEvent
        while not isinstance(parser.peek_event(), StreamEndEvent):
            parser.get_event()                              # DocumentStartEvent
            root = _compose(parser, constructor, counts)
            if not isinstance(parser.get_event(), DocumentEndEvent):   # pragma: no cover - the parser ensures it
                raise _Refused(None, "expected the end of the document")
            docs.append(constructor.construct_document(root))
    except _Refused as exc:
        raise located(file, field, exc.line, exc.message) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid"
        raise located(file, field, mark.line + 1 if mark else None,
                       f"not valid YAML ({excerpt(problem, quote=False)})") from None
    except yaml.YAMLError as exc:
        raise located(file, field, None, f"not valid YAML ({excerpt(str(exc), quote=False)})") from None
    except ValueError as exc:     # a scalar the constructor cannot convert: an int past 4300 digits, 2024-13-45
        raise located(file, field, None, f"not valid YAML ({excerpt(str(exc), quote=False)})") from None
    return docs


def loads_yaml(text: str, file: str, field: str | None = None) -> Any:
    """A single YAML document (None for an empty one), read under this module's bounds."""
    docs = loads_yaml_all(text, file, field)
    if len(docs) > 1:
        raise located(file, field, None, f"expected one YAML document, found {len(docs)}")
    return docs[0] if docs else None


def load_yaml(path: str | Path, max_bytes: int = MAX_YAML_BYTES, what: str = "YAML file") -> Any:
    """A YAML file's single document (a scenario, a hardware profile, a calibrated profile.yaml)."""
    return loads_yaml(read_text(path, max_bytes, what), str(path))


def load_yaml_all(path: str | Path, max_bytes: int = MAX_YAML_BYTES) -> list:
    """Every document of a YAML file (a Kubernetes manifest may hold several)."""
    return loads_yaml_all(read_text(path, max_bytes, "YAML file"), str(path))
