"""Whether a process is gone, for the tests that kill process groups and parents."""

from __future__ import annotations

import time


def gone(pid: int) -> bool:
    """No such process, or only its exit status is left (a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_until_gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether the process is gone within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return gone(pid)
