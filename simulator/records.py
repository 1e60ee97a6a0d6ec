"""What a run leaves behind: one row per request and a compact log of its engine steps.

Rows are appended to `array.array` columns (8 bytes a float, 4 a request's integer unless one needs 8, 1 to 4 an
engine step's count, no Python object per value) and read as numpy arrays in place at the end (`np.frombuffer`, no
copy).
The step log keeps what cannot be derived: each step's duration (8 bytes) and KV blocks in use (1 to 4);
its counts (replica, batch size, new tokens, ITL sequences) once per run of equal counts, a decode run's
steps sharing one row; and its end time only where it is not the previous step's end plus its duration
(after an idle wait): every other end is that sum, the simulator's own addition, rebuilt in order. One
replica's timeline is read from the log in chunks (`LoggedTimeline`): a run's sums, the API server's
client times and the requests' first and last tokens as the client sees them never hold a step-sized
array; a column is built whole only when it is read whole.
At the end the rows become the result's columns, arrays of numbers (`SimulationResult.columns`), and the rows are
let go: a run holds about 80 bytes a request as it goes and about 177 at the end (the metrics' columns). Per-request
records as text exist only when asked for, a chunk of rows at a time (`SimulationResult.request_frames`): the
pandas DataFrame is built only then, since importing pandas costs more wall time than simulating a thousand
requests, and summaries do not need it.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from simulator.engine_loop import EngineLoop
from simulator.request import Request, Status

# Per request: integer and float values, one row each in two flat arrays (one `fromlist` call
# per request), split into columns in this order at the end. The integers go in 4 bytes (`_REQUEST_INT`) until
# one does not fit (a trace's request id past 2^31), then in 8; their columns are int64 either way.
# `adapter` (LoRA, -1 the base model) and `schema` (structured output, -1 none) say what each request
# asked for, `lora_holdbacks` how many steps it waited for an adapter slot: a user can audit both.
_REQUEST_COLUMNS = ("request_id", "replica", "tenant", "adapter", "schema", "arrival_s",
                    "prompt_tokens", "output_tokens", "generated_tokens", "cached_prompt_tokens", "scheduled_s",
                    "first_token_s", "finished_s", "preemptions", "lora_holdbacks", "rejected")
_REQUEST_INTS = ("request_id", "replica", "tenant", "adapter", "schema", "prompt_tokens",
                 "output_tokens", "generated_tokens", "cached_prompt_tokens", "preemptions", "lora_holdbacks",
                 "rejected")
_REQUEST_FLOATS = ("arrival_s", "scheduled_s", "first_token_s", "finished_s")
# Per run of steps with the same counts: how many steps, then the counts, each in the narrowest signed
# integer its values so far fit (one byte, then two, then four: a column widens when a value does not fit,
# the only time an append fails). Every bound on a count is below 2^31, and a value past it raises
# OverflowError rather than wrapping. A million requests of the standard workload are about 5.2 M steps.
_RUN_COLUMNS = {"replica": "b", "num_seqs": "b", "new_tokens": "b", "itl_seqs": "b", "steps": "i"}
_COUNTS = ("replica", "num_seqs", "new_tokens", "itl_seqs")
_WIDER = {"b": "h", "h": "i"}
_REQUEST_INT, _REQUEST_INT_WIDE = "i", "q"
REQUEST_CHUNK_ROWS = 1 << 16     # per-request records built (and written) this many rows at a time
CHUNK_STEPS = 1 << 16        # steps read from the log at a time (0.5 MB a float column)
_NUMPY_BLOCK = 128           # numpy's pairwise summation adds blocks up to this size without halving them


@dataclass(frozen=True)
class Timeline:
    """Per engine step, all replicas, ordered by end time (then replica)."""
    replica: np.ndarray
    end_s: np.ndarray
    step_s: np.ndarray
    num_seqs: np.ndarray        # batch size
    new_tokens: np.ndarray
    itl_seqs: np.ndarray        # sequences whose token this step counts as one step-long ITL
    kv_used_blocks: np.ndarray  # the replica's KV blocks in use after scheduling
    client_s: np.ndarray        # when the step's tokens reach the client (client_visible_s)
    num_blocks: int             # KV blocks of each replica

    def __len__(self) -> int:
        return len(self.step_s)

    @property
    def kv_usage(self) -> np.ndarray:
        """Fraction of the replica's KV blocks in use after scheduling, per step (built on each use:
        a step-sized array kept only while it is read)."""
        return self.kv_used_blocks / self.num_blocks

    def column(self, name: str, start: int, stop: int) -> np.ndarray:
        """Steps [start, stop) of a column (or of `kv_usage`)."""
        if name == "kv_usage":
            return self.column("kv_used_blocks", start, stop) / self.num_blocks
        return getattr(self, name)[start:stop]

    def time_weighted_sum(self, name: str) -> float:
        """The sum over steps of the column times the step's duration, added as `np.sum` adds the
        whole product (pairwise), one chunk of the product at a time."""
        return pairwise_sum(0, len(self), lambda a, b: self.column(name, a, b) * self.column("step_s", a, b))

    def client_gaps(self, out: np.ndarray) -> None:
        """One replica's steps: into `out`, the gap before each step's tokens as the client sees them, from the step
        before's (the first step's own time before it)."""
        client = self.client_s
        out[0] = self.step_s[0]
        np.subtract(client[1:], client[:-1], out=out[1:])

    @property
    def peak_kv_usage(self) -> float:
        """The largest `kv_usage` (dividing by the block count keeps the order: the largest count's share)."""
        if len(self) == 0:
            return 0.0
        used = self.kv_used_blocks
        i = int(np.argmax(used))
        return float((used[i:i + 1] / self.num_blocks)[0])


def pairwise_sum(start: int, stop: int, terms: Callable[[int, int], np.ndarray]) -> float:
    """`np.sum` of the terms [start, stop), to the bit: numpy adds a float array pairwise, halving it
    (the first half a multiple of 8) down to blocks of at most 128 that it adds in eight lanes; the halves
    above CHUNK_STEPS are split here the same way and each piece summed by numpy
    (tests/simulator/test_records.py compares them)."""
    n = stop - start
    if n <= CHUNK_STEPS or n <= _NUMPY_BLOCK:
        return float(np.sum(terms(start, stop))) if n else 0.0
    half = n // 2
    half -= half % 8
    return pairwise_sum(start, start + half, terms) + pairwise_sum(start + half, stop, terms)


@dataclass
class SimulationResult:
    # Per request, sorted by request_id; times in s, latencies in ms. `ttft_ms`, `e2e_ms` and
    # `tpot_ms` are what a client measures (from its send to the tokens' arrival through the
    # API server); `engine_ttft_ms`, `engine_e2e_ms`, `engine_tpot_ms` what the engine's own
    # metrics report (from the request reaching the engine to the step that sampled the token).
    columns: dict[str, np.ndarray]
    reject_reasons: dict[int, str]   # request_id -> why it was rejected
    timeline: Timeline
    itl_gaps_s: np.ndarray           # inter-token gaps not one step long (preemption, transfer), sorted
    num_replicas: int
    num_preemptions: int
    engine_loop: EngineLoop
    leaks: tuple[str, ...] = ()      # what the run left held at its end (Cluster.leaks): empty unless a bug

    @property
    def requests(self):
        """Per-request records as one pandas DataFrame (built once, on first use; `request_frames` builds them a
        chunk of rows at a time)."""
        frame = self.__dict__.get("_frame")
        if frame is None:
            frame = next(self.request_frames(max(len(self.columns["request_id"]), 1)))
            self.__dict__["_frame"] = frame
        return frame

    def request_frames(self, rows: int | None = None) -> Iterator:
        """Per-request records as pandas DataFrames of `rows` requests each (default REQUEST_CHUNK_ROWS), in request
        order (one frame, empty, for a run of none): each built when asked for, so no frame of every request is held."""
        return request_frames(self.columns, self.reject_reasons, rows)


def request_frames(columns: dict[str, np.ndarray], reject_reasons: dict[int, str], rows: int | None = None) -> Iterator:
    """`request_tables` as pandas DataFrames."""
    import pandas as pd

    return (pd.DataFrame(table) for table in request_tables(columns, reject_reasons, rows))


def request_tables(columns: dict[str, np.ndarray], reject_reasons: dict[int, str],
                   rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Requests' columns (as `SimulationResult.columns`) `rows` requests at a time (default REQUEST_CHUNK_ROWS), with
    each one's reject reason (a text column); one table, empty, for no requests."""
    rows = rows or REQUEST_CHUNK_ROWS
    for start in range(0, max(len(columns["request_id"]), 1), rows):
        table = {k: v[start:start + rows] for k, v in columns.items()}
        table["reject_reason"] = np.array([reject_reasons.get(i, "") for i in table["request_id"].tolist()], object)
        yield table


class Recorder:
    def __init__(self) -> None:
        self._req_ints, self._req_floats = array(_REQUEST_INT), array("d")
        self._step_s, self._kv = array("d"), array("b")
        self._runs = {k: array(t) for k, t in _RUN_COLUMNS.items()}
        self._run_columns = tuple(self._runs.values())      # in _RUN_COLUMNS order, for the hot paths
        self._run_key: tuple[int, int, int, int] | None = None
        self._last_end: list[float] = []                     # per replica: its last step's end (NaN: none yet)
        self._break_at, self._break_end = array("q"), array("d")
        self._reasons: dict[int, str] = {}
        self._gaps = array("d")
        self.num_done = 0

    def request_done(self, req: Request, replica: int) -> None:
        """Record a request that finished or was rejected."""
        rejected = req.status is Status.REJECTED
        row = [req.request_id, replica, req.tenant, req.adapter_id, req.schema_id, req.prompt_tokens,
               req.output_tokens, req.num_output_tokens, req.num_cached_prompt_tokens, req.num_preemptions,
               req.num_holdbacks, rejected]
        try:
            self._req_ints.fromlist(row)           # a failed fromlist leaves the rows as they were
        except OverflowError:
            if self._req_ints.typecode == _REQUEST_INT_WIDE:
                raise
            wide = array(_REQUEST_INT_WIDE)
            wide.frombytes(_view(self._req_ints).astype(np.int64).tobytes())
            self._req_ints = wide
            self._req_ints.fromlist(row)
        self._req_floats.fromlist([req.arrival_s, req.scheduled_s, req.first_token_s, req.finished_s])
        if rejected:
            self._reasons[req.request_id] = req.reject_reason
        if req.itl_gaps_s:
            self._gaps.extend(req.itl_gaps_s)
        self.num_done += 1

    def step(self, replica: int, end_s: float, step_s: float, num_seqs: int, new_tokens: int, itl_seqs: int,
             kv_used_blocks: int) -> None:
        last = self._last_end
        if replica >= len(last):
            last.extend([math.nan] * (replica + 1 - len(last)))
        if end_s != last[replica] + step_s:
            self._break_at.append(len(self._step_s))
            self._break_end.append(end_s)
        last[replica] = end_s
        try:
            self._kv.append(kv_used_blocks)
        except OverflowError:
            self._append_kv([kv_used_blocks])
        self._step_s.append(step_s)
        self._count(replica, ((num_seqs, new_tokens, itl_seqs, 1),))

    def decode_run(self, replica: int, end_s: list[float], step_s: list[float], num_seqs: int,
                   kv_used_blocks: list[int]) -> None:
        """Record k pure-decode steps of `num_seqs` sequences at once: one run of counts, and end times only
        where one is not the step before's plus its duration (checked, not assumed)."""
        if end_s:
            self.steps(replica, end_s, step_s, kv_used_blocks, [(num_seqs, num_seqs, num_seqs, len(end_s))])

    def steps(self, replica: int, end_s: list[float], step_s: list[float], kv_used_blocks: list[int],
              counts: list[tuple[int, int, int, int]]) -> None:
        """Record consecutive steps of one replica at once (at least one), as `step` records each: `counts` holds
        (sequences, new tokens, ITL sequences, steps) for each stretch of them with the same counts, in order."""
        last = self._last_end
        if replica >= len(last):
            last.extend([math.nan] * (replica + 1 - len(last)))
        if list(accumulate(step_s, initial=last[replica]))[1:] != end_s:
            prev, at = last[replica], len(self._step_s)
            for i, (e, s) in enumerate(zip(end_s, step_s, strict=True)):
                if e != prev + s:
                    self._break_at.append(at + i)
                    self._break_end.append(e)
                prev = e
        last[replica] = end_s[-1]
        self._append(replica, step_s, kv_used_blocks, counts)

    def stretch(self, replica: int, start_s: float, end_s: float, step_s: list[float], kv_used_blocks: list[int],
                counts: list[tuple[int, int, int, int]]) -> None:
        """`steps` of consecutive steps whose ends are the caller's running sum from `start_s` (each the end before
        plus its duration, added in order), the last `end_s`: only the first end can differ from the replica's
        previous end plus its duration (after an idle wait), so only it is compared."""
        last = self._last_end
        if replica >= len(last):
            last.extend([math.nan] * (replica + 1 - len(last)))
        prev = last[replica]
        if start_s != prev:
            first = start_s + step_s[0]
            if first != prev + step_s[0]:
                self._break_at.append(len(self._step_s))
                self._break_end.append(first)
        last[replica] = end_s
        self._append(replica, step_s, kv_used_blocks, counts)

    def _append(self, replica: int, step_s: list[float], kv_used_blocks: list[int],
                counts: list[tuple[int, int, int, int]]) -> None:
        try:
            self._kv.fromlist(kv_used_blocks)      # a failed fromlist leaves the column as it was
        except OverflowError:
            self._append_kv(kv_used_blocks)
        self._step_s.fromlist(step_s)
        self._count(replica, counts)

    def _append_kv(self, used: list[int]) -> None:
        try:
            self._kv.fromlist(used)                # a failed fromlist leaves the column as it was
        except OverflowError:
            self._kv = _wider(self._kv, "kv_used_blocks")
            self._append_kv(used)

    def _count(self, replica: int, counts: Iterable[tuple[int, int, int, int]]) -> None:
        """Add each (sequences, new tokens, ITL sequences, steps) of `counts` in order: `steps` steps of these counts,
        to the last run when it has the same ones."""
        replicas, seqs, tokens, itl, lengths = self._run_columns
        for num_seqs, new_tokens, itl_seqs, steps in counts:
            key = (replica, num_seqs, new_tokens, itl_seqs)
            if key == self._run_key:
                lengths[-1] += steps
                continue
            try:
                replicas.append(replica)
                seqs.append(num_seqs)
                tokens.append(new_tokens)
                itl.append(itl_seqs)
                lengths.append(steps)
            except OverflowError:
                self._widen_runs()
                self._count(replica, [(num_seqs, new_tokens, itl_seqs, steps)])
                replicas, seqs, tokens, itl, lengths = self._run_columns
                continue
            self._run_key = key

    def _widen_runs(self) -> None:
        """After a run's append overflowed a column: drop the run's appended part and widen that column."""
        cols = self._run_columns
        n = min(len(c) for c in cols)     # appended in order: the failed column is the first of the shortest
        name = next(k for k, c in self._runs.items() if len(c) == n)
        for c in cols:
            del c[n:]
        self._runs[name] = _wider(self._runs[name], name)
        self._run_columns = tuple(self._runs.values())

    def rows(self, start: int) -> tuple[dict[str, np.ndarray], dict[int, str]]:
        """The rows of the requests done since the `start`-th, as columns sorted by request id (copies: the recorder
        keeps its own), and the reject reasons of those rejected."""
        ints, floats = len(_REQUEST_INTS), len(_REQUEST_FLOATS)
        c = _columns(_view(self._req_ints[start * ints:]), _view(self._req_floats[start * floats:]))
        return c, {i: self._reasons[i] for i in c["request_id"][c["rejected"]].tolist()}

    def result(self, num_blocks: int, num_replicas: int, num_preemptions: int,
               engine_loop: EngineLoop) -> SimulationResult:
        """The run's records, once, at its end: the request rows are handed over (this recorder keeps none)."""
        c = _columns(_view(self._req_ints), _view(self._req_floats),
                     lambda: setattr(self, "_req_ints", array(_REQUEST_INT)))   # handed over (the columns are copies)
        self._req_floats = array("d")
        log = StepLog(_view(self._step_s), _view(self._kv), {k: _view(v) for k, v in self._runs.items()},
                      _view(self._break_at), _view(self._break_end))
        replicas = log.runs["replica"]
        if len(replicas) and replicas.min() == replicas.max():      # one replica: its steps in time order
            timeline: Timeline = LoggedTimeline(log, num_blocks, engine_loop)
            first_client, finished_client = timeline.at_client((c["first_token_s"], c["finished_s"]),
                                                               (c["replica"], c["replica"]))
        else:
            timeline = _whole(log, num_blocks, engine_loop)
            first_client = _at_client(c["first_token_s"], c["replica"], timeline)
            finished_client = _at_client(c["finished_s"], c["replica"], timeline)
        c = derived_columns(c, first_client, finished_client, engine_loop)
        return SimulationResult(c, dict(self._reasons), timeline, np.sort(np.array(self._gaps)), num_replicas,
                                num_preemptions, engine_loop)


def _columns(ints: np.ndarray, floats: np.ndarray, let_go: Callable[[], None] = lambda: None) -> dict[str, np.ndarray]:
    """Request rows (`Recorder` order) as columns sorted by request id; `let_go` is called once the integers are
    split, so that their rows can be dropped before the floats are."""
    ints = ints.reshape(-1, len(_REQUEST_INTS))
    floats = floats.reshape(-1, len(_REQUEST_FLOATS))
    order = np.argsort(ints[:, _REQUEST_INTS.index("request_id")], kind="stable")
    split = {k: ints[order, i].astype(np.int64, copy=False) for i, k in enumerate(_REQUEST_INTS)}
    del ints
    let_go()
    split |= {k: floats[order, i] for i, k in enumerate(_REQUEST_FLOATS)}
    del floats, order
    c = {k: split.pop(k) for k in _REQUEST_COLUMNS}
    c["rejected"] = c["rejected"].astype(bool)
    return c


def derived_columns(c: dict[str, np.ndarray], first_client: np.ndarray, finished_client: np.ndarray,
                    engine_loop: EngineLoop) -> dict[str, np.ndarray]:
    """The request columns with their latencies added (ms; NaN where they do not apply), from the client times of
    their first and last tokens (`first_client`, `finished_client`): one formula for the result's columns and the
    rows written while a run goes (simulator.live_rows)."""
    done, ms = ~c["rejected"], 1000.0
    # one stream: no later token reaches the client before the first (a disaggregated request's
    # first token comes through the prefill replica's API server, the rest through the decode one's)
    finished_client = np.fmax(finished_client, first_client)
    engine_arrival = engine_loop.input_done_s(c["arrival_s"], c["prompt_tokens"])
    many = done & (c["output_tokens"] > 1)
    with np.errstate(invalid="ignore"):
        c["queue_ms"] = np.where(done, (c["scheduled_s"] - engine_arrival) * ms, np.nan)
        for prefix, first, last, start in (("", first_client, finished_client, c["arrival_s"]),
                                           ("engine_", c["first_token_s"], c["finished_s"], engine_arrival)):
            c[prefix + "ttft_ms"] = np.where(done, (first - start) * ms, np.nan)
            c[prefix + "e2e_ms"] = np.where(done, (last - start) * ms, np.nan)
            c[prefix + "tpot_ms"] = np.where(many, (last - first) * ms / np.maximum(c["output_tokens"] - 1, 1),
                                             np.nan)
    return c


def _wider(column: array, name: str) -> array:
    """The column in the next wider integer type (four bytes failing: a real overflow, raised)."""
    if column.typecode not in _WIDER:
        raise OverflowError(f"step column {name} overflows a 4-byte integer")
    wide = array(_WIDER[column.typecode])
    wide.frombytes(_view(column).astype(np.dtype(wide.typecode)).tobytes())
    return wide


def _view(column: array) -> np.ndarray:
    """A numpy array over an `array.array`'s buffer (no copy; the array must not grow after)."""
    return np.frombuffer(column, dtype=np.dtype(column.typecode)) if len(column) else np.array([], column.typecode)


@dataclass(frozen=True)
class StepLog:
    """A run's steps as the recorder keeps them, in the order they were recorded."""
    step_s: np.ndarray
    kv_used_blocks: np.ndarray
    runs: dict[str, np.ndarray]          # _RUN_COLUMNS: each run's counts and its number of steps
    break_at: np.ndarray                 # steps whose end is not the step before's (same replica) plus theirs
    break_end_s: np.ndarray              # ... and their ends

    def counts(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Per step [start, stop), a count column (one of _COUNTS), from the runs."""
        stop = len(self.step_s) if stop is None else stop
        steps = self.runs["steps"]
        if start == 0 and stop == len(self.step_s):
            return np.repeat(self.runs[name], steps)
        run_end = np.cumsum(steps)
        first, last = np.searchsorted(run_end, [start, stop - 1], "right").tolist()
        ends = run_end[first:last + 1]
        within = np.minimum(ends, stop) - np.maximum(ends - steps[first:last + 1], start)
        return np.repeat(self.runs[name][first:last + 1], within)

    def end_chunks(self, steps: np.ndarray | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
        """One replica's end times, CHUNK_STEPS at a time, as (start, stop, ends); `steps`: the replica's
        steps (positions in the log; None: every step, one replica's log)."""
        n = len(self.step_s) if steps is None else len(steps)
        carry = math.nan
        for a in range(0, n, CHUNK_STEPS):
            b = min(a + CHUNK_STEPS, n)
            if steps is None:
                v = self.step_s[a:b].copy()
                lo, hi = np.searchsorted(self.break_at, [a, b]).tolist()
                at, ends = self.break_at[lo:hi] - a, self.break_end_s[lo:hi]
            else:
                mine = steps[a:b]
                v = self.step_s[mine]
                pos = np.searchsorted(self.break_at, mine)
                hit = self.break_at[np.minimum(pos, len(self.break_at) - 1)] == mine if len(self.break_at) else \
                    np.zeros(len(mine), bool)
                at, ends = np.flatnonzero(hit), self.break_end_s[pos[hit]]
            v[at] = ends
            bounds = at.tolist()
            if not bounds or bounds[0] != 0:
                v[0] = carry + v[0]             # continues the chunk before: that step's end plus this duration
                bounds.insert(0, 0)
            bounds.append(b - a)
            for s, e in zip(bounds[:-1], bounds[1:], strict=True):
                if e - s > 1:
                    np.cumsum(v[s:e], out=v[s:e])      # sequential: each end the one before plus a duration
            carry = float(v[-1])
            yield a, b, v


class LoggedTimeline(Timeline):
    """One replica's timeline read from its `StepLog`: a column is built when it is read (each read builds
    it again: keep what you read), the sums and the client times go chunk by chunk."""

    def __init__(self, log: StepLog, num_blocks: int, loop: EngineLoop):
        object.__setattr__(self, "log", log)
        object.__setattr__(self, "loop", loop)
        object.__setattr__(self, "num_blocks", num_blocks)

    replica = property(lambda self: self.log.counts("replica"))
    num_seqs = property(lambda self: self.log.counts("num_seqs"))
    new_tokens = property(lambda self: self.log.counts("new_tokens"))
    itl_seqs = property(lambda self: self.log.counts("itl_seqs"))
    step_s = property(lambda self: self.log.step_s)
    kv_used_blocks = property(lambda self: self.log.kv_used_blocks)
    end_s = property(lambda self: _joined(len(self), (e for _, _, e in self.log.end_chunks())))
    client_s = property(lambda self: _joined(len(self), (c for _, c in self.client_chunks())))

    def column(self, name: str, start: int, stop: int) -> np.ndarray:
        if name in _COUNTS:
            return self.log.counts(name, start, stop)
        return super().column(name, start, stop)

    def client_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(end times, client times) of consecutive stretches of steps, in order."""
        server = ApiServer(self.loop)
        n = len(self)
        for a, b, ends in self.log.end_chunks():
            out = server.feed(ends, self.log.counts("num_seqs", a, b), b == n)
            if len(out[0]):
                yield out

    def client_gaps(self, out: np.ndarray) -> None:
        """As `Timeline.client_gaps`, the client times read a chunk at a time (no step-sized array of them)."""
        at, last = 0, None
        for _, client in self.client_chunks():
            out[at] = self.log.step_s[0] if last is None else client[0] - last
            np.subtract(client[1:], client[:-1], out=out[at + 1:at + len(client)])
            at, last = at + len(client), client[-1]

    def at_client(self, times_s: tuple[np.ndarray, ...], replica: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        """As `_at_client`, for each array of times (with its requests' replicas), in one pass over the steps."""
        mine = int(self.log.runs["replica"][0])
        outs, queries = [], []
        for times, where in zip(times_s, replica, strict=True):
            outs.append(times.copy())
            mask = where == mine
            sel = None if mask.all() else np.flatnonzero(mask)       # None: every request (no copy of the times)
            del mask
            order = np.argsort(times if sel is None else times[sel], kind="stable")
            if sel is not None:
                order = sel[order]
            queries.append((order, times[order]))
        for ends, client in self.client_chunks():
            for out, (sel, sorted_times) in zip(outs, queries, strict=True):
                lo = int(np.searchsorted(sorted_times, ends[0], "left"))
                hi = int(np.searchsorted(sorted_times, ends[-1], "right"))
                t = sorted_times[lo:hi]
                pos = np.searchsorted(ends, t)
                hit = ends[pos] == t
                out[sel[lo:hi][hit]] = client[pos[hit]]
        return outs


def _joined(n: int, chunks: Iterator[np.ndarray]) -> np.ndarray:
    """The chunks of a column of `n` steps, written into one array as they come (no list of them)."""
    out, at = np.empty(n), 0
    for part in chunks:
        out[at:at + len(part)] = part
        at += len(part)
    return out


def _whole(log: StepLog, num_blocks: int, loop: EngineLoop) -> Timeline:
    """Every column built from the log, ordered by time, then replica (several replicas' steps interleave)."""
    replica, step_s = log.counts("replica"), log.step_s
    end_s = np.empty_like(step_s)
    for r in np.unique(replica).tolist():
        steps = np.flatnonzero(replica == r)
        end_s[steps] = _joined(len(steps), (e for _, _, e in log.end_chunks(steps)))
    cols = {"replica": replica, "end_s": end_s, "step_s": step_s,
            **{k: log.counts(k) for k in ("num_seqs", "new_tokens", "itl_seqs")},
            "kv_used_blocks": log.kv_used_blocks}
    if not np.all(np.diff(end_s) > 0):                      # one replica's steps are in order already
        order = np.lexsort((replica, end_s))                # by time, then replica
        cols = {k: v[order] for k, v in cols.items()}
    client_s = _client_times(cols["replica"], cols["end_s"], cols["num_seqs"], loop)
    return Timeline(**cols, client_s=client_s, num_blocks=num_blocks)


def _client_times(replica: np.ndarray, end_s: np.ndarray, num_seqs: np.ndarray, loop: EngineLoop) -> np.ndarray:
    """Each step's client arrival time, replica by replica (each has its own API server)."""
    if len(replica) == 0 or replica.min() == replica.max():      # one replica: already in time order
        return client_visible_s(loop, end_s, num_seqs)
    out = np.empty_like(end_s)
    by_replica = np.argsort(replica, kind="stable")          # each replica's steps stay in time order
    bounds = np.flatnonzero(np.diff(replica[by_replica])) + 1
    for idx in np.split(by_replica, bounds):
        out[idx] = client_visible_s(loop, end_s[idx], num_seqs[idx])
    return out


def client_visible_s(loop: EngineLoop, end_s: np.ndarray, num_seqs: np.ndarray) -> np.ndarray:
    """When the tokens of each step (ends `end_s`, strictly ascending, one replica, loop `loop`) reach the client
    (`ApiServer`, all the steps at once)."""
    return ApiServer(loop).feed(np.asarray(end_s, float), num_seqs, True)[1]


class ApiServer:
    """The API server's passes over one replica's step outputs, fed in order, a chunk at a time.

    The API server, when free, takes every step output that has reached it and handles them
    in one pass of output_s_per_pass + output_s_per_token x their tokens; all of them reach
    the client at the pass's end (vLLM's output handler drains its queue, and a lagging
    request's outputs merge: RequestOutputCollector). While each step ends after the pass
    before it, a pass is one step, f_k = max(f_(k-1), end_k) + c_k, which unrolls to
    f_k = C_k + max over j <= k of (end_j - C_(j-1)), C the running sum of c: one vectorised
    pass. Only the stretches where a step ends while that recurrence is still busy are walked
    pass by pass: batching passes finishes no later than one step per pass, so such a stretch
    starts and ends with the server idle under both.

    Fed in chunks, the running sum and maximum carry over exactly (the first element plus the carry is
    the addition one whole-array pass makes, and the maximum is exact), and the steps from the last one
    that ends while the server is busy are held back for the next chunk, so no walked stretch is split:
    the times are those of one pass over every step, to the bit.
    """

    def __init__(self, loop: EngineLoop):
        self.loop = loop
        self.total = 0.0              # C of the last step handed out
        self.peak = -math.inf         # max of end_j - C_(j-1) up to it
        self.last = -math.inf         # its client time before any walk (a next step ending earlier lags)
        self.ends, self.seqs = np.array([], float), np.array([], np.int64)     # held back

    def feed(self, end_s: np.ndarray, num_seqs: np.ndarray, final: bool) -> tuple[np.ndarray, np.ndarray]:
        """The next steps in; out, the end and client times of those settled (every one when `final`)."""
        if len(self.ends):
            end_s, num_seqs = np.concatenate([self.ends, end_s]), np.concatenate([self.seqs, num_seqs])
        m = len(end_s)
        if m == 0:
            return end_s, end_s.copy()
        loop = self.loop
        cost = loop.output_s_per_token * num_seqs
        cost += loop.output_s_per_pass
        total = cost.copy()
        total[0] += self.total
        np.cumsum(total, out=total)
        peak = np.subtract(total, cost, out=cost)
        np.subtract(end_s, peak, out=peak)
        peak[0] = np.maximum(self.peak, peak[0])
        np.maximum.accumulate(peak, out=peak)
        out = peak + total
        lagging = np.empty(m, bool)                    # ends while the server is still busy
        lagging[0] = self.last > end_s[0]
        np.greater(out[:-1], end_s[1:], out=lagging[1:])
        if final:
            cut = m
        else:                                          # hand out up to the last step that finds the server idle
            idle = np.flatnonzero(~lagging[1:])
            cut = int(idle[-1]) + 1 if len(idle) else 0
        self.ends, self.seqs = end_s[cut:].copy(), num_seqs[cut:].copy()
        if cut == 0:
            return end_s[:0], out[:0]
        self.total, self.peak, self.last = float(total[cut - 1]), float(peak[cut - 1]), float(out[cut - 1])
        end_s, out, lagging = end_s[:cut], out[:cut], lagging[:cut]
        if lagging.any():
            _walk(loop, end_s, num_seqs[:cut], out, lagging)
        return end_s, out


def _walk(loop: EngineLoop, end_s: np.ndarray, num_seqs: np.ndarray, out: np.ndarray, lagging: np.ndarray) -> None:
    """Client times of the stretches where steps end while the server is busy, pass by pass (in `out`)."""
    edges = np.flatnonzero(np.diff(np.r_[0, lagging.view(np.int8), 0]))
    ends, tokens = end_s.tolist(), np.r_[0, np.cumsum(num_seqs)].tolist()
    for first, stop in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        i, free = first - 1, ends[first - 1]                # the step before the stretch finds it idle
        while i < stop:
            start = max(free, ends[i])
            j = bisect_right(ends, start, i + 1, stop)      # every output waiting at `start`
            free = loop.pass_end_s(start, tokens[j] - tokens[i])
            out[i:j] = free
            i = j


def client_time_of(times_s: np.ndarray, ends_s: np.ndarray, client_s: np.ndarray) -> np.ndarray:
    """The client time of tokens sampled at `times_s` on one replica whose steps end at `ends_s` (sorted, not empty)
    and reach the client at `client_s`: the step ending then's, else the time itself."""
    pos = np.minimum(np.searchsorted(ends_s, times_s), len(ends_s) - 1)
    return np.where(ends_s[pos] == times_s, client_s[pos], times_s)


def _at_client(times_s: np.ndarray, replica: np.ndarray, tl: Timeline) -> np.ndarray:
    """Client arrival of tokens sampled at `times_s` on `replica` (each a step's end there; NaN or
    -1 where none): that step's client time, else `times_s` itself."""
    out = times_s.copy()
    if len(tl.replica) == 0 or tl.replica.min() == tl.replica.max():     # one replica: in time order already
        step_replica, step_end, step_client = tl.replica, tl.end_s, tl.client_s
    else:
        by_step = np.lexsort((tl.end_s, tl.replica))          # each replica's steps, in time order
        step_replica, step_end, step_client = tl.replica[by_step], tl.end_s[by_step], tl.client_s[by_step]
    first = np.searchsorted(step_replica, replica, "left")
    last = np.searchsorted(step_replica, replica, "right")
    by_request = np.argsort(replica, kind="stable")
    bounds = np.flatnonzero(np.diff(replica[by_request])) + 1
    for idx in np.split(by_request, bounds):
        if len(idx) == 0:
            continue
        lo, hi = first[idx[0]], last[idx[0]]
        if lo == hi:                                          # a replica with no step
            continue
        out[idx] = client_time_of(times_s[idx], step_end[lo:hi], step_client[lo:hi])
    return out
