"""How busy the rest of the host was while a trial measured: CPU time other processes took,
CPU time the hypervisor gave to others while this machine's cores wanted it (steal), and how
fast the core that launched the calls ran (a fixed Python loop's time).

Launch-bound configs (eager, inductor without CUDA graphs) wait on the host CPU between kernels,
so another process on the same cores makes their latency noisy; so does a virtual machine whose
cores the hypervisor hands to another guest. Linux only (``/proc/stat``); elsewhere the figures
are None but the loop's.

On the H200's virtual machine a fresh process's cores ran a fixed loop in 2.3-2.9 ms or in
3.8-5.1 ms, and resnet50's compiled p50 followed it (2.2-2.5 ms against 3.1-4.5 ms) with the
same GPU time a call (benchmarks/slow_mode.py): what reads as a slow config there is
a slow core.
"""

from __future__ import annotations

import os
import resource
import statistics
import time


def _cpu_s() -> tuple[float, float] | None:
    """(busy, steal): CPU seconds all cores spent busy since boot (user, nice, system, irq,
    softirq: not idle, iowait or steal), and seconds stolen by the hypervisor."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    busy = fields[0] + fields[1] + fields[2] + sum(fields[5:7])
    steal = fields[7] if len(fields) > 7 else 0
    return busy / tick, steal / tick


LOOP_N = 200_000  # sum(range(LOOP_N)): about 2.4 ms on a fast core of the H200's host


def core_loop_ms(repeats: int = 5) -> float:
    """Milliseconds the calling thread's core takes for a fixed Python loop, median of
    ``repeats``: the speed of the core that launches the calls."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        sum(range(LOOP_N))
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class OtherProcesses:
    """A context that measures, while it was open, the CPU other processes used
    (``other_cpu_cores``: 1.0 is one core kept busy the whole time), the CPU the hypervisor
    took (``steal_cores``, same unit), the load average, and ``loop_ms``: the fixed loop's time
    on the calling thread's core (:func:`core_loop_ms`), the mean of one taken as the context
    opens and one as it closes (outside the measured time)."""

    def __init__(self) -> None:
        self.other_cpu_cores: float | None = None
        self.steal_cores: float | None = None
        self.load_1m: float | None = None
        self.loop_ms: float | None = None

    def __enter__(self) -> OtherProcesses:
        self._loop_ms = core_loop_ms()
        self._cpu, self._own, self._t = _cpu_s(), _own_cpu_s(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        cpu, own, elapsed = _cpu_s(), _own_cpu_s(), time.perf_counter() - self._t
        if cpu is not None and self._cpu is not None and elapsed > 0:
            other = (cpu[0] - self._cpu[0]) - (own - self._own)
            self.other_cpu_cores = round(max(0.0, other) / elapsed, 3)
            self.steal_cores = round(max(0.0, cpu[1] - self._cpu[1]) / elapsed, 3)
        self.loop_ms = round((self._loop_ms + core_loop_ms()) / 2, 3)
        try:
            self.load_1m = os.getloadavg()[0]
        except OSError:
            pass
