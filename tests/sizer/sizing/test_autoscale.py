"""The autoscaling policy over a period (sizer.sizing.autoscale), on rates made by hand: no simulation."""

from __future__ import annotations

from sizer.sizing.autoscale import Policy, replica_timeline

STEP_S = 60.0
# A day of minutes: 10 req/s, then 50 req/s from 12:00 to 14:00. At 10 req/s per replica that is 1 replica, then 5.
PEAK_FROM, PEAK_TO = 12 * 60, 14 * 60
RATES = [50.0 if PEAK_FROM <= i < PEAK_TO else 10.0 for i in range(24 * 60)]


def policy(delay_s: float, scale_ahead: bool = True, cooldown_s: float = 0.0) -> Policy:
    return Policy(target_per_replica_per_s=10.0, min_replicas=1, max_replicas=100, scale_ahead=scale_ahead,
                  delay_s=delay_s, cooldown_s=cooldown_s)


def replica_hours_before_peak(delay_s: float) -> float:
    tl = replica_timeline(RATES, STEP_S, policy(delay_s))
    return sum(tl.paid[:PEAK_FROM]) * STEP_S / 3600


def test_a_ten_times_longer_scale_up_delay_keeps_more_replicas_ahead_of_the_peak():
    # Scaling ahead by the delay, the 4 extra replicas are asked for one delay before 12:00 and paid from then:
    # 600 s -> 10 minutes x 4 = 0.667 replica-hours above the 12 hours of the one replica before the peak;
    # 6,000 s -> 100 minutes x 4 = 6.667.
    assert replica_hours_before_peak(600.0) == 12 + 4 * 10 / 60
    assert abs(replica_hours_before_peak(6000.0) - (12 + 4 * 100 / 60)) < 1e-9
    for delay_s in (600.0, 6000.0):           # and both serve the peak from its first minute
        assert replica_timeline(RATES, STEP_S, policy(delay_s)).serving[PEAK_FROM] == 5


def test_a_reactive_policy_serves_the_peak_one_delay_late_and_pays_from_the_request():
    tl = replica_timeline(RATES, STEP_S, policy(600.0, scale_ahead=False))
    assert tl.serving[PEAK_FROM] == 1 and tl.paid[PEAK_FROM] == 5     # asked for at 12:00, starting
    assert tl.serving[PEAK_FROM + 9] == 1 and tl.serving[PEAK_FROM + 10] == 5    # 600 s = 10 steps later
    assert tl.needed[PEAK_FROM] == 5


def test_scale_down_waits_for_the_cooldown():
    # HPA's stabilisation window: the 5 replicas stay until wanted has been 1 for the whole 300 s (5 steps)
    tl = replica_timeline(RATES, STEP_S, policy(0.0, cooldown_s=300.0))
    assert tl.serving[PEAK_TO + 3] == 5 and tl.serving[PEAK_TO + 5] == 1


def test_a_constant_rate_keeps_its_replicas_all_period():
    # 23 req/s at 10 per replica: ceil(2.3) = 3, every minute, whatever the delay
    tl = replica_timeline([23.0] * 1440, STEP_S, policy(3000.0, scale_ahead=False, cooldown_s=600.0))
    assert set(tl.serving) == set(tl.paid) == {3}
