"""What a run leaves behind: one row per request and one per engine step, in flat arrays.

Rows are appended to `array.array` columns (8 bytes a value, no Python object per value) and
turned into numpy arrays once at the end, so memory grows only with the records themselves.
The pandas DataFrame is built on first use: importing pandas costs more wall time than
simulating a thousand requests, and summaries do not need it.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from simulator.request import Request, Status
from sizer.step_batch import StepBatch

_REQUEST_COLUMNS = {
    "request_id": "q", "replica": "q", "tenant": "q", "arrival_s": "d", "prompt_tokens": "q",
    "output_tokens": "q", "generated_tokens": "q", "cached_prompt_tokens": "q", "scheduled_s": "d", "first_token_s": "d",
    "finished_s": "d", "preemptions": "q", "rejected": "b",
}
_STEP_COLUMNS = {"replica": "q", "end_s": "d", "step_s": "d", "num_seqs": "q", "new_tokens": "q",
                 "itl_seqs": "q", "kv_used_blocks": "q"}


@dataclass(frozen=True)
class Timeline:
    """Per engine step, all replicas, ordered by end time (then replica)."""
    replica: np.ndarray
    end_s: np.ndarray
    step_s: np.ndarray
    num_seqs: np.ndarray        # batch size
    new_tokens: np.ndarray
    itl_seqs: np.ndarray        # sequences whose token this step counts as one step-long ITL
    kv_usage: np.ndarray        # fraction of the replica's KV blocks in use after scheduling


@dataclass
class SimulationResult:
    columns: dict[str, np.ndarray]   # per request, sorted by request_id; times in s, latencies in ms
    reject_reasons: dict[int, str]   # request_id -> why it was rejected
    timeline: Timeline
    itl_gaps_s: np.ndarray           # inter-token gaps not one step long (preemption, transfer), sorted
    num_replicas: int
    num_preemptions: int

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
        self._req = {k: array(t) for k, t in _REQUEST_COLUMNS.items()}
        self._step = {k: array(t) for k, t in _STEP_COLUMNS.items()}
        self._reasons: dict[int, str] = {}
        self._gaps = array("d")
        self.num_done = 0

    def request_done(self, req: Request, replica: int) -> None:
        """Record a request that finished or was rejected."""
        c = self._req
        rejected = req.status is Status.REJECTED
        c["request_id"].append(req.request_id)
        c["replica"].append(replica)
        c["tenant"].append(req.tenant)
        c["arrival_s"].append(req.arrival_s)
        c["prompt_tokens"].append(req.prompt_tokens)
        c["output_tokens"].append(req.output_tokens)
        c["generated_tokens"].append(req.num_output_tokens)
        c["cached_prompt_tokens"].append(req.num_cached_prompt_tokens)
        c["scheduled_s"].append(req.scheduled_s)
        c["first_token_s"].append(req.first_token_s)
        c["finished_s"].append(req.finished_s)
        c["preemptions"].append(req.num_preemptions)
        c["rejected"].append(rejected)
        if rejected:
            self._reasons[req.request_id] = req.reject_reason
        if req.itl_gaps_s:
            self._gaps.extend(req.itl_gaps_s)
        self.num_done += 1

    def step(self, replica: int, end_s: float, step_s: float, batch: StepBatch, itl_seqs: int,
             kv_used_blocks: int) -> None:
        s = self._step
        s["replica"].append(replica)
        s["end_s"].append(end_s)
        s["step_s"].append(step_s)
        s["num_seqs"].append(batch.num_seqs)
        s["new_tokens"].append(batch.new_tokens)
        s["itl_seqs"].append(itl_seqs)
        s["kv_used_blocks"].append(kv_used_blocks)

    def decode_run(self, replica: int, end_s: list[float], step_s: list[float], num_seqs: int,
                   kv_used_blocks: list[int]) -> None:
        """Record k pure-decode steps of `num_seqs` sequences at once."""
        s, k = self._step, len(end_s)
        s["replica"].extend([replica] * k)
        s["end_s"].extend(end_s)
        s["step_s"].extend(step_s)
        s["num_seqs"].extend([num_seqs] * k)
        s["new_tokens"].extend([num_seqs] * k)
        s["itl_seqs"].extend([num_seqs] * k)
        s["kv_used_blocks"].extend(kv_used_blocks)

    def result(self, num_blocks: int, num_replicas: int, num_preemptions: int) -> SimulationResult:
        c = {k: np.array(v) for k, v in self._req.items()}
        order = np.argsort(c["request_id"], kind="stable")
        c = {k: v[order] for k, v in c.items()}
        c["rejected"] = c["rejected"].astype(bool)
        done, ms = ~c["rejected"], 1000.0
        with np.errstate(invalid="ignore"):
            c["queue_ms"] = np.where(done, (c["scheduled_s"] - c["arrival_s"]) * ms, np.nan)
            c["ttft_ms"] = np.where(done, (c["first_token_s"] - c["arrival_s"]) * ms, np.nan)
            c["e2e_ms"] = np.where(done, (c["finished_s"] - c["arrival_s"]) * ms, np.nan)
            c["tpot_ms"] = np.where(done & (c["output_tokens"] > 1), (c["finished_s"] - c["first_token_s"]) * ms
                                    / np.maximum(c["output_tokens"] - 1, 1), np.nan)
        st = {k: np.array(v) for k, v in self._step.items()}
        order = np.lexsort((st["replica"], st["end_s"]))     # by time, then replica
        st = {k: v[order] for k, v in st.items()}
        timeline = Timeline(st["replica"], st["end_s"], st["step_s"], st["num_seqs"], st["new_tokens"],
                            st["itl_seqs"], st["kv_used_blocks"] / num_blocks)
        return SimulationResult(c, dict(self._reasons), timeline, np.sort(np.array(self._gaps)), num_replicas,
                                num_preemptions)
