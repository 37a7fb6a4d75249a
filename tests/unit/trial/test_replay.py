"""A shape schedule: each shape's latency is taken once that shape is warm; what its first calls
cost (compiles, CUDA-graph recordings) is counted apart, per shape."""

from __future__ import annotations

import pytest

from tuner.domain.records import SCHEDULE_REPEATS
from tuner.trial.replay import TIMED_CALLS, measure_schedule


class Recording:
    """A fake compiled callable under CUDA graphs: a new shape's first call compiles (2 s), its
    next two record and warm up (0.5 s each), then each call takes its warm time."""

    WARM_S = {8: 0.001, 64: 0.004}

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}
        self.records: list[object] = []

    def step(self, shape: int) -> float:
        n = self.calls[shape] = self.calls.get(shape, 0) + 1
        if n == 1:
            self.records.append(object())  # dynamo's record of the compile
            return 2.0
        return 0.5 if n <= 3 else self.WARM_S[shape]


def test_a_recording_is_not_charged_as_latency():
    fake = Recording()
    figures = measure_schedule([8, 64, 8], fake.step, lambda: list(fake.records))
    # Each shape's own warm time, although the replay's median of 64 (3 calls) is all recording.
    assert figures.shapes[8].latency_ms == pytest.approx(1.0)
    assert figures.shapes[64].latency_ms == pytest.approx(4.0)
    assert figures.shapes[8].timed_calls >= TIMED_CALLS
    # The compile and the recordings are counted apart, per shape.
    assert figures.shapes[64].first_call_s == 2.0 and figures.shapes[64].recompiles == 1
    assert figures.shapes[64].warmup_s == pytest.approx(2.0 + 0.5 + 0.5 - 3 * 0.004)
    assert figures.shapes[8].recompiles == 1  # compiled once, recorded, then served warm
    assert figures.recompiles == 0  # records without a recompile reason: first compiles
    assert figures.recompile_s == 0.0  # the fake records carry no duration


def test_an_eager_schedule_has_no_compiles_to_count():
    figures = measure_schedule([1, 2] * 2, lambda shape: 0.001 * shape, None)
    assert figures.recompiles is None and figures.recompile_s is None
    assert figures.shapes[2].recompiles is None and figures.shapes[2].latency_ms == pytest.approx(2.0)
    assert figures.shapes[1].warmup_s == pytest.approx(0.0)
    assert len(figures.shapes) == 2 and SCHEDULE_REPEATS == 3
