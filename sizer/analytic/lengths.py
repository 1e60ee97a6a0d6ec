"""Request lengths in closed form, as the simulator draws them (simulator/workload.py `Lengths.draw`: a draw
rounded to whole tokens, then clipped to [min, max]; sizer.inputs.scenario `length_bounds`), for the plan, which
draws none: the chance a length is at most k, the mean length, the share of requests whose prompt + output exceed
a limit, and the mean lengths of those within it (the requests an engine serves).

    P(prompt + output > L) = sum over prompt lengths p of P(prompt = p) x P(output > L - p)
    E[prompt | prompt + output <= L] = sum over p of p x P(prompt = p) x P(output <= L - p) / P(prompt + output <= L)

Prompt and output lengths are independent (the simulator draws them from separate random streams).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from itertools import accumulate

from sizer.inputs.scenario import Distribution, length_atoms, length_bounds

# Lengths summed one by one at most; a wider span is summed in this many equal bins, each bin's chance taken
# at its middle length (the other length's chance changes little across a bin of a wide span).
MAX_STEPS = 4096


def at_most(d: Distribution) -> Callable[[int], float]:
    """k -> P(length <= k) of a length drawn from `d`."""
    lo, hi = length_bounds(d)
    atoms = _atoms(d)

    def cdf(k: int) -> float:
        if k < lo:
            return 0.0
        if hi is not None and k >= hi:
            return 1.0
        if atoms is not None:
            lengths, chances = atoms
            return chances[bisect.bisect_right(lengths, k) - 1] if k >= lengths[0] else 0.0
        if d.distribution == "uniform":           # whole lengths from min to max, equally likely
            return (k - int(d.min) + 1) / (int(d.max) - int(d.min) + 1)
        # a draw rounds to k or less when it is below k + 0.5 (np.rint)
        if d.distribution == "normal":
            return _standard_normal_at_most((k + 0.5 - d.mean) / d.std)
        return _standard_normal_at_most((math.log(k + 0.5) - _log_mean(d)) / d.sigma)

    return cdf


def mean_length(d: Distribution) -> float:
    """The mean length as the simulator draws it (rounded, then clipped to [min, max]): of a few lengths their
    weighted mean; uniform's, the middle of its whole bounds; normal's and lognormal's, with L the length and X the
    draw before rounding,
        lo x P(L <= lo) + hi x P(L >= hi) + E[X; lo + 0.5 <= X < hi - 0.5]
    (a draw under lo + 0.5 rounds to lo or below, one from hi - 0.5 to hi or above; between, a length is taken as
    its draw, which rounding moves by under half a token either way)."""
    atoms = length_atoms(d)
    if atoms is not None:
        return sum(x * w for x, w in atoms.items()) / sum(atoms.values())
    lo, hi = length_bounds(d)
    if d.distribution == "uniform":
        return (lo + hi) / 2
    if hi == lo:
        return float(lo)
    cdf = at_most(d)
    clipped_high = 0.0 if hi is None else hi * (1.0 - cdf(hi - 1))
    return lo * cdf(lo) + clipped_high + _partial_mean(d, lo + 0.5, math.inf if hi is None else hi - 0.5)


def mean_text(d: Distribution) -> str:
    """The mean length as drawn, in words, with the stated mean where rounding and the clip move it."""
    drawn = mean_length(d)
    stated = f" ({d.mean:,g} before the clip)" if d.mean is not None and round(drawn) != round(d.mean) else ""
    return f"mean {drawn:,.0f} tokens{stated}"


def _partial_mean(d: Distribution, a: float, b: float) -> float:
    """E[X; a <= X < b] of a normal or lognormal draw X (0 < a <= b, b may be inf)."""
    if d.distribution == "normal":
        alpha, beta = (a - d.mean) / d.std, (b - d.mean) / d.std
        return (d.mean * (_standard_normal_at_most(beta) - _standard_normal_at_most(alpha))
                - d.std * (_standard_normal_density(beta) - _standard_normal_density(alpha)))
    # lognormal: E[X; X < c] = mean x P(Z < (ln c - mu) / sigma - sigma)
    mu, sigma = _log_mean(d), d.sigma
    upper = 1.0 if b == math.inf else _standard_normal_at_most((math.log(b) - mu) / sigma - sigma)
    return d.mean * (upper - _standard_normal_at_most((math.log(a) - mu) / sigma - sigma))


def _log_mean(d: Distribution) -> float:
    """A lognormal's log-mean: the mu that keeps its mean `mean` at its sigma."""
    return math.log(d.mean) - d.sigma ** 2 / 2


