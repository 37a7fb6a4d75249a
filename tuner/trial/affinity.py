"""Which host core times a trial's steady state.

Launch-bound configs (eager, inductor without CUDA graphs) wait on the host CPU between
kernels, so their latency depends on the core the launching thread runs on. With
``TUNER_TIMING_CPU=N`` the trial's timing thread (the one that launches) runs on core N while
it measures, and nowhere else; compile workers and other threads keep every core.

``TUNER_TIMING_CPU=fastest`` picks the core as the measurement starts: the timing thread runs
the fixed loop of :func:`tuner.trial.host.core_loop_ms` on each core it may use, in turn, and
stays on the fastest. On the H200's VM every process had fast cores (the loop in 2.3-2.7 ms)
and slow ones (4.4-5.8 ms) at once, 3 to 9 of its 16 slow, and which were slow changed from one
process to the next (benchmarks/launch_variance.py, benchmarks/slow_mode.py), so a fixed N
cannot choose well. Picking the core helped a p50 of 200 calls taken right after the pick (0 of
7 runs slow against 2 of 7), but not a trial's steady state of several seconds: with it, 3 of
18 trials of the same config were slow, each on a core whose loop took 4.2-4.6 ms in the
window (the core chosen did not stay fast; benchmarks/slow_mode.py). It also
made a trial's ``other`` phase 0.25-0.32 s against 0.05-0.13 s without it (resnet50, 16 cores,
two calls). So it is not the default; ``host_loop_ms`` and
``tuner show``'s flag are what guard against a slow core.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

TIMING_CPU_ENV = "TUNER_TIMING_CPU"
FASTEST = "fastest"
PROBE_REPEATS = 3  # loops per core when picking the fastest (one took 2.3-5.8 ms on the H200)


def check_timing_cpu() -> None:
    """A one-line error, in the process that starts trials, for a TUNER_TIMING_CPU that names
    no core: each trial would otherwise run unpinned without a word."""
    from tuner.errors import UserError

    text = os.environ.get(TIMING_CPU_ENV, "").strip()
    if not text or text == FASTEST:
        return
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if not (text.isascii() and text.isdigit()):
        raise UserError(f"{TIMING_CPU_ENV}={text!r}: give a core number or {FASTEST}, or unset "
                        "it")
    if cores is not None and int(text) not in cores:
        raise UserError(f"{TIMING_CPU_ENV}={text}: this process may not run on core {text} "
                        f"(it may use {_ranges(cores)}): give one of those, or unset it")


def _ranges(cores: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    out: list[str] = []
    for core in cores:
        if out and core == int(out[-1].rpartition("-")[2]) + 1:
            out[-1] = f"{out[-1].partition('-')[0]}-{core}"
        else:
            out.append(str(core))
    return ", ".join(out)


def timing_cpu() -> int | None:
    """The core named by TUNER_TIMING_CPU (or, for ``fastest``, the fastest now: see the
    module's text), if it is one this process may run on."""
    text = os.environ.get(TIMING_CPU_ENV, "").strip()
    if not hasattr(os, "sched_getaffinity"):
        return None
    if text == FASTEST:
        return fastest_cpu()
    if not text.isdigit():
        return None
    cpu = int(text)
    return cpu if cpu in os.sched_getaffinity(0) else None


def fastest_cpu() -> int | None:
    """The core, of those the calling thread may use, that runs the fixed loop fastest now;
    the thread is left where it was. None where it may not be moved."""
    from tuner.trial.host import core_loop_ms

    before = os.sched_getaffinity(0)
    times = {}
    try:
        for cpu in sorted(before):
            os.sched_setaffinity(0, {cpu})
            times[cpu] = core_loop_ms(PROBE_REPEATS)
    except OSError:
        return None
    finally:
        os.sched_setaffinity(0, before)
    return min(times, key=lambda cpu: times[cpu]) if times else None


@contextlib.contextmanager
def timing_thread_on(cpu: int | None) -> Iterator[int | None]:
    """Run the calling thread on ``cpu`` only while the context is open (Linux: pid 0 is the
    calling thread); yields the core, or None where nothing was pinned."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        yield None
        return
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)
