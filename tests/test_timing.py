"""The two steady-state timers: per request (each call then synchronize) and back to back."""

from __future__ import annotations

import time

from tuner.trial.device import Device


def slow_sync_device(sync_s: float) -> Device:
    """A CPU device whose synchronize takes ``sync_s``, as waiting for a GPU's work would."""
    dev = Device("cpu")
    dev.sync = lambda: time.sleep(sync_s)  # type: ignore[method-assign]
    return dev


def test_a_request_waits_for_its_result_and_a_stream_does_not():
    dev = slow_sync_device(0.004)
    requests, _, timer = dev.time_requests_ms(lambda: None, 10, 0.0, 5.0)
    stream, _, stream_timer = dev.time_stream_ms(lambda: None, 10, 0.0, 5.0)
    assert timer == "perf_counter_sync" and stream_timer == "perf_counter"
    assert min(requests) >= 4.0  # every request includes the wait for its result
    assert max(stream) < 4.0  # calls launched back to back never wait


def test_stream_samples_add_up_to_the_whole_stream():
    dev = Device("cpu")
    start = time.perf_counter()
    samples, spent, _ = dev.time_stream_ms(lambda: time.sleep(0.002), 20, 0.0, 5.0)
    assert len(samples) >= 20
    assert abs(sum(samples) / 1e3 - (time.perf_counter() - start)) < 0.01

