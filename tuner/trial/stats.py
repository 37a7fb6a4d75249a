"""Summaries of timed samples: percentiles, and when warm-up has settled."""

from __future__ import annotations

import dataclasses
import statistics


@dataclasses.dataclass(frozen=True)
class LatencyStats:
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    iqr: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> LatencyStats:
        xs = sorted(samples_ms)
        return cls(p50=percentile(xs, 50), p90=percentile(xs, 90), p99=percentile(xs, 99),
                   mean=statistics.fmean(xs), min=xs[0],
                   iqr=percentile(xs, 75) - percentile(xs, 25))


def percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated percentile of an already sorted list (numpy's default method)."""
    if not sorted_xs:
        raise ValueError("no samples")
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def is_steady(times: list[float], window: int, tolerance: float) -> bool:
    """True when the medians of the last two windows of call times agree within ``tolerance``."""
    if len(times) < 2 * window:
        return False
    prev = statistics.median(times[-2 * window:-window])
    last = statistics.median(times[-window:])
    return abs(last - prev) <= tolerance * max(prev, 1e-12)
