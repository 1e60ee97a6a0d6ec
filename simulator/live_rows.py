"""Per-request rows handed out while a run goes, as soon as each is final (`--requests-csv` written as requests
finish).

A row's engine values are final when the request finishes; its client-visible times (`ttft_ms`, `e2e_ms`,
`tpot_ms`) are not: they are the client times of the steps that sampled its first and last tokens, and the API
server batches a step's outputs with those of the steps that end while it is busy (`ApiServer`), so a step's client
time is final only once a later step of its replica finds the server idle. `ClientTimes` feeds each replica's
`ApiServer` the steps as they are recorded, a chunk at a time (the chunked feed gives the times of one pass over
every step, to the bit), and keeps the settled (end, client) pairs back to a floor below which no request still
to come can have a token. `LiveRows` holds the rows of finished requests until both their times are settled, then
hands them out with the same derived columns as `SimulationResult.columns` (`derived_columns`, one formula).

The floor: every request not yet finished arrives no earlier than the last request before it in id order (ids
0..n-1 in arrival order: `Workload.requests`, the gateway's draws), less the caller's `skew_s` (a closed loop's:
unbounded, as a client sends when its answer has reached it, however far its replica's API server lags: nothing
is let go), and its tokens come after its arrival. A lookup below the floor (ids further out of arrival order)
raises rather than writing a wrong time.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from itertools import accumulate

import numpy as np

import simulator.records as records
from simulator.engine_loop import EngineLoop
from simulator.records import ApiServer, Recorder, client_time_of, derived_columns

Rows = tuple[dict[str, np.ndarray], dict[int, str]]     # columns (as SimulationResult.columns) and reject reasons


class ClientTimes:
    """Each replica's step ends and client times, fed as the steps are recorded."""

    def __init__(self, loop: EngineLoop):
        self.loop = loop
        self.servers: list[ApiServer] = []
        self.new_ends: list[array] = []          # recorded since the last feed
        self.new_seqs: list[array] = []
        self.ends: list[np.ndarray] = []         # settled, from the floor on
        self.client: list[np.ndarray] = []
        self.floor_s: list[float] = []           # pairs ending before it were let go

    def _replica(self, replica: int) -> None:
        while replica >= len(self.servers):
            self.servers.append(ApiServer(self.loop))
            self.new_ends.append(array("d"))
            self.new_seqs.append(array("q"))
            self.ends.append(np.array([], float))
            self.client.append(np.array([], float))
            self.floor_s.append(-math.inf)

    def step(self, replica: int, end_s: float, num_seqs: int) -> None:
        if replica >= len(self.servers):
            self._replica(replica)
        self.new_ends[replica].append(end_s)
        self.new_seqs[replica].append(num_seqs)

    def steps(self, replica: int, end_s: list[float], counts: list[tuple[int, int, int, int]]) -> None:
        if replica >= len(self.servers):
            self._replica(replica)
        self.new_ends[replica].fromlist(end_s)
        seqs = self.new_seqs[replica]
        for num_seqs, _, _, k in counts:
            seqs.fromlist([num_seqs] * k)

    def feed(self, final: bool) -> None:
        """Every replica's recorded steps to its API server; the settled ones kept."""
        for r, server in enumerate(self.servers):
            ends, seqs = np.array(self.new_ends[r], float), np.array(self.new_seqs[r], np.int64)
            self.new_ends[r], self.new_seqs[r] = array("d"), array("q")
            out_end, out_client = server.feed(ends, seqs, final)
            if len(out_end):
                self.ends[r] = np.concatenate([self.ends[r], out_end])
                self.client[r] = np.concatenate([self.client[r], out_client])

    def trim(self, floor_s: float) -> None:
        """Let go of the pairs ending before `floor_s` (no request still to be looked up has a token before it)."""
        for r, ends in enumerate(self.ends):
            cut = int(np.searchsorted(ends, floor_s, "left"))
            if cut:
                self.ends[r], self.client[r] = ends[cut:].copy(), self.client[r][cut:].copy()
                self.floor_s[r] = floor_s

    def lookup(self, times_s: np.ndarray, replica: np.ndarray, final: bool) -> tuple[np.ndarray, np.ndarray]:
        """Client arrival of tokens sampled at `times_s` on `replica` (`client_time_of`, as the result's columns), and
        which are settled (no later step of the replica can end at that time)."""
        out, ready = times_s.copy(), np.ones(len(times_s), bool)
        real = np.flatnonzero(times_s >= 0)          # NaN and -1: no token, the time itself
        for r in np.unique(replica[real]).tolist():
            idx = real[replica[real] == r]
            t = times_s[idx]
            if r >= len(self.servers):               # no step recorded on it yet
                ready[idx] = final
                continue
            ends = self.ends[r]
            if (t < self.floor_s[r]).any():
                raise RuntimeError("live request rows: a token before the trimmed floor (ids not in arrival order)")
            if not final:
                ready[idx] = t <= (ends[-1] if len(ends) else -math.inf)
            if len(ends):
                out[idx] = client_time_of(t, ends, self.client[r])
        return out, ready


