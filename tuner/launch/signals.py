"""Ctrl-C and SIGTERM while a run is in the foreground: stop after the trial in flight, or
abandon it. Everything measured is kept either way."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol


class Stoppable(Protocol):
    stop_after_trial: threading.Event  # stop before the next trial (or re-measurement)
    abort: threading.Event  # kill the one in flight




def stop_handlers(run: Stoppable, say: Callable[[str], None],
                  what: str) -> dict[int, Callable[[int, Any], None]]:
    """Ctrl-C stops after the ``what`` in flight, a second Ctrl-C abandons it; SIGTERM (a
    scheduler, `timeout`) abandons it at once."""

    def on_sigint(signum: int, frame: Any) -> None:
        if run.stop_after_trial.is_set():
            run.abort.set()
            say(f"aborting the {what} in flight ...")
        else:
            run.stop_after_trial.set()
            say(f"stopping after the current {what} (Ctrl-C again to abandon it)")

    def on_sigterm(signum: int, frame: Any) -> None:
        run.stop_after_trial.set()
        run.abort.set()

    return {signal.SIGINT: on_sigint, signal.SIGTERM: on_sigterm}


@contextlib.contextmanager
def installed(handlers: dict[int, Callable[[int, Any], None]]) -> Iterator[None]:
    """Install signal handlers for the duration of a run, then put the previous ones back."""
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