def share_longer_than(a: Distribution, b: Distribution, limit: int) -> float:
    """P(A + B > limit) for independent lengths A and B, summed over the lengths of whichever has fewer to sum."""
    over, other, lengths = min(((a, b, _lengths_to_sum(a, b, limit)), (b, a, _lengths_to_sum(b, a, limit))),
                               key=lambda triple: len(triple[2]))
    over_cdf, other_cdf = at_most(over), at_most(other)
    # longer than limit - the other's shortest: always over the limit
    share = 1.0 - over_cdf(limit - length_bounds(other)[0])
    for first, last in lengths:
        middle = (first + last) // 2
        share += (over_cdf(last) - over_cdf(first - 1)) * (1.0 - other_cdf(limit - middle))
    return share


def served_means(a: Distribution, b: Distribution, limit: int) -> tuple[float, float]:
    """(E[A | A + B <= limit], E[B | A + B <= limit]): the mean lengths of the requests an engine serves when it
    refuses those longer than `limit`, each a sum over its own lengths x of x P(x) P(other <= limit - x)."""
    return _served_mean(a, b, limit), _served_mean(b, a, limit)


def _served_mean(x: Distribution, other: Distribution, limit: int) -> float:
    x_cdf, other_cdf = at_most(x), at_most(other)
    (lo, hi), other_lo = length_bounds(x), length_bounds(other)[0]
    served = weighted = 0.0
    for first, end in _spans(x, lo, limit - other_lo if hi is None else min(hi, limit - other_lo)):
        share = (x_cdf(end) - x_cdf(first - 1)) * other_cdf(limit - (first + end) // 2)
        served += share
        weighted += share * (first + end) / 2
    return weighted / served


def _lengths_to_sum(a: Distribution, b: Distribution, limit: int) -> list[tuple[int, int]]:
    """The lengths of A (as (first, last) ranges) for which A + B may or may not exceed `limit`: above limit -
    longest B and at most limit - shortest B."""
    (a_lo, a_hi), (b_lo, b_hi) = length_bounds(a), length_bounds(b)
    first = a_lo if b_hi is None else max(a_lo, limit - b_hi + 1)
    return _spans(a, first, limit - b_lo if a_hi is None else min(a_hi, limit - b_lo))


def _spans(d: Distribution, first: int, last: int) -> list[tuple[int, int]]:
    """`d`'s lengths from `first` to `last` as (first, last) ranges to sum over: its atoms one by one, else every
    length, in MAX_STEPS equal bins for a wider span."""
    atoms = _atoms(d)
    if atoms is not None:
        return [(x, x) for x in atoms[0] if first <= x <= last]
    width = max(1, math.ceil((last - first + 1) / MAX_STEPS))
    return [(x, min(x + width - 1, last)) for x in range(first, last + 1, width)]


def _atoms(d: Distribution) -> tuple[list[int], list[float]] | None:
    """(lengths, P(length <= each)) ascending, for a distribution of a few lengths (`length_atoms`); None for the
    others."""
    atoms = length_atoms(d)
    if atoms is None:
        return None
    lengths, total = sorted(atoms), sum(atoms.values())
    return lengths, list(accumulate(atoms[x] / total for x in lengths))


def _standard_normal_at_most(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _standard_normal_density(z: float) -> float:
    return 0.0 if math.isinf(z) else math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
