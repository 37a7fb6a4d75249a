"""Ctrl-C and SIGTERM while a run is in the foreground: stop after the trial in flight, or
abandon it. Everything measured is kept either way."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

# How a run that a signal stopped exits, after saving what it measured: 128 + the signal's
# number, as a shell reports a process the signal killed. A fleet reads both as "stopped".
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143: SIGTERM (a scheduler, `timeout`, `kill`)
STOPPED_EXITS = frozenset({EXIT_INTERRUPTED, EXIT_TERMINATED})


class Stoppable(Protocol):
    stop_after_trial: threading.Event  # stop before the next trial (or re-measurement)
    abort: threading.Event  # kill the one in flight


def exit_code(received: Sequence[int]) -> int:
    """The exit code of a run stopped after the signals ``received``: SIGTERM's where it came,
    else Ctrl-C's (also for a run stopped otherwise)."""
    return EXIT_TERMINATED if signal.SIGTERM in received else EXIT_INTERRUPTED


def stop_handlers(run: Stoppable, say: Callable[[str], None], what: str | Callable[[], str],
                  received: list[int] | None = None) -> dict[int, Callable[[int, Any], None]]:
    """Ctrl-C stops after the ``what`` in flight (a name, or what returns the name at the
    moment), a second Ctrl-C abandons it; SIGTERM (a scheduler, `timeout`) abandons it at once.
    Each signal is appended to ``received``, for :func:`exit_code`."""
    got: list[int] = [] if received is None else received
    name_of = what if callable(what) else lambda: what

    def on_sigint(signum: int, frame: Any) -> None:
        got.append(signum)
        unit = name_of()
        if run.stop_after_trial.is_set():
            run.abort.set()
            say(f"aborting the {unit} in flight ...")
        else:
            run.stop_after_trial.set()
            say(f"stopping after the current {unit} (Ctrl-C again to abandon it)")

    def on_sigterm(signum: int, frame: Any) -> None:
        got.append(signum)
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
