"""How busy the rest of the host was while a trial measured: CPU time other processes took, and
CPU time the hypervisor gave to others while this machine's cores wanted it (steal).

Launch-bound configs (eager, inductor without CUDA graphs) wait on the host CPU between kernels,
so another process on the same cores makes their latency noisy; so does a virtual machine whose
cores the hypervisor hands to another guest. Linux only (``/proc/stat``); elsewhere the figures
are None.
"""

from __future__ import annotations

import os
import resource
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


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class OtherProcesses:
    """A context that measures, while it was open, the CPU other processes used
    (``other_cpu_cores``: 1.0 is one core kept busy the whole time), the CPU the hypervisor
    took (``steal_cores``, same unit), and the load average."""

    def __init__(self) -> None:
        self.other_cpu_cores: float | None = None
        self.steal_cores: float | None = None
        self.load_1m: float | None = None

    def __enter__(self) -> OtherProcesses:
        self._cpu, self._own, self._t = _cpu_s(), _own_cpu_s(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        cpu, own, elapsed = _cpu_s(), _own_cpu_s(), time.perf_counter() - self._t
        if cpu is not None and self._cpu is not None and elapsed > 0:
            other = (cpu[0] - self._cpu[0]) - (own - self._own)
            self.other_cpu_cores = round(max(0.0, other) / elapsed, 3)
            self.steal_cores = round(max(0.0, cpu[1] - self._cpu[1]) / elapsed, 3)
        try:
            self.load_1m = os.getloadavg()[0]
        except OSError:
            pass
