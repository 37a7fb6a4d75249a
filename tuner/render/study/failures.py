"""What went wrong in a study, for ``tuner show``: the trials that failed, the finalists a
re-measurement in a fresh process failed, and the trials measured on a slow host core."""

from __future__ import annotations

import pandas as pd

from tuner.data.noise import SLOW_CORE_RATIO
from tuner.data.rows import NAME
from tuner.data.select import failed_again
from tuner.domain.records import Status
from tuner.words import plural


def slow_core(trials: pd.DataFrame, listed: int = 5) -> str | None:
    """One sentence on the trials measured on a slow host core (``host_core_slowdown``): a
    launch-bound config among them reads slow, so it may be missing from a front."""
    if "host_core_slowdown" not in trials:
        return None
    slowdown = pd.to_numeric(trials["host_core_slowdown"], errors="coerce")
    slow = trials[(trials["status"] == Status.OK.value) & (slowdown >= SLOW_CORE_RATIO)]
    if slow.empty:
        return None
    names = [f"{r[NAME]} bs={r['batch_size']}" for _, r in slow.head(listed).iterrows()]
    more = f" and {len(slow) - listed} more" if len(slow) > listed else ""
    return (f"{len(slow)} of {len(trials)} trials were measured on a slow host core (a fixed "
            f"loop took {SLOW_CORE_RATIO}x as long or more as on this machine's fast cores): "
            f"{', '.join(names)}{more}. A launch-bound config among them reads slow and may be "
            "missing from a front above; `tuner show --all` flags them. Finalists, and those "
            "that would be on a front had their core been fast, are measured again by "
            "--confirm and `tuner confirm`.")


def failures(trials: pd.DataFrame) -> list[str]:
    bad = trials[trials["status"] != Status.OK.value]
    return [f"{r[NAME]} bs={r['batch_size']}: {r['status']}: {str(r['message'])[:160]}"
            for _, r in bad.iterrows()]


def left_out(trials: pd.DataFrame) -> list[str]:
    """Finalists whose trial was fine but a re-measurement failed (tuner.data.select.eligible
    leaves them out), each in a line."""
    rows = trials[(trials["status"] == Status.OK.value) & failed_again(trials)]
    return [f"{r[NAME]} bs={r['batch_size']} (trial {r['trial_number']}): "
            f"{plural(int(r['repeats_failed']), 're-measurement')} failed"
            for _, r in rows.iterrows()]
