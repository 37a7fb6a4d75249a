"""The one place that knows whether a trial runs on CUDA: synchronisation, timing, memory."""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from typing import Any


class Device:
    """The one place that knows whether we are on CUDA: sync, timing and memory."""

    def __init__(self, name: str) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(name)
        self.cuda = self.device.type == "cuda"
        self._nvml_handle = None

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time_call_s(self, fn: Callable[[], Any]) -> float:
        """Wall time of one call, synchronised before and after."""
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - start

    def time_requests_ms(self, fn: Callable[[], Any], min_calls: int, min_seconds: float,
                         max_seconds: float) -> tuple[list[float], float, str]:
        """What one request waits, in ms: each call followed by a synchronize, timed on the
        host from the call to its result (launch overhead and the synchronize included), for
        at least ``min_calls`` calls AND ``min_seconds``. Returns (samples, seconds, timer)."""
        self.sync()
        start = time.perf_counter()
        samples = []
        while True:
            t = time.perf_counter()
            fn()
            self.sync()
            samples.append((time.perf_counter() - t) * 1e3)
            elapsed = time.perf_counter() - start
            if (len(samples) >= min_calls and elapsed >= min_seconds) or elapsed >= max_seconds:
                break
        return samples, time.perf_counter() - start, "perf_counter_sync"

    def time_stream_ms(self, fn: Callable[[], Any], min_calls: int, min_seconds: float,
                       max_seconds: float) -> tuple[list[float], float, str]:
        """What a busy server pays per call, in ms: calls launched back to back, never waiting
        for a result. On CUDA one device event is recorded before each call and one after the
        last; a call's sample is the time from its event to the next one, so the samples add
        up to the whole stream, gaps where the GPU waited for a launch included. On the CPU,
        where a call returns when its work is done, perf_counter between call starts.
        Returns (samples, seconds, timer)."""
        if self.cuda:
            # Events made before the window: creating one costs host time, which in a
            # launch-bound stream would be counted as the call's. The pool doubles if a stream
            # outlasts it (one gap per doubling, in one sample).
            pool = self._events(max(2 * min_calls, 512))
            stream = self.torch.cuda.current_stream()  # looked up once, not at every record
            self.sync()
            start = time.perf_counter()
            n = 0
            while True:
                if n == len(pool) - 1:
                    pool += self._events(len(pool))
                pool[n].record(stream)
                n += 1
                fn()
                elapsed = time.perf_counter() - start
                if (n >= min_calls and elapsed >= min_seconds) or elapsed >= max_seconds:
                    break
            pool[n].record(stream)
            events = pool[:n + 1]
            self.sync()
            samples = [a.elapsed_time(b) for a, b in zip(events, events[1:])]
            return samples, time.perf_counter() - start, "cuda_event"
        self.sync()
        start = time.perf_counter()
        samples = []
        t = time.perf_counter()
        while True:
            fn()
            now = time.perf_counter()
            samples.append((now - t) * 1e3)
            t = now
            elapsed = now - start
            if (len(samples) >= min_calls and elapsed >= min_seconds) or elapsed >= max_seconds:
                break
        return samples, time.perf_counter() - start, "perf_counter"

    def gpu_time_ms(self, fn: Callable[[], Any], calls: int) -> float | None:
        """The GPU's own time for one call, in ms: every kernel's device time over ``calls``
        calls, summed, over ``calls`` (torch.profiler). Host time between kernels is not in it,
        so a slow launching core leaves it as it was. None off CUDA."""
        if not self.cuda:
            return None
        from torch.profiler import ProfilerActivity, profile

        self.sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            self.sync()
        total_us = sum(e.device_time_total for e in prof.key_averages()
                       if e.device_type == self.torch.autograd.DeviceType.CUDA)
        return total_us / calls / 1e3

    def _events(self, n: int) -> list[Any]:
        """``n`` timing events, each recorded once so that CUDA creates it now (torch creates
        an event at its first record)."""
        events = [self.torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for event in events:
            event.record()
        return events

    # memory -------------------------------------------------------------------------------
    def reset_peaks(self, empty_cache: bool = False) -> None:
        if self.cuda:
            self.sync()
            if empty_cache:
                self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int | None:
        return int(self.torch.cuda.memory_allocated(self.device)) if self.cuda else None

    def peaks(self) -> tuple[int | None, int | None]:
        """(max allocated, max reserved) since the last reset; CUDA-graph pools are included,
        since their memory comes from the same caching allocator."""
        if not self.cuda:
            return None, None
        self.sync()
        return (int(self.torch.cuda.max_memory_allocated(self.device)),
                int(self.torch.cuda.max_memory_reserved(self.device)))

    def process_memory_nvml(self) -> int | None:
        """Device memory NVML attributes to this process (CUDA context included), if visible."""
        if not self.cuda:
            return None
        try:
            import pynvml

            if self._nvml_handle is None:  # once: NvmlPeak calls this every 50 ms
                pynvml.nvmlInit()
                index = self.device.index if self.device.index is not None else 0
                visible = os.environ.get("CUDA_VISIBLE_DEVICES")
                if visible:
                    index = int(visible.split(",")[index])
                self._nvml_handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(self._nvml_handle):
                if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                    return int(proc.usedGpuMemory)
        except Exception:  # noqa: BLE001 - NVML is optional, and some sandboxes hide processes
            return None
        return None

    def nvml_peak(self, interval_s: float = 0.05) -> NvmlPeak:
        """A context that samples :meth:`process_memory_nvml` in a thread while it is open."""
        return NvmlPeak(self.process_memory_nvml if self.cuda else None, interval_s)


class NvmlPeak:
    """The highest device memory NVML showed for this process while the context was open,
    sampled every ``interval_s`` in a thread (NVML reports current use, not a peak, so a spike
    shorter than the interval can be missed). For the compile phase only: the sampling thread
    would compete with the calls being timed at steady state. ``peak`` stays None without CUDA
    or where NVML shows no process."""

    def __init__(self, sample: Callable[[], int | None] | None, interval_s: float) -> None:
        self._sample, self._interval = sample, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak: int | None = None

    def _take(self) -> None:
        assert self._sample is not None  # only called once __enter__ found a sampler
        value = self._sample()
        if value is not None and (self.peak is None or value > self.peak):
            self.peak = value

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._take()

    def __enter__(self) -> NvmlPeak:
        if self._sample is not None:
            self._take()
            self._thread = threading.Thread(target=self._loop, name="tuner-nvml", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._take()


def host_rss_peak_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB
