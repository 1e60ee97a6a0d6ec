"""What a run leaves behind: one row per request and one per engine step, in flat arrays.

Rows are appended to `array.array` columns (8 bytes a float, 1 to 4 an engine step's count, no Python
object per value) and read as numpy arrays in place at the end (`np.frombuffer`, no copy), so memory
grows only with the records themselves.
The pandas DataFrame is built on first use: importing pandas costs more wall time than
simulating a thousand requests, and summaries do not need it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from simulator.engine_loop import EngineLoop
from simulator.request import Request, Status

# Per request: integer and float values, one row each in two flat arrays (one `fromlist` call
# per request), split into columns in this order at the end.
# `first_token_replica` is where the first token was sampled (the prefill replica, when disaggregated).
# `adapter` (LoRA, -1 the base model) and `schema` (structured output, -1 none) say what each request
# asked for, `lora_holdbacks` how many steps it waited for an adapter slot: a user can audit both.
_REQUEST_COLUMNS = ("request_id", "replica", "first_token_replica", "tenant", "adapter", "schema", "arrival_s",
                    "prompt_tokens", "output_tokens", "generated_tokens", "cached_prompt_tokens", "scheduled_s",
                    "first_token_s", "finished_s", "preemptions", "lora_holdbacks", "rejected")
_REQUEST_INTS = ("request_id", "replica", "first_token_replica", "tenant", "adapter", "schema", "prompt_tokens",
                 "output_tokens", "generated_tokens", "cached_prompt_tokens", "preemptions", "lora_holdbacks",
                 "rejected")
_REQUEST_FLOATS = ("arrival_s", "scheduled_s", "first_token_s", "finished_s")
# Per step: 16 bytes of times and five counts, each in the narrowest signed integer its values so far fit
# (one byte, then two, then four: a column widens when a value does not fit, the only time an append
# fails), so a step of small batches is 21 bytes, not 36. Every bound on a count is below 2^31, and a
# value past it raises OverflowError rather than wrapping. A million requests of the standard workload
# are 7.4 M steps.
_STEP_COLUMNS = {"replica": "b", "end_s": "d", "step_s": "d", "num_seqs": "b", "new_tokens": "b",
                 "itl_seqs": "b", "kv_used_blocks": "b"}
_WIDER = {"b": "h", "h": "i"}


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

    @property
    def kv_usage(self) -> np.ndarray:
        """Fraction of the replica's KV blocks in use after scheduling, per step (built on each use:
        a step-sized array kept only while it is read)."""
        return self.kv_used_blocks / self.num_blocks


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
        """Per-request records as a pandas DataFrame (built once, on first use)."""
        frame = self.__dict__.get("_frame")
        if frame is None:
            import pandas as pd

            frame = pd.DataFrame(self.columns)
            frame["reject_reason"] = [self.reject_reasons.get(i, "") for i in frame["request_id"].tolist()]
            self.__dict__["_frame"] = frame
        return frame


class Recorder:
    def __init__(self) -> None:
        self._req_ints, self._req_floats = array("q"), array("d")
        self._step = {k: array(t) for k, t in _STEP_COLUMNS.items()}
        self._step_columns = tuple(self._step.values())      # in _STEP_COLUMNS order, for the hot paths
        self._reasons: dict[int, str] = {}
        self._gaps = array("d")
        self.num_done = 0

    def request_done(self, req: Request, replica: int) -> None:
        """Record a request that finished or was rejected."""
        rejected = req.status is Status.REJECTED
        first_replica = replica if req.prefill_replica < 0 else req.prefill_replica
        self._req_ints.fromlist([req.request_id, replica, first_replica, req.tenant, req.adapter_id, req.schema_id,
                                 req.prompt_tokens, req.output_tokens, req.num_output_tokens,
                                 req.num_cached_prompt_tokens, req.num_preemptions, req.num_holdbacks, rejected])
        self._req_floats.fromlist([req.arrival_s, req.scheduled_s, req.first_token_s, req.finished_s])
        if rejected:
            self._reasons[req.request_id] = req.reject_reason
        if req.itl_gaps_s:
            self._gaps.extend(req.itl_gaps_s)
        self.num_done += 1

    def step(self, replica: int, end_s: float, step_s: float, num_seqs: int, new_tokens: int, itl_seqs: int,
             kv_used_blocks: int) -> None:
        replicas, ends, durations, seqs, tokens, itl, used = self._step_columns
        try:
            replicas.append(replica)
            ends.append(end_s)
            durations.append(step_s)
            seqs.append(num_seqs)
            tokens.append(new_tokens)
            itl.append(itl_seqs)
            used.append(kv_used_blocks)
        except OverflowError:
            self._widen()
            self.step(replica, end_s, step_s, num_seqs, new_tokens, itl_seqs, kv_used_blocks)

    def decode_run(self, replica: int, end_s: list[float], step_s: list[float], num_seqs: int,
                   kv_used_blocks: list[int]) -> None:
        """Record k pure-decode steps of `num_seqs` sequences at once (`fromlist`: extend's fast path for lists;
        most runs are a step or two, so one step is appended as it is)."""
        k = len(end_s)
        if k <= 1:
            if k:
                self.step(replica, end_s[0], step_s[0], num_seqs, num_seqs, num_seqs, kv_used_blocks[0])
            return
        replicas, ends, durations, seqs, tokens, itl, used = self._step_columns
        try:
            replicas.fromlist([replica] * k)
            ends.fromlist(end_s)
            durations.fromlist(step_s)
            same = [num_seqs] * k
            seqs.fromlist(same)
            tokens.fromlist(same)
            itl.fromlist(same)
            used.fromlist(kv_used_blocks)
        except OverflowError:
            self._widen()
            self.decode_run(replica, end_s, step_s, num_seqs, kv_used_blocks)

    def _widen(self) -> None:
        """After a step's append failed on a value its column is too narrow for: drop what that step
        appended to the columns before it, and widen that column one size (four bytes failing: a real
        overflow, raised). The columns are appended in order and a failed append (or `fromlist`) leaves
        its column as it was, so the failed one is the first of the shortest."""
        n = min(len(c) for c in self._step_columns)
        name = next(k for k, c in self._step.items() if len(c) == n)
        for c in self._step_columns:
            del c[n:]
        code = self._step[name].typecode
        if code not in _WIDER:
            raise OverflowError(f"step column {name} overflows a 4-byte integer")
        wide = array(_WIDER[code])
        wide.frombytes(_view(self._step[name]).astype(np.dtype(_WIDER[code])).tobytes())
        self._step[name] = wide
        self._step_columns = tuple(self._step.values())

    def result(self, num_blocks: int, num_replicas: int, num_preemptions: int,
               engine_loop: EngineLoop) -> SimulationResult:
        """The run's records, once, at its end: the request rows are handed over (this recorder keeps none)."""
        ints = _view(self._req_ints).reshape(-1, len(_REQUEST_INTS))
        floats = _view(self._req_floats).reshape(-1, len(_REQUEST_FLOATS))
        order = np.argsort(ints[:, _REQUEST_INTS.index("request_id")], kind="stable")
        split = ({k: ints[order, i] for i, k in enumerate(_REQUEST_INTS)}
                 | {k: floats[order, i] for i, k in enumerate(_REQUEST_FLOATS)})
        del ints, floats, order
        self._req_ints, self._req_floats = array("q"), array("d")     # handed over: the columns are copies
        c = {k: split[k] for k in _REQUEST_COLUMNS}
        c["rejected"] = c["rejected"].astype(bool)
        st = {k: _view(v) for k, v in self._step.items()}
        if not np.all(np.diff(st["end_s"]) > 0):            # one replica's steps are in order already
            order = np.lexsort((st["replica"], st["end_s"]))     # by time, then replica
            st = {k: v[order] for k, v in st.items()}
        client_s = _client_times(st["replica"], st["end_s"], st["num_seqs"], engine_loop)
        timeline = Timeline(st["replica"], st["end_s"], st["step_s"], st["num_seqs"], st["new_tokens"],
                            st["itl_seqs"], st["kv_used_blocks"], client_s, num_blocks)
        done, ms = ~c["rejected"], 1000.0
        first_client = _at_client(c["first_token_s"], c["first_token_replica"], timeline)
        # one stream: no later token reaches the client before the first (a disaggregated request's
        # first token comes through the prefill replica's API server, the rest through the decode one's)
        finished_client = np.fmax(_at_client(c["finished_s"], c["replica"], timeline), first_client)
        engine_arrival = c["arrival_s"] + engine_loop.input_s
        many = done & (c["output_tokens"] > 1)
        with np.errstate(invalid="ignore"):
            c["queue_ms"] = np.where(done, (c["scheduled_s"] - engine_arrival) * ms, np.nan)
            for prefix, first, last, start in (("", first_client, finished_client, c["arrival_s"]),
                                               ("engine_", c["first_token_s"], c["finished_s"], engine_arrival)):
                c[prefix + "ttft_ms"] = np.where(done, (first - start) * ms, np.nan)
                c[prefix + "e2e_ms"] = np.where(done, (last - start) * ms, np.nan)
                c[prefix + "tpot_ms"] = np.where(many, (last - first) * ms / np.maximum(c["output_tokens"] - 1, 1),
                                                 np.nan)
        return SimulationResult(c, dict(self._reasons), timeline, np.sort(np.array(self._gaps)), num_replicas,
                                num_preemptions, engine_loop)


