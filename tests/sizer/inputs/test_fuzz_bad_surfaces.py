"""Property tests of issue 25's surfaces: any sweep file, kernel table or gateway document is read to a value
or refused with one FieldError (one line), quickly; what is read holds the rules (bounded sweeps, finite
positive latencies on unique grid points, gateway searches within their bound)."""

from __future__ import annotations

import copy
import gzip
import math
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sizer.inputs.gateway import MAX_SEARCH_CANDIDATES, load_gateway
from sizer.inputs.sweep_file import MAX_POINTS, axis_values, load_sweep
from sizer.timing.kernel_tables import _read_table
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
FAST_S = 3.0            # CPU seconds (time.process_time): the work a refusal takes, whatever the machine's load
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])

numbers = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, 1, 1e-300, 1e300, 2**63, -1]))
scalars = st.one_of(numbers, st.text(max_size=8), st.none(), st.booleans())
ranges = st.fixed_dictionaries({"start": numbers, "stop": numbers},
                               optional={"step": numbers, "factor": numbers, "extra": scalars})
axis_names = st.sampled_from(["model", "gpu", "quantization", "tensor_parallel_size", "max_num_seqs", "rate_per_s",
                              "ttft_ms", "itl_ms", "speculative", "colour"])
axes = st.dictionaries(st.one_of(axis_names, st.none()), st.one_of(st.lists(scalars, max_size=6), ranges, scalars),
                       max_size=5)


def one_line(error: FieldError) -> None:
    assert "\n" not in str(error) and "\r" not in str(error)


sweep_settings = st.dictionaries(st.sampled_from(["num_requests", "max_replicas"]), numbers, max_size=2)


@SETTINGS
@given(doc=st.fixed_dictionaries({"scenario": st.just("../../../scenarios/llama-3.1-8b-chat-h100.yaml"), "axes": axes},
                                  optional={"constraints": st.lists(st.text(max_size=30), max_size=3),
                                            "settings": sweep_settings}))
def test_any_sweep_file_is_read_or_refused_in_one_line(tmp_path, doc):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    start = time.process_time()
    try:
        sweep = load_sweep(path)
    except FieldError as error:
        one_line(error)
    else:
        assert math.prod(len(v) for v in axis_values(sweep).values()) <= MAX_POINTS
    assert time.process_time() - start < FAST_S


cells = st.one_of(st.integers(-3, 5000).map(str), st.sampled_from(["nan", "inf", "-inf", "1e400", "", " ", "x"]),
                  st.floats(allow_nan=True, allow_infinity=True).map(repr))
lists = st.lists(cells, max_size=5).map(" ".join)
rows = st.tuples(st.sampled_from(["bfloat16", "fp8", ""]), cells, cells, lists, lists).map(",".join)


@SETTINGS
@given(lines=st.lists(st.one_of(rows, st.text(max_size=20)), max_size=8),
       header=st.sampled_from(["dtype,n,k,m,latency_us", "dtype,n,k,latency_us", ""]))
def test_any_kernel_table_is_read_or_refused_in_one_line(tmp_path, lines, header):
    path = tmp_path / "gemm.csv.gz"
    path.write_bytes(gzip.compress("\n".join([header, *lines]).encode("utf-8", "surrogatepass"), mtime=0))
    try:
        table = _read_table(path, "gemm")
    except FieldError as error:
        one_line(error)
        return
    assert table
    for key, by_m in table.items():
        assert all(isinstance(m, int) and m >= 1 for m in by_m) and all(s > 0 and math.isfinite(s)
                                                                          for s in by_m.values())
        assert all(isinstance(size, int) and size >= 1 for size in key[1:])


BASE = yaml.safe_load((ROOT / "scenarios" / "gateway-residency.yaml").read_text())
leaf_values = st.one_of(scalars, st.lists(st.integers(0, 300), max_size=300), st.dictionaries(st.text(max_size=5),
                                                                                             scalars, max_size=3))


def paths(node, prefix=()):
    """Every (path to a value) in a nested document."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, (*prefix, i))


ALL_PATHS = [p for p in paths(BASE) if p]


@SETTINGS
@given(changes=st.lists(st.tuples(st.sampled_from(ALL_PATHS), leaf_values), min_size=1, max_size=4))
# an empty target is a target (it was read as none and the route's absent by_difficulty dereferenced: a traceback)
@example(changes=[(("gateway", "routes", 0, "target"), "")])
def test_any_gateway_document_is_read_or_refused_in_one_line(tmp_path, changes):
    doc = copy.deepcopy(BASE)
    for where, value in changes:
        node = doc
        try:
            for part in where[:-1]:
                node = node[part]
            node[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue                    # an earlier change replaced the path
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    start = time.process_time()
    try:
        loaded, _ = load_gateway(path)
    except FieldError as error:
        one_line(error)
    else:
        g = loaded.gateway
        candidates = math.prod(len(g.search.replicas.get(p.name, [1])) for p in g.pools) * (
            len(g.search.strong_shares) or 1)
        assert candidates <= MAX_SEARCH_CANDIDATES
        assert all(len(set(r.fallback)) == len(r.fallback) for r in g.routes)
    assert time.process_time() - start < FAST_S
