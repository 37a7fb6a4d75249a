"""The verdict of one config against another over the p50s of their fresh processes: faster,
within noise, or undecided with the processes that would decide, never "use eager" for want of
processes (tuner.data.noise.verdict)."""

from __future__ import annotations

import pytest

from tuner.data import noise

# resnet50 bf16 at batch size 16 on an H100, `--confirm 1`: two processes each.
REDUCE_OVERHEAD, EAGER = [1.243, 1.217], [7.649, 4.469]


def test_two_processes_each_that_are_3_6x_apart_are_faster_beyond_noise():
    assert noise.verdict(REDUCE_OVERHEAD, EAGER).outcome == noise.FASTER
    assert noise.verdict(EAGER, REDUCE_OVERHEAD).outcome == noise.SLOWER
    assert noise.faster_beyond_noise(REDUCE_OVERHEAD, EAGER)
    assert noise.verdict(REDUCE_OVERHEAD, EAGER).ratio == pytest.approx(
        (1.243 * 1.217 / (7.649 * 4.469)) ** 0.5)
    assert noise.rank_within_noise([EAGER, REDUCE_OVERHEAD]) == [2, 1]


def test_configs_whose_processes_overlap_are_within_noise():
    a, b = [1.20, 1.25], [1.22, 1.24]
    assert noise.verdict(a, b) == noise.Verdict(noise.WITHIN, pytest.approx(0.99576, abs=1e-5))
    assert noise.within_noise({"latency_ms_p50_repeats": a}, {"latency_ms_p50_repeats": b})
    assert noise.rank_within_noise([a, b]) == [1, 1]


def test_processes_apart_but_too_close_for_their_spread_are_undecided_with_what_decides():
    # Every process of one was faster, by less than their spread allows a verdict on.
    a, b = [1.00, 1.02], [1.04, 1.05]
    v = noise.verdict(a, b)
    assert v.outcome == noise.UNDECIDED and v.ratio < 1
    assert v.processes == 3  # more than the two each has now
    assert not noise.within_noise({"latency_ms_p50_repeats": a}, {"latency_ms_p50_repeats": b})
    assert not noise.faster_beyond_noise(a, b) and not noise.faster_beyond_noise(b, a)
    # A noisier pair needs more processes to decide.
    assert noise.verdict([1.0, 1.1], [1.2, 1.4]).processes == 4


def test_one_process_is_undecided_and_cannot_say_how_many_would_decide():
    assert noise.verdict([1.0], [2.0, 2.1]) == noise.Verdict(
        noise.UNDECIDED, pytest.approx(1 / (2.0 * 2.1) ** 0.5))
    assert noise.verdict([], [2.0]).ratio is None


def test_equal_processes_on_each_side_are_apart_beyond_noise():
    assert noise.verdict([1.0, 1.0], [1.1, 1.1]).outcome == noise.FASTER
    assert noise.verdict([1.0, 1.0], [1.0, 1.0]).outcome == noise.WITHIN
