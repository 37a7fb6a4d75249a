"""The search of one knob sweep (benchmarks/knob_sweep.py), in a process of its own, as
benchmarks/record_knobs.py starts it:

    python benchmarks/sweep_search.py --queue QUEUE.json search --model resnet50 --space ...

After ``--queue QUEUE.json`` comes the study's ``tuner search`` command line (its ``--space``
file the sweep's union); QUEUE.json holds the configs to measure after the baselines
(:func:`knob_sweep.start_from`, a :class:`tuner.study.start_plan.StartFrom` as stored with a
study). The command line cannot say this, so the search is built here as ``tuner search``
builds it (:func:`tuner.cli.measure.search_options`, :func:`tuner.study.new_search.prepare`),
with that StartFrom and a target of the baselines and the queue (``--trials``): it measures
eager and the base at each batch size, then the queue in order, and stops. Where that target
cannot be reached (eager fails at a batch size: the configs there are rows that say so, not
trials), the sampler would go on to the rest of the union: the first config it proposes outside
the plan is aborted as it starts (the trial in flight abandoned: no row), and the run ends.
Then the base at each batch size is measured again in fresh processes until it has
:data:`knob_sweep.NOISE_PROCESSES` p50s, its trial's included (:func:`measure_bases`): the sweep's
noise floor.

Ctrl-C (SIGINT, which record_knobs sends once its time is spent) stops after the trial in
flight; the same command resumes the study and measures only what is left: the study keeps the
StartFrom it was made with, and a run that gives the same one is accepted.

Exit code: 0 once nothing queued is left to run and the bases have their processes, 1 for a
bad input (a line on stderr), 2 for a bad command line, and the tuner's code for a stopped run
(130 after Ctrl-C) otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

if __package__ in (None, ""):  # run as a script: the repository root holds `benchmarks`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import knob_sweep  # noqa: E402
from tuner.cli import measure, output  # noqa: E402
from tuner.data.select import eligible  # noqa: E402
from tuner.domain.config import TrialConfig  # noqa: E402
from tuner.errors import UserError  # noqa: E402
from tuner.launch import signals  # noqa: E402
from tuner.study import finalists, foreground, new_search  # noqa: E402
from tuner.study.start_plan import StartFrom  # noqa: E402

DONE = "every config of the sweep has a row (where the model fails, one that says so)"
USAGE = "usage: sweep_search.py --queue QUEUE.json search [tuner search options]"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] != "--queue" or args[2] != "search":
        print(USAGE, file=sys.stderr)
        return 2
    try:
        queue = StartFrom.from_dict(json.loads(Path(args[1]).read_text()))
        with measure.search.make_context("search", args[3:]) as ctx:
            return run(measure.search_options(ctx), queue)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:  # --help
        return exc.exit_code
    except (UserError, OSError, ValueError, KeyError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def run(options: new_search.SearchOptions, queue: StartFrom) -> int:
    """Build the search of ``options`` with ``queue`` measured after its baselines, run it to
    the end of the queue, and say how it ended (as ``tuner search`` does); the exit code."""
    say = output.teller(options.quiet)
    new = new_search.prepare(options, say)
    planned = {c.key for c in new.spec.space.baselines()} | {s.config.key for s in queue.configs}
    new.spec = dataclasses.replace(new.spec, start_from=queue, n_trials=len(planned))
    with output.progress(say) as callbacks:
        ended, done, search = _run(new, callbacks, planned, say)
    summary = ended.summary
    if done:  # stopped here, not by the user: nothing is left to resume
        summary = dataclasses.replace(summary, stop_reason=DONE, stopped=False)
    output.finish(summary, say, as_json=False)
    if ended.stopped and not done:  # by the user, or by record_knobs at its time
        return signals.exit_code(ended.received)
    received: list[int] = []
    if measure_bases(search, say, received):
        return signals.exit_code(received)
    return 0


def measure_bases(search: Any, say: Callable[[str], None], received: list[int]) -> bool:
    """Measure each base that finished ok again, in fresh processes, until it has
    :data:`knob_sweep.NOISE_PROCESSES` p50s (those of an earlier run count); Ctrl-C stops after
    the process in flight, as in ``tuner confirm``. True if it was stopped."""
    trials = search.current().trials
    keys = knob_sweep.base_keys(search.spec.space)
    bases = eligible(trials)
    bases = bases[bases["config_key"].isin(keys)]
    if bases.empty:
        return False
    say(f"the noise floor: each base measured in {knob_sweep.NOISE_PROCESSES} processes")
    search.abort.clear()  # set where the sweep ended itself (:func:`_run`), which was the search's
    search.stop_after_trial.clear()
    with signals.installed(signals.stop_handlers(search, say, "re-measurement", received)):
        try:
            summary = finalists.confirm(search.study, search.claims.storage, search.spec,
                                        search.runner, bases, knob_sweep.NOISE_PROCESSES - 1,
                                        on_message=say, stop=search.stop_after_trial,
                                        abort=search.abort)
        finally:
            search.runner.close()
    search.export()
    return summary.stopped


def _run(new: new_search.NewSearch, callbacks: Mapping[str, Callable[..., None]],
         planned: set[str], say: Callable[[str], None]) -> tuple[foreground.Ended, bool, Any]:
    """Run the search in the foreground, aborting the first trial of a config outside
    ``planned`` (keys) as it starts; how the run ended, whether that abort ended it, and the
    search."""
    from tuner.study.search import Search

    runner = new.runner
    if runner is None:
        raise UserError("a sweep measures in one process: drop --gpus")
    held: list[Any] = []  # the search, once made: the callback below stops it
    done: list[bool] = []

    def on_start(number: int, config: TrialConfig, name: str) -> None:
        if config.key in planned:
            callbacks["on_start"](number, config, name)
            return
        say(f"the sampler proposed {name} bs={config.batch_size}, outside the sweep: nothing "
            "planned is left to run; its trial is aborted and the sweep ends")
        search = held[0]
        search.stop_cause = lambda: DONE
        search.abort.set()
        done.append(True)

    try:
        search = Search(new.spec, runner, on_trial=callbacks["on_trial"],
                        on_message=callbacks["on_message"], on_start=on_start)
    except BaseException:  # the study refuses this workload, say
        runner.close()
        raise
    held.append(search)
    return foreground.run_search(search, say), bool(done), search


if __name__ == "__main__":
    sys.exit(main())
