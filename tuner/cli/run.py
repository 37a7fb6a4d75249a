"""Runs in the foreground: a search, a fleet of workers or a confirm run, with Ctrl-C handled,
progress on stderr and the study's report on stdout at the end."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tuner.launch import signals
from tuner.render.progress import progress_line
from tuner.domain.layout import StudyLayout
from tuner.words import plural


def run_search(search: Any, say: Callable[[str], None], as_json: bool) -> None:
    """Run a search in the foreground: Ctrl-C stops it after the trial in flight (twice:
    abandons that trial), SIGTERM abandons it; then the study's table or JSON on stdout."""
    spec = search.spec
    configs = len(spec.space.configs())
    say(f"study {spec.name} in {spec.directory}: {plural(configs, 'config')} in the space, "
        f"target {plural(min(spec.n_trials or configs, configs), 'trial')}; progress below, Ctrl-C stops after "
        "a trial")
    received: list[int] = []
    with signals.installed(signals.stop_handlers(search, say, lambda: search.in_flight, received)):
        summary = search.run()
    finish(summary, say, as_json)
    if search.stop_after_trial.is_set() or search.abort.is_set():
        sys.exit(signals.exit_code(received))


def run_fleet(fleet: Any, spec: Any, say: Callable[[str], None], as_json: bool,
              then: Callable[[list[int]], bool] | None = None) -> None:
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
    finish(summary, say, as_json)
    if stopped:
        sys.exit(signals.exit_code(received))


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


def finish(summary: Any, say: Callable[[str], None], as_json: bool) -> None:
    """How the run ended on stderr, then the study's table (or JSON) on stdout."""
    reason = summary.stop_reason
    if summary.stopped:
        reason += "; the same command resumes"
    skipped = (f" ({plural(summary.skipped, 'config')} skipped, not run)"
               if summary.skipped else "")
    say(f"stopped: {reason}; {plural(summary.new, 'new trial')}, {summary.measured} in the "
        f"study{skipped}; files in {summary.directory}")
    print_study(StudyLayout(Path(summary.directory)), as_json)


def print_study(layout: StudyLayout, as_json: bool) -> None:
    from tuner.data import files
    from tuner.render import study as report

    trials, meta = files.read(layout.trials_file)
    pareto, _ = files.read(layout.pareto_file)
    if as_json:
        click.echo(json.dumps(report.as_json(trials, pareto, meta, layout.directory), indent=2))
    else:
        click.echo(report.render(trials, pareto, meta, folder=layout.directory))


def progress(say: Callable[[str], None]) -> dict[str, Callable[..., None]]:
    """The callbacks a Search takes, printing its progress with ``say``."""
    return {"on_trial": lambda event: say(progress_line(event)), "on_message": say,
            "on_start": lambda number, c: say(f"  running {c.label} bs={c.batch_size} ...")}
