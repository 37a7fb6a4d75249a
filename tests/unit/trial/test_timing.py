"""The two steady-state timers: per request (each call then synchronize) and back to back."""

from __future__ import annotations

import math
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



class FakeCudaEvents:
    """torch.cuda's Event for a Device faked as CUDA: an event's time is the host clock at its
    record; creations after the stream's first call are counted, and the gaps between calls
    where any were made."""

    def __init__(self) -> None:
        self.created_in_window = 0
        self.gaps_with_creations: set[int] = set()
        self.calls = 0
        outer = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                if outer.calls > 0:
                    outer.created_in_window += 1
                    outer.gaps_with_creations.add(outer.calls)
                self.t: float | None = None

            def record(self, stream: object = None) -> None:
                self.t = time.perf_counter()

            def elapsed_time(self, end: Event) -> float:
                return (end.t - self.t) * 1e3

        self.Event = Event
        self.current_stream = object

    def call(self) -> None:
        self.calls += 1
        self.last_call_at = time.perf_counter()
        if self.calls == 1:
            self.first_call_at = self.last_call_at


def fake_cuda_device(events: FakeCudaEvents) -> Device:
    dev = Device("cpu")
    dev.cuda = True
    dev.torch = type("FakeTorch", (), {"cuda": events})()  # type: ignore[assignment]
    dev.sync = lambda: None  # type: ignore[method-assign]
    return dev


def test_a_cuda_stream_creates_no_event_while_it_runs():
    # Creating a CUDA event costs host time; in a launch-bound stream that time was counted as
    # the calls' (on the H200 the stream came out slower than each-call-then-synchronize).
    events = FakeCudaEvents()
    samples, _, timer = fake_cuda_device(events).time_stream_ms(events.call, 100, 0.0, 5.0)
    assert timer == "cuda_event" and len(samples) == events.calls >= 100
    assert events.created_in_window == 0


def test_a_cuda_stream_longer_than_its_event_pool_still_times_every_call():
    events = FakeCudaEvents()
    start = time.perf_counter()
    # A time window past the pool of 512 events (a few calls ask for no bigger one): 0.05 s
    # gave only 512 calls on a busy 2-core box; 0.5 s gives room for ten times that rate.
    samples, _, _ = fake_cuda_device(events).time_stream_ms(events.call, 10, 0.5, 5.0)
    end = time.perf_counter()
    assert events.calls > 1024 and len(samples) == events.calls
    # The pool doubles: new events in a handful of gaps, never one before each call.
    assert len(events.gaps_with_creations) <= math.log2(events.calls / 512) + 1
    # The samples span every call, the pool's doublings between them included.
    assert events.last_call_at - events.first_call_at <= sum(samples) / 1e3 <= end - start
