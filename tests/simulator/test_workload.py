import numpy as np
import pytest
from simhelp import DATA

from simulator.traces import read_csv_trace, read_mooncake
from simulator.workload import Arrivals, Lengths, SharedPrefix, WorkloadSpec, generate
from validation.errors import FieldError


def spec(n=20000, **kw):
    base = dict(arrivals=Arrivals("poisson", 4.0), prompt=Lengths("fixed", 100), output=Lengths("fixed", 10))
    base.update(kw)
    return WorkloadSpec(n, **base)


def test_same_seed_same_workload_and_streams_are_independent():
    a, b = generate(spec(500), 7), generate(spec(500), 7)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.arrival_s, generate(spec(500), 8).arrival_s)
    # changing the output lengths leaves the arrival stream bit-identical
    c = generate(spec(500, output=Lengths("uniform", min_tokens=1, max_tokens=50)), 7)
    assert np.array_equal(a.arrival_s, c.arrival_s)


def test_arrival_processes_have_their_rate_and_burstiness():
    poisson = np.diff(generate(spec(), 1).arrival_s)
    assert poisson.mean() == pytest.approx(0.25, rel=0.03)            # 1 / 4 per s
    gaps = np.diff(generate(spec(arrivals=Arrivals("gamma", 4.0, cv=3.0)), 1).arrival_s)
    assert gaps.mean() == pytest.approx(0.25, rel=0.08)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)
    const = generate(spec(10, arrivals=Arrivals("constant", 4.0)), 1).arrival_s
    assert np.allclose(const, 0.25 * np.arange(1, 11))


def test_a_cv_belongs_to_gamma_arrivals_only():
    # gamma without its cv would be a silent Poisson (cv 1); a cv beside another process would be ignored
    with pytest.raises(ValueError, match="cv"):
        Arrivals("gamma", 4.0)
    with pytest.raises(ValueError, match="cv"):
        Arrivals("poisson", 4.0, cv=2.0)
    with pytest.raises(ValueError, match="cv"):
        Arrivals("gamma", 4.0, cv=0.0)


def test_length_distributions():
    w = generate(spec(prompt=Lengths("lognormal", 1000, 500), output=Lengths("uniform", min_tokens=5, max_tokens=9)), 3)
    assert w.prompt_tokens.mean() == pytest.approx(1000, rel=0.03)
    assert w.prompt_tokens.std() == pytest.approx(500, rel=0.06)
    assert w.output_tokens.min() == 5 and w.output_tokens.max() == 9
    n = generate(spec(prompt=Lengths("normal", 50, 40, max_tokens=80)), 3).prompt_tokens
    assert n.min() == 1 and n.max() == 80                              # clamped to [1, max]
    e = generate(spec(prompt=Lengths("empirical", values_tokens=(10, 1000), weights=(3, 1))), 3).prompt_tokens
    assert set(np.unique(e)) == {10, 1000} and (e == 10).mean() == pytest.approx(0.75, abs=0.02)


def test_shared_prefixes_share_and_tenants():
    w = generate(spec(shared_prefix=SharedPrefix(0.3, 256, num_prefixes=4, num_tenants=3)), 5)
    has = np.array([len(s) > 0 for s in w.segments])
    assert has.mean() == pytest.approx(0.3, abs=0.02)
    assert {s[0] for s in w.segments if s} == {0, 1, 2, 3} and w.segment_tokens == 256
    assert set(np.unique(w.tenant)) == {0, 1, 2}
    r = next(w.requests())
    assert (r.request_id, r.prompt_tokens, r.segment_tokens) == (0, 100, 256)


def test_mooncake_slice():
    w = read_mooncake(DATA / "mooncake_conversation_head500.jsonl")
    assert len(w) == 500 and w.segment_tokens == 512
    first = next(w.requests())
    # line 1: {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, ..., 13]}
    assert (first.arrival_s, first.prompt_tokens, first.output_tokens) == (0.0, 6758, 500)
    assert first.prefix_segments == tuple(range(14))
    assert w.arrival_s[-1] == pytest.approx(165.0)                      # line 500: timestamp 165000 ms
    assert read_mooncake(DATA / "mooncake_conversation_head500.jsonl", limit=10).arrival_s.size == 10


def test_azure_csv_slice():
    w = read_csv_trace(DATA / "azure_conv_head500.csv")
    assert len(w) == 500
    # rows 1-2: 18:15:46.6805900 (374 in, 44 out) and 18:15:50.9951690: 4.314579 s apart
    assert (w.prompt_tokens[0], w.output_tokens[0]) == (374, 44)
    assert w.arrival_s[1] == pytest.approx(4.314579, abs=1e-6)


def test_bad_trace_files_raise_input_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5}\n')
    with pytest.raises(FieldError, match="line 1"):
        read_mooncake(bad)
    csv = tmp_path / "bad.csv"
    csv.write_text("time,in,out\n1,2,3\n")
    with pytest.raises(FieldError, match="missing column"):
        read_csv_trace(csv)


def test_requests_are_made_from_the_columns_a_chunk_at_a_time(monkeypatch):
    # 50 requests read 7 at a time (8 chunks, the last of 1): every request has its own row of every column, ids
    # 0..49 in arrival order, across the chunks' edges as within them (the columns' values, compared one by one)
    import simulator.workload as workload
    from simulator.workload import AdapterPopularity

    monkeypatch.setattr(workload, "REQUESTS_AT_A_TIME", 7)
    w = generate(WorkloadSpec(50, Arrivals("poisson", 3.0), Lengths("uniform", min_tokens=10, max_tokens=900),
                              Lengths("uniform", min_tokens=1, max_tokens=90), SharedPrefix(0.5, 64, 3, 4),
                              adapters=AdapterPopularity(5, 1.0)), seed=3)
    made = list(w.requests())
    assert [r.request_id for r in made] == list(range(50))
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.prefix_segments, r.tenant, r.adapter_id, r.schema_id)
            for r in made] == [(float(w.arrival_s[i]), int(w.prompt_tokens[i]), int(w.output_tokens[i]),
                                w.segments[i], int(w.tenant[i]), int(w.adapter[i]), -1) for i in range(50)]
    assert len(set(w.adapter.tolist())) > 1 and len(set(w.tenant.tolist())) > 1
