"""The sole entry's known arrivals (simulator/feed.py) against the simpy arrival process they stand in for."""

from types import SimpleNamespace

import simpy
from hypothesis import example, given, settings
from hypothesis import strategies as st
from simhelp import LinearStepModel, sim_config
from test_simulate import LOOPS, same

from simulator.cluster import Cluster
from simulator.feed import KnownArrivals
from simulator.request import Request
from simulator.run import simulate

# gaps that make ties (0: a burst), sums that round (1/3, 1e-9 after 7.0: now + (arrival - now) may differ from the
# arrival), and idle stretches
GAPS = st.lists(st.sampled_from([0.0, 0.0, 1e-9, 0.1, 1 / 3, 0.3, 7.0]), min_size=1, max_size=40)


def arrivals(gaps: list[float]) -> list[Request]:
    t, out = 0.0, []
    for i, g in enumerate(gaps):
        t += g
        out.append(Request(i, t, 50, 5))
    return out


@settings(max_examples=60, deadline=None)
@given(gaps=GAPS, waits=st.lists(st.sampled_from([0.0, 0.05, 0.1, 1 / 3, 0.4, 2.0, 7.0]), max_size=40))
# ties at 0.4: the arrival's sleep made at 0.1, after the replica's wait (made at 0): the replica goes first;
# made at 0, before it: the arrival goes first
@example(gaps=[0.0, 0.1, 0.3], waits=[0.4])
@example(gaps=[0.0, 0.4], waits=[0.4])
def test_known_arrivals_hand_over_each_request_when_the_arrival_process_does(gaps, waits):
    # simpy: Cluster._arrivals beside a replica-like process that first waits to be woken by a submission (as an
    # idle replica starts), then sleeps `waits` one after another, counting at each wake the requests handed over
    env, seen, counts = simpy.Environment(), [], []
    wake = env.event()

    def submit(req):
        seen.append((env.now, req.request_id, cluster._next_arrival_s))
        if not wake.triggered:
            wake.succeed()

    def replica():
        yield wake
        counts.append((env.now, len(seen)))
        for w in waits:
            yield env.timeout(max(0.0, w + counts[-1][0] - env.now))
            counts.append((env.now, len(seen)))

    sink = SimpleNamespace(submit=submit)
    cluster = SimpleNamespace(env=env, router=SimpleNamespace(choose=lambda pool, req: sink), entry_pool=[sink],
                              _next_arrival_s=0.0)
    env.process(replica())                        # created first, as the cluster's replicas are
    env.process(Cluster._arrivals(cluster, arrivals(gaps)))
    env.run()

    # the feed, run by the replica's waits as Replica._idle and Replica._sleep run it
    fed, fed_counts = [], []
    feed = KnownArrivals(arrivals(gaps), lambda req: fed.append((feed.now_s, req.request_id, feed.next_arrival_s)))
    while not fed:
        feed.advance()
    clock = feed.now_s
    fed_counts.append((clock, len(fed)))
    for w in waits:
        at = clock + max(0.0, w + fed_counts[-1][0] - clock)
        feed.wait_until(at)
        clock = at
        fed_counts.append((clock, len(fed)))
    while feed.advance():
        pass
    assert fed == seen and fed_counts == counts


@settings(max_examples=15, deadline=None)
@given(gaps=GAPS, loop=st.sampled_from(LOOPS), budget=st.sampled_from([64, 512]))
def test_bursts_and_idle_gaps_fed_to_the_only_replica_are_identical_to_stepping(gaps, loop, budget):
    # fast-forwarding, the only replica runs its arrivals itself (no simpy event); stepping, simpy runs them
    reqs = arrivals(gaps)
    kw = dict(num_blocks=400, max_num_batched_tokens=budget, engine_loop=loop, check_invariants=True)
    stepped, fast = (simulate(sim_config(fast_forward=ff, **kw), LinearStepModel(),
                              [Request(r.request_id, r.arrival_s, 50 + 37 * (r.request_id % 5), 1 + r.request_id % 7)
                               for r in reqs], seed=3) for ff in (False, True))
    assert same(stepped, fast) and not fast.leaks
