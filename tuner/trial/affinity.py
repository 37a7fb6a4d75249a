"""Which host core times a trial's steady state.

Launch-bound configs (eager, inductor without CUDA graphs) wait on the host CPU between
kernels, so their latency depends on the core the launching thread runs on. With
``TUNER_TIMING_CPU=N`` the trial's timing thread (the one that launches) runs on core N while
it measures, and nowhere else; compile workers and other threads keep every core.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

TIMING_CPU_ENV = "TUNER_TIMING_CPU"


def timing_cpu() -> int | None:
    """The core named by TUNER_TIMING_CPU, if it is one this process may run on."""
    text = os.environ.get(TIMING_CPU_ENV, "").strip()
    if not text.isdigit() or not hasattr(os, "sched_getaffinity"):
        return None
    cpu = int(text)
    return cpu if cpu in os.sched_getaffinity(0) else None


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
