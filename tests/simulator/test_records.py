"""The step log: what it keeps per step, and that reading it in chunks gives the numbers one pass gives, to the bit."""

import dataclasses
from itertools import accumulate

import numpy as np
import pytest
from simhelp import LinearStepModel, sim_config

import simulator.records as records
from simulator.engine_loop import BARE
from simulator.metrics import summarise
from simulator.records import ApiServer, LoggedTimeline, Recorder, Timeline, client_visible_s
from simulator.run import simulate
from simulator.workload import Arrivals, Lengths, WorkloadSpec

# An API server of 2 ms a pass and 0.1 ms a token beside 10 ms steps: bursts of steps ending close
# together find it busy, so some passes handle several steps (the walked stretches).
SERVER = dataclasses.replace(BARE, output_s_per_pass=2e-3, output_s_per_token=0.1e-3)


def eager(tl: Timeline) -> Timeline:
    """The same timeline with every column built whole."""
    return Timeline(*(getattr(tl, f.name) for f in dataclasses.fields(Timeline)))


@pytest.mark.parametrize("n", [0, 1, 7, 40, 41, 1000, 4099])
def test_a_sum_in_pieces_is_numpys_whole_sum_to_the_bit(monkeypatch, n):
    # numpy adds a float array pairwise (halves, the first a multiple of 8, down to blocks of at most 128
    # added in eight lanes); with pieces of 40 steps the split above them is ours, and any other split
    # rounds differently on random values: a half of n // 2 without the multiple of 8 fails at n = 1000
    # and 4099, halving blocks of 128 or fewer too fails at 4099 (both tried)
    monkeypatch.setattr(records, "CHUNK_STEPS", 40)
    rng = np.random.default_rng(n)
    step_s, seqs = rng.random(n) * 1e-2, rng.integers(1, 100, n).astype(np.int8)
    tl = Timeline(np.zeros(n, np.int8), np.cumsum(step_s), step_s, seqs, seqs, seqs, seqs, step_s, 100)
    assert tl.time_weighted_sum("num_seqs") == float(np.sum(seqs * step_s))
    assert tl.time_weighted_sum("kv_usage") == float(np.sum(seqs / 100 * step_s))


def bursts(n, seed):
    """Step ends: runs of back-to-back 1-3 ms steps (the API server falls behind), then idle gaps."""
    rng = np.random.default_rng(seed)
    gaps = np.where(rng.random(n) < 0.1, rng.random(n) * 50e-3, 1e-3 + rng.random(n) * 2e-3)
    return np.cumsum(gaps), rng.integers(1, 30, n)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_api_server_fed_in_chunks_gives_one_passs_times(seed):
    ends, seqs = bursts(5000, seed)
    whole = client_visible_s(SERVER, ends, seqs)
    assert np.any(np.diff(whole) == 0)                 # some passes handled several steps (stretches walked)
    server, got_ends, got = ApiServer(SERVER), [], []
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, 5000), 40, replace=False)).tolist()
    for a, b in zip([0, *cuts], [*cuts, 5000], strict=True):
        e, c = server.feed(ends[a:b], seqs[a:b], b == 5000)
        got_ends.append(e)
        got.append(c)
    assert np.array_equal(np.concatenate(got_ends), ends)       # every step handed out once, in order
    assert np.array_equal(np.concatenate(got), whole)


def test_the_log_rebuilds_every_end_time_and_count():
    rec = Recorder()
    # replica 0: a step, an idle wait (its end is not the last end plus its duration), a decode run;
    # replica 1 interleaved; one decode run whose ends are not the running sums (kept as they are)
    rec.step(0, 0.5, 0.5, 2, 600, 0, 3)
    rec.step(1, 0.25, 0.25, 1, 300, 0, 300)                 # 300 blocks: the KV column widens to 2 bytes
    rec.step(0, 2.0, 0.5, 2, 2, 2, 4)                       # after an idle wait: ends at 2.0, not 1.0
    run = [2.0 + 0.1, 2.0 + 0.1 + 0.2, 2.0 + 0.1 + 0.2 + 0.15]    # the running sums, as the replica adds them
    rec.decode_run(0, run, [0.1, 0.2, 0.15], 2, [4, 4, 5])
    rec.decode_run(1, [0.5, 0.75, 1.25], [0.25, 0.25, 0.25], 1, [300, 301, 301])    # 1.25: a jump, not 1.0
    r = rec.result(400, 2, 0, BARE)
    tl = r.timeline
    # by time, then replica; the log kept each replica's first end, the idle wait and the jump, and rebuilt
    # the others as its own running sums: equal to the bit to the ends recorded
    assert tl.end_s.tolist() == [0.25, 0.5, 0.5, 0.75, 1.25, 2.0, *run]
    assert tl.replica.tolist() == [1, 0, 1, 1, 1, 0, 0, 0, 0]
    assert tl.new_tokens.tolist() == [300, 600, 1, 1, 1, 2, 2, 2, 2]
    assert tl.kv_used_blocks.dtype == np.int16 and tl.kv_used_blocks.tolist() == [300, 3, 300, 301, 301, 4, 4, 4, 5]
    assert tl.step_s.tolist() == [0.25, 0.5, 0.25, 0.25, 0.25, 0.5, 0.1, 0.2, 0.15]


