"""The API server's passes as the run goes, for clients that wait for their answer (closed loops).

What a client sees is computed from the step timeline at the end of a run (records.ApiServer). A closed
loop's client sends its next request when its answer reaches it, so the run needs that time while it goes:
this follows the same passes step by step, with the same arithmetic. The API server, when free, takes every
step output that has reached it (every step ended by then) and handles them in one pass of output_s_per_pass +
output_s_per_token x their sequences. Whether a step finds the server busy is records.ApiServer's test (the
vectorised recurrence's client time of the step before it, later than the step's end); such a step waits for
the next pass, which starts (a timer: every step ended by then has been applied, as a closed loop's replicas
step one event per step) where records' walk starts it, and ends at the walk's sum. A step that finds the server
idle is answered at the later of the recurrence's time and the walk's (records takes the walk's when the next
step finds the server busy): a client never sends before the time records then gives its answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import simpy

from simulator.engine_loop import EngineLoop


class ApiPasses:
    """One replica's API server, fed its steps in order (`step_ended`); `when_answered` calls back with the client
    time of the last step fed."""

    def __init__(self, env: simpy.Environment, loop: EngineLoop):
        self.env, self.loop = env, loop
        self.total = 0.0                   # records.ApiServer's running sum of pass costs, one per step
        self.peak = -math.inf              # ... and its running maximum of end - the sum before the step
        self.out = -math.inf               # ... and the last step's client time by that recurrence
        self.free_s = -math.inf            # the walk's end of the last pass (records._walk)
        self.first_end_s = math.inf        # the first step waiting for the next pass
        self.pending_seqs = 0              # sequences of the steps waiting for it
        self.waiters: list[Callable[[float], None]] | None = None    # not None: steps wait, a timer is set
        self.last_answer_s = -math.inf     # the last step's client time, when it found the server idle
        self.passes = 0                    # passes started by a timer or a step: a timer of a pass started is stale

    def step_ended(self, end_s: float, num_seqs: int) -> None:
        loop = self.loop
        cost = loop.output_s_per_token * num_seqs
        cost += loop.output_s_per_pass                       # records.ApiServer.feed's order of operations
        total = self.total + cost
        self.peak = max(self.peak, end_s - (total - cost))
        busy = self.out > end_s
        self.total, self.out = total, self.peak + total
        if not busy:
            if self.waiters is not None:                     # the pass before has not started: start it now
                self._next_pass()
            self.free_s = loop.pass_end_s(end_s, num_seqs)
            self.last_answer_s = max(self.out, self.free_s)
            return
        if self.waiters is None:
            self.waiters, self.first_end_s = [], end_s
            start_s, due = max(self.free_s, end_s), self.passes
            self.env.timeout(max(0.0, start_s - self.env.now)).callbacks.append(
                lambda _event: self._next_pass() if self.passes == due else None)
        self.pending_seqs += num_seqs

    def when_answered(self, callback: Callable[[float], None]) -> None:
        """`callback(client_s)` for a request that finished in the last step fed: now, or when its pass starts."""
        if self.waiters is None:
            callback(self.last_answer_s)
        else:
            self.waiters.append(callback)

    def _next_pass(self) -> None:
        waiters, self.waiters = self.waiters or [], None
        self.passes += 1
        self.free_s = self.loop.pass_end_s(max(self.free_s, self.first_end_s), self.pending_seqs)
        self.pending_seqs = 0
        for callback in waiters:
            callback(self.free_s)
