"""Runs in the foreground: a search, a fleet of workers or a finalists' re-measurement, with
Ctrl-C and SIGTERM handled and progress told line by line; what the run ended with comes back
(:class:`Ended`) for the command to print."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable
from typing import Any

from tuner.launch import signals
from tuner.words import plural


@dataclasses.dataclass
class Ended:
    """How a run in the foreground ended: its summary (a SearchSummary), whether it was stopped
    (the same command resumes) and the signals it received (signals.exit_code)."""

    summary: Any
    stopped: bool
    received: list[int]


def run_search(search: Any, say: Callable[[str], None]) -> Ended:
    """Run a search in the foreground: Ctrl-C stops it after the trial in flight (twice:
    abandons that trial), SIGTERM abandons it."""
    spec = search.spec
    configs = len(spec.space.configs())
    say(f"study {spec.name} in {spec.directory}: {plural(configs, 'config')} in the space, "
        f"target {plural(min(spec.n_trials or configs, configs), 'trial')}; progress below, Ctrl-C stops after "
        "a trial")
    received: list[int] = []
    with signals.installed(signals.stop_handlers(search, say, lambda: search.in_flight, received)):
        summary = search.run()
    return Ended(summary, search.stop_after_trial.is_set() or search.abort.is_set(), received)


def run_fleet(fleet: Any, spec: Any, say: Callable[[str], None],
              then: Callable[[list[int]], bool] | None = None) -> Ended:
    """Run one worker per GPU (tuner.study.fleet.Fleet) on ``spec``'s study in the foreground;
    Ctrl-C and SIGTERM are passed on. ``then``, if the workers were not stopped, runs next (it
    returns True if stopped, and appends the signals it received to the list it is given)."""
    received: list[int] = []
    configs = len(spec.space.configs())
    say(f"study {spec.name} in {spec.directory}: {plural(configs, 'config')} in the space, "
        f"target {plural(min(spec.n_trials or configs, configs), 'trial')}, one worker per GPU "
        f"({', '.join(map(str, fleet.gpus))}); each line starts with its GPU; Ctrl-C stops after "
        "the trials in flight")

    def forward(signum: int, frame: Any) -> None:
        fleet.send_signal(signum)
        if signum == signal.SIGINT:
            say("aborting the trials in flight ..." if received else
                "stopping after the trials in flight (Ctrl-C again to abandon them)")
        received.append(signum)

    with signals.installed({signal.SIGINT: forward, signal.SIGTERM: forward}):
        summary = fleet.run(spec)
    stopped = bool(received) or summary.stopped
    if then is not None and not stopped:
        stopped = then(received)
    return Ended(summary, stopped, received)


def run_confirm(search: Any, say: Callable[[str], None], repeats: Any, redo: bool = False,
                received: list[int] | None = None) -> bool:
    """Re-measure the finalists in the foreground (tuner.study.finalists): Ctrl-C stops after
    the process in flight (twice: abandons it), SIGTERM abandons it. True if it was stopped;
    the signals it got are appended to ``received`` (signals.exit_code). ``redo``: the caller
    has forgotten the earlier re-measurements (Search.forget_repeats); it words the stop."""
    from tuner.study.finalists import RESUMES

    with signals.installed(signals.stop_handlers(search, say, "re-measurement", received)):
        summary = search.confirm(repeats, resumes="the same command without --redo" if redo
                                 else RESUMES)
    failed = f", {summary.failed} failed (left out of the fronts)" if summary.failed else ""
    # Nothing measured and not stopped: every finalist had its --repeats from earlier runs.
    done = "; each already has its --repeats (--redo measures them again)" \
        if not summary.measured and not summary.stopped else ""
    say(f"{plural(summary.finalists, 'finalist')} on the fronts now; "
        f"{plural(summary.measured, 're-measurement')} now{failed}{done}"
        + (f"; stopped by the user ({'the same command without --redo' if redo else 'the same command'} resumes)"
           if summary.stopped else ""))
    return summary.stopped