def test_a_stretch_from_its_start_logs_what_its_ends_would():
    # `stretch` takes the ends as the running sums from its start, so it compares only the first with the replica's
    # previous end plus its duration: the same log as `steps` given those ends (0.1 + 0.2 != 0.3 in floats)
    durations = [[0.1, 0.2], [0.2, 0.1, 0.3], [0.25]]
    starts = [0.0, 0.1 + 0.2, 5.0]                # the second continues the first; the third after an idle wait
    logs = []
    for use_stretch in (True, False):
        rec = Recorder()
        for start, step_s in zip(starts, durations, strict=True):
            ends = list(accumulate(step_s, initial=start))[1:]
            counts = [(3, 3, 3, len(step_s))]
            if use_stretch:
                rec.stretch(0, start, ends[-1], step_s, [4] * len(step_s), counts)
            else:
                rec.steps(0, ends, step_s, [4] * len(step_s), counts)
        tl = rec.result(10, 1, 0, BARE).timeline
        logs.append((list(rec._break_at), list(rec._break_end), tl.end_s.tolist(), tl.num_seqs.tolist()))
    assert logs[0] == logs[1]
    assert logs[0][0] == [0, 5]             # the first step of the replica and the one after the idle wait
    assert logs[0][2][-1] == 5.25


def test_one_replicas_timeline_is_read_from_the_log_in_chunks(monkeypatch):
    lengths = Lengths("uniform", 0, 0, 50, 400), Lengths("uniform", 0, 0, 2, 60)
    spec = WorkloadSpec(300, Arrivals("poisson", 8.0), *lengths)
    config = sim_config(engine_loop=SERVER)
    model = LinearStepModel()
    whole = simulate(config, model, spec, seed=4)
    monkeypatch.setattr(records, "CHUNK_STEPS", 64)     # ~ 60 chunks: every carry across a chunk is used
    chunked = simulate(config, model, spec, seed=4)
    assert isinstance(chunked.timeline, LoggedTimeline) and len(chunked.timeline) > 20 * 64
    for k, v in whole.columns.items():
        assert np.array_equal(v, chunked.columns[k], equal_nan=True), k
    for f in dataclasses.fields(Timeline):
        assert np.array_equal(getattr(whole.timeline, f.name), getattr(chunked.timeline, f.name)), f.name
    assert repr(summarise(whole)) == repr(summarise(chunked))
    # and the same columns built whole (the Timeline every caller built before) give the same summary
    assert repr(summarise(dataclasses.replace(chunked, timeline=eager(chunked.timeline)))) == repr(summarise(whole))


def test_the_log_keeps_about_nine_bytes_a_decode_step():
    # 10,000 decode steps of 8 or 9 sequences in runs of 20: 8 bytes of duration and 1 of KV blocks a step,
    # a run's counts once (4 one-byte counts and a 4-byte length, 8 bytes a run: 0.4 a step), no end
    # time but the first: 9.4 bytes a step, where one row a step of two times and five counts took 23
    rec, t = Recorder(), 0.0
    for run in range(500):
        durations = [0.01 + 1e-5 * i for i in range(20)]
        ends = []
        for d in durations:
            t += d
            ends.append(t)
        rec.decode_run(0, ends, durations, 8 + run % 2, [100 + run % 20] * 20)
    log = rec.result(1000, 1, 0, BARE).timeline.log
    total = sum(a.nbytes for a in (log.step_s, log.kv_used_blocks, log.break_at, log.break_end_s,
                                   *log.runs.values()))
    assert len(log.step_s) == 10_000 and len(log.break_at) == 1 and len(log.runs["steps"]) == 500
    assert total / 10_000 == pytest.approx(9.4 + 16 / 10_000)


