"""Rows handed out while a run goes (simulator/live_rows.py): the client times of tokens looked up as steps are fed
in chunks are the end-of-run ones (`records._at_client` over one pass), settled only once no later step can change
them, and a lookup below the trimmed floor raises instead of guessing."""

import numpy as np
import pytest
from test_records import SERVER, bursts

from simulator.live_rows import ClientTimes
from simulator.records import Timeline, _at_client, client_visible_s


def test_tokens_looked_up_as_steps_are_fed_get_the_end_of_run_client_times():
    # two replicas of bursty steps (the API server falls behind, so some steps' times settle only later), fed in
    # chunks of 300 steps each; tokens at step ends and between them (no step: the time itself)
    ends, seqs = bursts(3000, 7)
    rng = np.random.default_rng(7)
    replica = np.repeat([0, 1], 1500)
    client = np.concatenate([client_visible_s(SERVER, ends[replica == r], seqs[replica == r]) for r in (0, 1)])
    tl = Timeline(replica, ends, ends, seqs, seqs, seqs, seqs, client, 1)
    queries = np.where(rng.random(400) < 0.7, rng.choice(ends, 400), rng.random(400) * ends[-1])
    where = np.where(np.isin(queries, ends), replica[np.searchsorted(ends, queries)], rng.integers(0, 2, 400))
    expected = _at_client(queries, where, tl)
    times, got, settled_at = ClientTimes(SERVER), np.full(400, np.nan), np.full(400, -1)
    for k, a in enumerate(range(0, 1500, 300)):
        for r in (0, 1):
            mine = np.flatnonzero(replica == r)[a:a + 300]
            times.steps(r, ends[mine].tolist(), [(int(s), 0, 0, 1) for s in seqs[mine]])
        times.feed(a + 300 == 1500)
        out, ready = times.lookup(queries, where, a + 300 == 1500)
        new = ready & (settled_at < 0)
        got[new], settled_at[new] = out[new], k
    assert np.array_equal(got, expected)                  # to the bit, each as first settled
    assert (settled_at < 4).any() and (settled_at == 4).any()     # settled along the way, and only at the end


def test_a_lookup_below_the_trimmed_floor_raises():
    times = ClientTimes(SERVER)
    times.steps(0, [1.0, 2.0, 3.0], [(1, 0, 0, 3)])
    times.feed(True)
    whole = client_visible_s(SERVER, np.array([1.0, 2.0, 3.0]), np.array([1, 1, 1]))
    times.trim(2.5)                                       # no token still to come before 2.5 s
    out, ready = times.lookup(np.array([3.0, 2.7]), np.array([0, 0]), False)
    assert ready.all() and out.tolist() == [whole[2], 2.7]   # a step's client time; no step then: the time itself
    with pytest.raises(RuntimeError, match="floor"):       # ids not in arrival order: a row would be wrong
        times.lookup(np.array([2.0]), np.array([0]), False)
