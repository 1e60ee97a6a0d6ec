"""Extract each serving engine's argument table from a pinned release, once, into tests/data/engine_args/.

The tables are what `tests/sizer/outputs/test_emit_args.py` checks every flag `--emit` writes against:
each option's names, whether it takes a value, and its declared choices. Run it again to move a pin:

    # vLLM and SGLang: their own argparse parsers, built by the released code (a virtual environment with
    # the wheel installed; vLLM needs VLLM_TARGET_DEVICE=cpu on a machine without a GPU to build its parser)
    VLLM_TARGET_DEVICE=cpu VENV/bin/python benchmarks/extract_engine_args.py vllm
    VENV/bin/python benchmarks/extract_engine_args.py sglang
    # llama-server: common/arg.cpp of the llama.cpp source (the options llama-server accepts)
    python3 benchmarks/extract_engine_args.py llama-server PATH/common/arg.cpp "llama-cpp-python 0.3.36 sdist ..."
    # Ollama: envconfig/config.go (server environment) and api/types.go (Modelfile parameters) of a checkout
    python3 benchmarks/extract_engine_args.py ollama GIT_DIR TAG

Nothing here runs in sizer or its tests: only the JSON it writes is committed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "engine_args"


def _write(name: str, source: dict, options: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"source": source, "options": dict(sorted(options.items()))}
    (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"{name}: {len(options)} options -> {OUT / (name + '.json')}")


def _argparse_options(parser: argparse.ArgumentParser) -> dict:
    """Every option string of a parser: takes a value (nargs not 0), its choices where declared."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        choices = None if action.choices is None else sorted(str(c) for c in action.choices)
        for name in action.option_strings:
            out[name] = {"takes_value": action.nargs != 0, "choices": choices}
    return out


def vllm() -> None:
    import vllm as package
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    options = _argparse_options(parser)
    # vLLM's parser takes any string where a field's hint is `Literal[...] | str`; the config it builds
    # refuses what the Literal does not list: those values are the declared choices
    for action in parser._actions:
        declared = _vllm_declared(action.dest)
        for name in action.option_strings:
            if declared and options[name]["choices"] is None:
                options[name]["choices"] = declared
    # --speculative-config is JSON: the methods SpeculativeConfig.method declares
    import typing

    from vllm.config.speculative import SpeculativeMethod
    methods = set()
    for t in typing.get_args(SpeculativeMethod):
        methods |= set(typing.get_args(t)) if typing.get_origin(t) is typing.Literal else {t}
    options["--speculative-config"]["json_choices"] = {"method": sorted(map(str, methods))}
    _write("vllm", {"project": "vllm-project/vllm", "release": f"v{package.__version__}",
                    "files": ["vllm/engine/arg_utils.py (EngineArgs.add_cli_args)",
                              "vllm/entrypoints/common/cli_args.py (make_arg_parser, FrontendArgs)"],
                    "how": "the `vllm serve` parser built by make_arg_parser of the PyPI wheel"},
           options)


def _vllm_declared(dest: str) -> list[str] | None:
    """The Literal values an EngineArgs field's type hint declares (quantization: vLLM's method list)."""
    import typing

    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    if dest == "quantization":
        return sorted(QUANTIZATION_METHODS)
    import sys as _sys

    annotation = EngineArgs.__annotations__.get(dest)
    try:               # one field at a time: a hint naming a type only imported for type checking is skipped
        hint = eval(annotation, vars(_sys.modules[EngineArgs.__module__])) if isinstance(annotation, str) \
            else annotation
    except NameError:
        return None
    found: list[str] = []

    def walk(t) -> None:
        if typing.get_origin(t) is typing.Literal:
            found.extend(str(a) for a in typing.get_args(t))
        for a in typing.get_args(t):
            walk(a)

    walk(hint)
    return sorted(set(found)) or None


def sglang() -> None:
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_registry import _RESERVED_ALIASES
    from sglang.version import __version__

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = _argparse_options(parser)
    # the parser takes any string; SpeculativeAlgorithm.from_string accepts its members and reserved aliases
    # (upper-cased), "NONE" aside
    algorithms = {m.name for m in SpeculativeAlgorithm if m.name != "NONE"} | set(_RESERVED_ALIASES)
    options["--speculative-algorithm"]["choices"] = sorted(algorithms)
    _write("sglang", {"project": "sgl-project/sglang", "release": f"v{__version__}",
                      "files": ["python/sglang/srt/server_args.py (ServerArgs.add_cli_args)",
                                "python/sglang/srt/arg_groups/ (the dataclass fields it adds)",
                                "python/sglang/srt/speculative/spec_info.py (SpeculativeAlgorithm)"],
                      "how": "the `sglang.launch_server` parser built by ServerArgs.add_cli_args of the PyPI wheel"},
           options)