def test_summarising_one_replicas_run_builds_no_step_sized_array(monkeypatch):
    # 40 requests of 1,000 tokens at 0.1/s (each decodes for about 6 s, 10 s apart on average): about
    # 30,000 steps (some overlap), each of one sequence or a few. Summarised without the ITL (as a
    # gateway's pools are), the log is read 256 steps at a time: the sums, busy time and peak KV usage
    # allocate a few 2 KB chunks (and the per-request columns, 40 rows), never one 8-byte value a step
    # (240 KB), which reading one column whole (the client times) does take
    import tracemalloc

    monkeypatch.setattr(records, "CHUNK_STEPS", 256)
    spec = WorkloadSpec(40, Arrivals("poisson", 0.1), Lengths("fixed", 100), Lengths("fixed", 1000))
    r = simulate(sim_config(), LinearStepModel(), spec, seed=1)
    steps = len(r.timeline)
    assert steps > 30_000

    def peak_bytes(read):
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            read()
            return tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()

    assert peak_bytes(lambda: summarise(r, itl=False)) < 8 * steps / 4
    assert peak_bytes(lambda: r.timeline.client_s) >= 8 * steps


def finished(request_id: int, **kw):
    """What `Recorder.request_done` reads of a finished request."""
    from types import SimpleNamespace

    from simulator.request import Status

    fields = dict(request_id=request_id, status=Status.FINISHED, tenant=0, adapter_id=-1,
                  schema_id=-1, prompt_tokens=100, output_tokens=10, num_output_tokens=10,
                  num_cached_prompt_tokens=0, num_preemptions=0, num_holdbacks=0, arrival_s=0.5 * request_id,
                  scheduled_s=0.5 * request_id, first_token_s=0.5 * request_id + 0.1,
                  finished_s=0.5 * request_id + 0.2, itl_gaps_s=[], reject_reason="")
    return SimpleNamespace(**{**fields, **kw})


def test_a_request_is_recorded_in_80_bytes_until_an_id_needs_8_byte_integers():
    # 12 integers of 4 bytes and 4 floats of 8: 80 bytes a request as the run goes (int64 rows took 128); an id
    # past 2^31 - 1 widens the rows to 8-byte integers, keeping every value. The result's columns are int64 either way
    rec = Recorder()
    for i in (3, 1, 2):
        rec.request_done(finished(i), 0)
    assert rec._req_ints.itemsize * len(rec._req_ints) + rec._req_floats.itemsize * len(rec._req_floats) == 3 * 80
    big = 2**31 + 5
    rec.request_done(finished(big, prompt_tokens=2**31), 0)
    rec.request_done(finished(0), 0)
    assert rec._req_ints.itemsize == 8
    rec.step(0, 1.0, 0.5, 1, 1, 1, 10)
    c = rec.result(1000, 1, 0, BARE).columns
    assert c["request_id"].tolist() == [0, 1, 2, 3, big]                   # sorted by id
    assert c["prompt_tokens"].tolist() == [100, 100, 100, 100, 2**31]
    assert c["request_id"].dtype == c["prompt_tokens"].dtype == np.int64 and c["rejected"].dtype == bool
    assert c["arrival_s"].tolist() == [0.0, 0.5, 1.0, 1.5, 0.5 * big]


def test_request_frames_come_in_chunks_that_make_the_one_frame():
    # 300 requests on a 150-block cache, some rejected (a reason each): frames of 7 rows, 43 of them (300 = 42 x 7
    # + 6), concatenated, are the one frame of every request, and their CSVs (the header once) are its CSV
    spec = WorkloadSpec(300, Arrivals("poisson", 20.0), Lengths("uniform", min_tokens=10, max_tokens=3000),
                        Lengths("uniform", min_tokens=1, max_tokens=200))
    r = simulate(sim_config(num_blocks=150, max_model_len=3000), LinearStepModel(), spec, seed=4)
    frames = list(r.request_frames(7))
    assert [len(f) for f in frames] == [7] * 42 + [6]
    whole = r.requests
    assert whole["rejected"].any() and (whole.loc[whole["rejected"], "reject_reason"].str.len() > 0).all()
    assert "".join(f.to_csv(index=False, header=i == 0) for i, f in enumerate(frames)) == whole.to_csv(index=False)
