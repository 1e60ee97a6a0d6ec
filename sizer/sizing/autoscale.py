"""The autoscaling policy over a period: replicas wanted, started, serving and paid for at each step.

    needed(t)    ceil(rate(t) / target per replica), within [min_replicas, max_replicas]
    wanted(t)    needed(t), or with scale_ahead the most needed over [t, t + scale-up delay] (a forecast:
                 the schedule is known, as a KEDA cron trigger or a predictive scaler knows it)
    scale up     when wanted exceeds replicas serving + starting, the difference starts now and serves
                 one scale-up delay later (node, image, weights, engine start, CUDA graphs)
    scale down   to the most wanted over the last cooldown (Kubernetes HPA's stabilisation window): a
                 replica is removed only after wanted has stayed below it that long
    paid         serving + starting: a replica's GPUs are paid from the moment its node is asked for

The period wraps around: the day starts as the previous day ended (the policy is run over two periods
and the second is kept), so the first hours see the replicas the last ones left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ScaleUpDelay:
    """Seconds from asking for a replica to its first request, by part (each an assumption with a source in
    docs/capacity-over-time.md; weights_load_s = stored weight bytes / storage read speed)."""
    node_provisioning_s: float
    image_pull_s: float
    weights_load_s: float
    engine_start_s: float
    cuda_graph_capture_s: float

    @property
    def total_s(self) -> float:
        return (self.node_provisioning_s + self.image_pull_s + self.weights_load_s + self.engine_start_s
                + self.cuda_graph_capture_s)


@dataclass(frozen=True)
class Policy:
    target_per_replica_per_s: float      # requests per second one replica is sized for
    min_replicas: int
    max_replicas: int
    scale_ahead: bool
    delay_s: float                       # ScaleUpDelay.total_s
    cooldown_s: float


@dataclass(frozen=True)
class ReplicaTimeline:
    step_s: float
    needed: tuple[int, ...]              # replicas the rate needs at the policy's target
    serving: tuple[int, ...]             # replicas ready to serve
    paid: tuple[int, ...]                # serving + starting


def needed_replicas(rate_per_s: float, policy: Policy) -> int:
    """ceil(rate / target), within the policy's bounds (the epsilon keeps an exact multiple from rounding up)."""
    n = math.ceil(rate_per_s / policy.target_per_replica_per_s - 1e-9) if rate_per_s > 0 else 0
    return min(policy.max_replicas, max(policy.min_replicas, n))


def replica_timeline(rates_per_s: list[float], step_s: float, policy: Policy) -> ReplicaTimeline:
    """The policy run over one period of `rates_per_s` (one rate a step), wrapped around."""
    k = len(rates_per_s)
    needed = [needed_replicas(x, policy) for x in rates_per_s]
    lag = math.ceil(policy.delay_s / step_s - 1e-9)
    ahead = lag if policy.scale_ahead else 0
    wanted = [max(needed[(i + j) % k] for j in range(ahead + 1)) for i in range(k)]
    hold = max(1, math.ceil(policy.cooldown_s / step_s - 1e-9))
    serving, starting, paid_out, serving_out = wanted[-1], [], [], []     # as the previous period ended
    history: list[int] = []
    for i in range(2 * k):
        want = wanted[i % k]
        history = (history + [want])[-hold:]
        ready = [s for s in starting if s <= i]
        serving += len(ready)
        starting = [s for s in starting if s > i]
        if want > serving + len(starting):
            starting += [i + lag] * (want - serving - len(starting))
            if lag == 0:
                serving, starting = serving + len(starting), []
        floor = max(history)
        if serving + len(starting) > floor:          # cancel starting ones first, then remove serving ones
            extra = serving + len(starting) - floor
            cancel = min(extra, len(starting))
            starting = starting[:len(starting) - cancel]
            serving -= extra - cancel
        if i >= k:
            serving_out.append(serving)
            paid_out.append(serving + len(starting))
    return ReplicaTimeline(step_s, tuple(needed), tuple(serving_out), tuple(paid_out))
