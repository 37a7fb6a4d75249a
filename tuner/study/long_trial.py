"""A line now and then while one trial runs long: a max-autotune compile takes minutes, and a
search that says nothing for that long looks hung.

While the runner runs a trial, :class:`StillRunning` says 1 minute in, then 2, 4, 8, ... minutes
in (an hour-long trial gets 6 lines), how long the trial has run and, where the trial marks its
first call (``--compile-timeout``: tuner.launch.compile_budget), that it is compiling there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from tuner.domain.config import TrialConfig
from tuner.domain.naming import config_name
from tuner.launch.compile_budget import MARKER_FILE
from tuner.words import fmt_s

FIRST_S = 60.0  # the first line this long into the trial; each later one twice as far in


class StillRunning:
    """``with StillRunning(config, workdir, say): runner.run(...)``: ``say`` is called from a
    thread of its own while the trial runs, never after the block ends."""

    def __init__(self, config: TrialConfig, workdir: Path, say: Callable[[str], None],
                 first_s: float | None = None, name: str | None = None) -> None:
        self.config, self.workdir, self.say = config, workdir, say
        self.name = config_name(config) if name is None else name  # as people read it
        self.first_s = FIRST_S if first_s is None else first_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="still-running", daemon=True)
        self._started = 0.0

    def __enter__(self) -> StillRunning:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()

    def line(self, elapsed_s: float) -> str:
        """What is said ``elapsed_s`` into the trial."""
        where = " (in its first call, compiling)" if (self.workdir / MARKER_FILE).exists() else ""
        return (f"  ... {self.name} bs={self.config.batch_size} still running after "
                f"{fmt_s(elapsed_s)}{where}")

    def _watch(self) -> None:
        due = self.first_s
        while not self._done.wait(max(0.0, self._started + due - time.monotonic())):
            self.say(self.line(time.monotonic() - self._started))
            due *= 2
