"""The compile budget (``--compile-timeout``): how long a trial's first, compiling call may run.

Past it the runner kills the trial's whole process group, as at ``--timeout``, and the trial
ends as ``compile_timeout``, its message naming the budget and the seconds the call ran.

The runner enforces it, not a watchdog thread in the trial. A compile cannot be interrupted
cleanly, and a thread in the trial runs only when the compile lets go of the GIL; the runner is
another process that the compile cannot block, and it kills the group the way it does at
``--timeout`` (inductor's compile workers and autotuning subprocesses die too). The trial's part
is a marker file (:mod:`tuner.trial.compiling`), present while the first call runs and holding
the record so far, which the runner keeps as the row.

Only the standard library and the records are imported: the search process uses this.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tuner.domain.records import Status, TrialResult
from tuner.trial.contract import COMPILE_MARKER_ENV

MARKER_FILE = "compiling.json"  # in the trial's folder


def message(ran_s: float, budget_s: float) -> str:
    """The one line a compile_timeout row says (the fake runner says it too)."""
    return (f"the first (compiling) call was still running after {ran_s:.1f} s, past the compile "
            f"budget of {budget_s:g} s (--compile-timeout); process group killed")


class CompileWatch:
    """The runner's watch over one trial's first call. Armed when the trial's marker appears
    (the runner's own clock starts then), disarmed for good when it goes: the call returned."""

    def __init__(self, workdir: Path, budget_s: float | None) -> None:
        self.marker = workdir / MARKER_FILE
        self.budget_s = budget_s
        self.ran_s: float | None = None  # set when the budget is spent
        self._seen_at: float | None = None
        self._done = False
        self.marker.unlink(missing_ok=True)  # a killed trial's, from before

    @property
    def env(self) -> dict[str, str]:
        """What the trial process is given: the marker's path, only if there is a budget."""
        return {} if self.budget_s is None else {COMPILE_MARKER_ENV: str(self.marker)}

    def spent(self) -> bool:
        """Whether the first call has run past the budget (called while the runner waits)."""
        if self.budget_s is None or self._done:
            return False
        now, present = time.monotonic(), self.marker.exists()
        if self._seen_at is None:
            self._seen_at = now if present else None
            return False
        if not present:
            self._done = True
            return False
        if now - self._seen_at < self.budget_s:
            return False
        self.ran_s = now - self._seen_at
        return True

    def record(self) -> TrialResult:
        """Once the process group is killed: the record the trial left in its marker (or a bare
        one, if it cannot be read), as compile_timeout."""
        assert self.budget_s is not None and self.ran_s is not None, "call after spent()"
        result = self._so_far(Status.COMPILE_TIMEOUT)
        result.message = message(self.ran_s, self.budget_s)
        return result

    def in_first_call(self) -> bool:
        """Whether the first (compiling) call is running: its marker was seen and is there."""
        return not self._done and self._seen_at is not None and self.marker.exists()

    def timed_out(self, timeout_s: float) -> TrialResult:
        """Once the process group is killed at ``--timeout`` during the first call
        (:meth:`in_first_call`): a timeout row that says so and keeps the record so far, as a
        compile_timeout row does (the compile was within its budget: its mode is not skipped)."""
        assert self._seen_at is not None, "call when in_first_call()"
        ran_s = time.monotonic() - self._seen_at
        result = self._so_far(Status.TIMEOUT)
        result.message = (f"no result after {timeout_s:g} s (--timeout), with its first "
                          f"(compiling) call still running after {ran_s:.1f} s; process group "
                          "killed")
        return result

    def _so_far(self, status: Status) -> TrialResult:
        try:
            result = TrialResult.from_dict(json.loads(self.marker.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            result = TrialResult(status=status)
        self.marker.unlink(missing_ok=True)
        result.status = status
        return result
