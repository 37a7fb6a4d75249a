"""What the measuring commands print: progress and messages on stderr, how a run ended, the
study's report on stdout, and the exit code of a stopped run."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tuner.domain.layout import StudyLayout
from tuner.launch import signals
from tuner.render.progress import progress_line
from tuner.words import plural

if TYPE_CHECKING:
    from tuner.study.foreground import Ended


def end(ended: Ended, say: Callable[[str], None], as_json: bool) -> None:
    """How a run in the foreground ended (tuner.study.foreground) on stderr, the study's table or
    JSON on stdout, then the exit code of a stopped run."""
    finish(ended.summary, say, as_json)
    if ended.stopped:
        sys.exit(signals.exit_code(ended.received))


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


@contextlib.contextmanager
def progress(say: Callable[[str], None], live: bool = False
             ) -> Iterator[dict[str, Callable[..., None]]]:
    """The callbacks a Search takes, printing its progress with ``say``: a line per trial, or
    with ``live``, where stderr is a terminal, a live bar (tuner.render.progress_bar) that
    the block's end closes. Logs and pipes get the lines: a night's log stays greppable."""
    if not (live and on_terminal(sys.stderr)):
        yield {"on_trial": lambda event: say(progress_line(event)), "on_message": say,
               "on_start": lambda number, c, name: say(f"  running {name} bs={c.batch_size} ...")}
        return
    from rich.console import Console

    from tuner.render.progress_bar import SearchBar

    # Forced: the test above decided it; rich's own would also take FORCE_COLOR (set in CI).
    with SearchBar(Console(stderr=True, force_terminal=True)) as bar:
        yield bar.callbacks(say)


def on_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal that can redraw a line (not TERM=dumb)."""
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def echo_warnings(caught: list[warnings.WarningMessage]) -> None:
    """The library's mismatch warnings as one line each on stderr; others as Python shows them."""
    from tuner.use.environment import MismatchWarning

    for w in caught:
        if issubclass(w.category, MismatchWarning):
            click.echo(f"warning: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def teller(quiet: bool, prefix: str = "") -> Callable[[str], None]:
    """Progress and messages on stderr, unless ``quiet``."""
    def say(text: str) -> None:
        if not quiet:
            click.echo(prefix + text, err=True)
    return say
