"""Percentiles of timed samples: exact values, numpy's linear method."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tuner.trial.stats import LatencyStats, percentile


@pytest.mark.parametrize("xs, q, expected", [
    ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),
    ([1.0, 2.0, 3.0, 4.0, 5.0], 90, 4.6),
    ([1.0, 2.0, 3.0, 4.0, 5.0], 99, 4.96),
    ([1.0, 2.0, 3.0, 4.0, 5.0], 25, 2.0),
    ([10.0, 20.0], 50, 15.0),
    ([10.0, 20.0], 0, 10.0),
    ([10.0, 20.0], 100, 20.0),
    ([7.0], 99, 7.0),
    ([1.0, 2.0, 4.0, 8.0], 50, 3.0),
])
def test_a_percentile_interpolates_between_the_two_nearest_samples(xs, q, expected):
    assert percentile(xs, q) == pytest.approx(expected, abs=1e-12)


def test_percentiles_match_numpys_linear_method():
    draw = random.Random(0)
    for n in range(1, 25):
        xs = sorted(draw.uniform(0.1, 10.0) for _ in range(n))
        for q in (0, 10, 25, 50, 75, 90, 99, 100):
            assert percentile(xs, q) == pytest.approx(
                float(np.percentile(xs, q, method="linear")), abs=1e-12), (n, q)


def test_latency_stats_of_a_few_calls():
    stats = LatencyStats.of([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (stats.p50, stats.p90, stats.p99, stats.min, stats.iqr, stats.mean) == \
        pytest.approx((3.0, 4.6, 4.96, 1.0, 2.0, 3.0))


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)