def _view(column: array) -> np.ndarray:
    """A numpy array over an `array.array`'s buffer (no copy; the array must not grow after)."""
    return np.frombuffer(column, dtype=np.dtype(column.typecode)) if len(column) else np.array([], column.typecode)


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
    """When the tokens of each step (ends `end_s`, strictly ascending, one replica, loop `loop`) reach the client.

    The API server, when free, takes every step output that has reached it and handles them
    in one pass of output_s_per_pass + output_s_per_token x their tokens; all of them reach
    the client at the pass's end (vLLM's output handler drains its queue, and a lagging
    request's outputs merge: RequestOutputCollector). While each step ends after the pass
    before it, a pass is one step, f_k = max(f_(k-1), end_k) + c_k, which unrolls to
    f_k = C_k + max over j <= k of (end_j - C_(j-1)), C the running sum of c: one vectorised
    pass. Only the stretches where a step ends while that recurrence is still busy are walked
    pass by pass: batching passes finishes no later than one step per pass, so such a stretch
    starts and ends with the server idle under both.
    """
    if len(end_s) == 0:
        return end_s.copy()
    cost = loop.output_s_per_token * num_seqs
    cost += loop.output_s_per_pass                          # in place: three step-sized buffers, no more
    total = np.cumsum(cost)
    out = np.subtract(total, cost, out=cost)
    del cost
    np.subtract(end_s, out, out=out)
    np.maximum.accumulate(out, out=out)
    out += total
    del total
    lagging = np.r_[False, out[:-1] > end_s[1:]]           # ends while the server is still busy
    if not lagging.any():
        return out
    edges = np.flatnonzero(np.diff(np.r_[0, lagging.view(np.int8), 0]))
    ends, tokens = end_s.tolist(), np.r_[0, np.cumsum(num_seqs)].tolist()
    fixed, per_token = loop.output_s_per_pass, loop.output_s_per_token
    for first, stop in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        i, free = first - 1, ends[first - 1]                # the step before the stretch finds it idle
        while i < stop:
            start = max(free, ends[i])
            j = bisect_right(ends, start, i + 1, stop)      # every output waiting at `start`
            free = start + fixed + per_token * (tokens[j] - tokens[i])
            out[i:j] = free
            i = j
    return out


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
        pos = lo + np.minimum(np.searchsorted(step_end[lo:hi], times_s[idx]), hi - lo - 1)
        out[idx] = np.where(step_end[pos] == times_s[idx], step_client[pos], times_s[idx])
    return out
