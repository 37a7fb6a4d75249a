"""How busy the rest of the host was while a trial measured: CPU time other processes took.

Launch-bound configs (eager, inductor without CUDA graphs) wait on the host CPU between kernels,
so another process on the same cores makes their latency noisy. Linux only (``/proc/stat``);
elsewhere the figures are None.
"""

from __future__ import annotations

import os
import resource
import time


def _busy_cpu_s() -> float | None:
    """CPU seconds all cores spent busy since boot (everything but idle and iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class OtherProcesses:
    """A context that measures the CPU other processes used while it was open, in cores
    (``other_cpu_cores``: 1.0 is one core kept busy the whole time), and the load average."""

    def __init__(self) -> None:
        self.other_cpu_cores: float | None = None
        self.load_1m: float | None = None

    def __enter__(self) -> OtherProcesses:
        self._busy, self._own, self._t = _busy_cpu_s(), _own_cpu_s(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, own, elapsed = _busy_cpu_s(), _own_cpu_s(), time.perf_counter() - self._t
        if busy is not None and self._busy is not None and elapsed > 0:
            other = (busy - self._busy) - (own - self._own)
            self.other_cpu_cores = round(max(0.0, other) / elapsed, 3)
        try:
            self.load_1m = os.getloadavg()[0]
        except OSError:
            pass