# ---- llama.cpp: common/arg.cpp --------------------------------------------------------------------

def _split_top(text: str) -> list[str]:
    """C++ call arguments split at commas outside brackets and string literals."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur).strip())
    return parts


def _call_body(text: str, start: int) -> tuple[str, int]:
    """The text between the parenthesis at `start` and its match, and the index after it."""
    depth, i = 0, start
    while True:
        ch = text[i]
        if ch == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
        i += 1


def _strings(text: str) -> list[str]:
    return re.findall(r'"((?:[^"\\]|\\.)*)"', text)


def llama_server(arg_cpp: str, cited: str) -> None:
    text = Path(arg_cpp).read_text()
    kv_types = re.search(r"kv_cache_types\s*=\s*\{([^}]*)\}", text).group(1)
    cache_types = sorted(t.lower() for t in re.findall(r"GGML_TYPE_(\w+)", kv_types))
    options = {}
    for m in re.finditer(r"add_opt\(common_arg\(", text):
        body, end = _call_body(text, m.end() - 1)
        tail, _ = _call_body(text, m.start() + len("add_opt"))           # the whole add_opt(...) call
        examples = re.search(r"set_examples\(\{([^}]*)\}\)", tail[len(body):])
        excludes = re.search(r"set_excludes\(\{([^}]*)\}\)", tail[len(body):])
        served = examples is None or "LLAMA_EXAMPLE_SERVER" in examples.group(1) \
            or "LLAMA_EXAMPLE_COMMON" in examples.group(1)
        if not served or (excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1)):
            continue
        args = _split_top(body)
        names = _strings(args[0])
        negative = _strings(args[1]) if args[1].startswith("{") else []
        rest = args[2:] if negative else args[1:]
        # common_arg(names, [negatives,] [value_hint,] help, handler): a value hint is a string literal
        # followed by the help and the handler (a value of two hints: the first)
        takes_value = len(rest) >= 3 and rest[0].startswith('"')
        hint = _strings(rest[0])[0] if takes_value else None
        choices = None
        if hint and re.fullmatch(r"\[[a-z|]+\]", hint):
            choices = sorted(hint[1:-1].split("|"))
        elif any(n in ("--cache-type-k", "--cache-type-v") for n in names):
            choices = cache_types
        for name in names:
            options[name] = {"takes_value": takes_value, "choices": choices}
        for name in negative:
            options[name] = {"takes_value": False, "choices": None}
    digest = hashlib.sha256(Path(arg_cpp).read_bytes()).hexdigest()
    _write("llama-server", {"project": "ggml-org/llama.cpp", "release": cited, "files": ["common/arg.cpp"],
                            "sha256": digest,
                            "how": "each add_opt(common_arg(...)) whose set_examples includes the server "
                                   "(or none: common options)"}, options)


# ---- Ollama: envconfig/config.go and api/types.go ---------------------------------------------------

def ollama(git_dir: str, tag: str) -> None:
    def show(path: str) -> str:
        return subprocess.run(["git", "-C", git_dir, "show", f"{tag}:{path}"], check=True, capture_output=True,
                              text=True).stdout

    commit = subprocess.run(["git", "-C", git_dir, "rev-list", "-n1", tag], check=True, capture_output=True,
                            text=True).stdout.strip()
    env = sorted(set(re.findall(r'"(OLLAMA_[A-Z_]+)"', show("envconfig/config.go"))))
    types = show("api/types.go")
    options_struct = types[types.index("type Options struct"):]
    runner = types[types.index("type Runner struct"):]
    params = set()
    for block in (options_struct, runner):
        body = block[:block.index("\n}\n")]
        params |= set(re.findall(r'json:"([a-z_0-9]+)(?:,omitempty)?"', body))
    options = {name: {"takes_value": True, "choices": None, "kind": "environment"} for name in env}
    options |= {f"PARAMETER {p}": {"takes_value": True, "choices": None, "kind": "Modelfile"} for p in params}
    _write("ollama", {"project": "ollama/ollama", "release": tag, "commit": commit,
                      "files": ["envconfig/config.go (the OLLAMA_* variables `ollama serve` reads)",
                                "api/types.go (Options and Runner: the Modelfile PARAMETER names)"],
                      "how": "OLLAMA_* names and the json names of Options/Runner fields"}, options)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "vllm":
        vllm()
    elif what == "sglang":
        sglang()
    elif what == "llama-server":
        llama_server(sys.argv[2], sys.argv[3])
    elif what == "ollama":
        ollama(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown engine {what}; expected vllm, sglang, llama-server or ollama")
