"""The trial's side of the compile budget (:mod:`tuner.launch.compile_budget`).

While the first compiled call runs, a marker file holds the trial's record so far: the runner,
seeing it older than the budget, kills the process group and keeps that record, so the row
still has what was measured before the compile (the machine, the build, the eager reference).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tuner.domain.records import TrialResult
from tuner.files import write_json_atomic
from tuner.trial.contract import COMPILE_MARKER_ENV


@contextlib.contextmanager
def compiling(result: TrialResult, compiled: bool) -> Iterator[None]:
    """Mark the block (the first call of a compiled config) for the runner's compile budget;
    a no-op for eager, which compiles nothing, and when the runner sets no budget."""
    path = os.environ.get(COMPILE_MARKER_ENV)
    if not path or not compiled:
        yield
        return
    marker = Path(path)
    write_json_atomic(marker, result.to_dict())  # before the clock starts: not compile time
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
