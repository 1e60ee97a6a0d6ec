"""Known arrivals fed to the only replica of a cluster without simpy events.

`Cluster._arrivals` is a simpy process: at each arrival it wakes, hands the request to the replica and sleeps
until the next. When one replica takes every request and nobody else acts (`Replica.sole_entry`), that process
and the replica's are the only ones, so the replica can run both itself: `KnownArrivals` is `_arrivals`
step for step, and the replica asks it to run what simpy would run before each of the replica's own waits.

Simpy runs events by time, then by creation. The arrival process's next event was always created before the
replica's wait that follows it (the arrival process ran earlier), so at equal times the arrival goes first; its
times are the same sums simpy makes (`now + (arrival - now)`), so the replica sees each request when it
would have, and its clock reads what simpy's would. Nothing else reads simpy's clock in such a run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from simulator.request import Request


class KnownArrivals:
    def __init__(self, requests: Iterable[Request], submit: Callable[[Request], None]):
        self._requests = iter(requests)
        self._submit = submit
        self.now_s = 0.0                   # simpy's clock at the arrival process's last event
        self.next_arrival_s = 0.0          # Cluster._next_arrival_s: the next request's arrival
        self.event_s = 0.0                 # when the process next runs: its start, then each wake (inf: ended)
        self._pending: Request | None = None     # the request it hands over then

    def advance(self) -> bool:
        """Run the process's next event; False when it has ended."""
        if self.event_s == math.inf:
            return False
        self.now_s = self.event_s
        if self._pending is not None:
            self._submit(self._pending)
        self._run()
        return True

    def run_until(self, at_s: float) -> None:
        """Run the events simpy runs before a wait of the replica that ends at `at_s` (those at `at_s` too)."""
        while self.event_s <= at_s:
            self.advance()

    def _run(self) -> None:
        """`Cluster._arrivals` from a wake to its next sleep."""
        now = self.now_s
        for req in self._requests:
            self.next_arrival_s = req.arrival_s
            if req.arrival_s > now:
                self._pending, self.event_s = req, now + (req.arrival_s - now)
                return
            self._submit(req)
        self.next_arrival_s, self._pending, self.event_s = math.inf, None, math.inf