class LiveRows:
    """Rows of finished requests waiting for their client times; handed out, sorted by id, once settled."""

    def __init__(self, loop: EngineLoop):
        self.loop = loop
        self.times = ClientTimes(loop)
        self.pending: dict[str, np.ndarray] | None = None
        self.reasons: dict[int, str] = {}

    def take(self, columns: dict[str, np.ndarray], reasons: dict[int, str]) -> None:
        """Rows of requests that finished (any order)."""
        if self.pending is None:
            self.pending = columns
        else:
            self.pending = {k: np.concatenate([v, columns[k]]) for k, v in self.pending.items()}
        self.reasons |= reasons

    def ready(self, final: bool) -> Rows | None:
        """The rows whose client times are settled (every row when `final`), sorted by id, with their derived
        columns; None if none."""
        self.times.feed(final)
        c = self.pending
        if c is None or not len(c["request_id"]):
            return None
        first, ok_first = self.times.lookup(c["first_token_s"], c["replica"], final)
        last, ok_last = self.times.lookup(c["finished_s"], c["replica"], final)
        ok = ok_first & ok_last
        if not ok.any():
            return None
        out = np.flatnonzero(ok)
        out = out[np.argsort(c["request_id"][out], kind="stable")]
        rows = {k: v[out] for k, v in c.items()}
        rows = derived_columns(rows, first[out], last[out], self.loop)
        keep = ~ok
        self.pending = {k: v[keep] for k, v in c.items()}
        reasons = {i: self.reasons.pop(i) for i in rows["request_id"][rows["rejected"]].tolist()}
        return rows, reasons

    def trim(self, floor_s: float) -> None:
        """No request still to come has a token before `floor_s`: let go of the step pairs before it (and before the
        waiting rows' arrivals)."""
        c = self.pending
        if c is not None and len(c["arrival_s"]):
            floor_s = min(floor_s, float(c["arrival_s"].min()))
        self.times.trim(floor_s)


class InOrder:
    """Rows handed on in request-id order, a contiguous run at a time (ids 0..n-1): a row waits for every row
    before it. The last handed on row's arrival is the floor for the requests still to come."""

    def __init__(self, emit: Callable[[dict[str, np.ndarray], dict[int, str]], None]):
        self.emit = emit
        self.next_id = 0
        self.floor_s = -math.inf
        self.held: dict[str, np.ndarray] | None = None
        self.reasons: dict[int, str] = {}

    def take(self, rows: Rows | None, final: bool) -> None:
        if rows is not None:
            cols, reasons = rows
            self.held = cols if self.held is None else {k: np.concatenate([v, cols[k]]) for k, v in self.held.items()}
            self.reasons |= reasons
            order = np.argsort(self.held["request_id"], kind="stable")
            self.held = {k: v[order] for k, v in self.held.items()}
        if self.held is None:
            return
        ids = self.held["request_id"]
        gaps = np.flatnonzero(ids != self.next_id + np.arange(len(ids)))
        n = len(ids) if final or not len(gaps) else int(gaps[0])
        if n == 0:
            return
        part = {k: v[:n] for k, v in self.held.items()}
        self.held = {k: v[n:] for k, v in self.held.items()}
        reasons = {i: self.reasons.pop(i) for i in part["request_id"][part["rejected"]].tolist()}
        self.next_id = int(part["request_id"][-1]) + 1
        self.floor_s = float(part["arrival_s"][-1])
        self.emit(part, reasons)


class LiveRecorder(Recorder):
    """A `Recorder` that also feeds its steps' ends to `ClientTimes` and hands out its finished requests' rows once
    final (`ready`); its `result` is a plain recorder's."""

    def __init__(self, loop: EngineLoop):
        super().__init__()
        self.live = LiveRows(loop)
        self.taken = 0                  # rows handed to `live` so far

    def step(self, replica: int, end_s: float, step_s: float, num_seqs: int, new_tokens: int, itl_seqs: int,
             kv_used_blocks: int) -> None:
        super().step(replica, end_s, step_s, num_seqs, new_tokens, itl_seqs, kv_used_blocks)
        self.live.times.step(replica, end_s, num_seqs)

    def steps(self, replica: int, end_s: list[float], step_s: list[float], kv_used_blocks: list[int],
              counts: list[tuple[int, int, int, int]]) -> None:
        super().steps(replica, end_s, step_s, kv_used_blocks, counts)
        self.live.times.steps(replica, end_s, counts)

    def stretch(self, replica: int, start_s: float, end_s: float, step_s: list[float], kv_used_blocks: list[int],
                counts: list[tuple[int, int, int, int]]) -> None:
        super().stretch(replica, start_s, end_s, step_s, kv_used_blocks, counts)
        # the ends as the caller summed them (each the end before plus its duration, in order): the same floats
        self.live.times.steps(replica, list(accumulate(step_s, initial=start_s))[1:], counts)

    def ready(self, final: bool) -> Rows | None:
        """The rows of finished requests whose client times are settled and not handed out before (every one left
        when `final`: at the run's end), sorted by id."""
        if self.num_done > self.taken:
            self.live.take(*self.rows(self.taken))
            self.taken = self.num_done
        return self.live.ready(final)

    def close(self) -> None:
        """At the run's end, its rows handed out (or read from its result): the API servers' pairs and the rows
        waiting are let go before the result is built."""
        self.live = LiveRows(self.live.loop)


def every_chunk(progress: Callable[[int], None] | None, flush: Callable[[], None]) -> Callable[[int], None]:
    """A run's per-request callback (`progress`, told the requests done so far) that also calls `flush` after every
    `records.REQUEST_CHUNK_ROWS` of them."""
    def done(n: int) -> None:
        if progress is not None:
            progress(n)
        if n % records.REQUEST_CHUNK_ROWS == 0:
            flush()
    return done
