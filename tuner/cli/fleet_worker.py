"""One worker of a fleet (``tuner search --gpus``): ``python -m tuner.cli.fleet_worker PLAN``,
PLAN a :class:`tuner.study.plan.WorkerPlan` as JSON. It runs what ``tuner worker`` runs; the
storage URL comes in the environment (TUNER_STORAGE), never in argv.

Started before its study exists (the plan's ``wait_for_go``), it first starts its trials'
template process, which imports torch for seconds, then waits for GO on stdin: the study is
ready. Anything else (the command found a bad input, or was stopped) and it exits, measuring
nothing. What it needs to join the study (the commands, pandas, SQLAlchemy: 0.5-0.8 s) it
imports while the template imports and it waits, not before the template starts.

Stopped (Ctrl-C or SIGTERM passed on by the fleet) before its search's own handlers are in
place, it exits quietly: 0 before the go, 130 or 143 after it (tuner.launch.signals). The
fleet's process killed outright, its workers get SIGUSR1 (die_with_parent), note it and stop as
on SIGTERM, and say so in their stop reason: not the user's Ctrl-C, but their search's death.
A signal of its own, not SIGTERM and a look at the parent's pid: the kernel sends it when the
fleet's thread that started the worker exits, which can come before the fleet's process is
gone and the worker's parent changes (a stop reason read then said "stopped by the user")."""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from tuner.errors import UserError
from tuner.launch.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, installed
from tuner.study.plan import GO, STORAGE_ENV, WorkerPlan
from tuner.trial.serve import die_with_parent

if TYPE_CHECKING:
    from tuner.launch.runner import Runner


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m tuner.cli.fleet_worker PLAN_JSON", file=sys.stderr)
        return 2
    signal.signal(signal.SIGUSR1, _fleet_died)  # before asking for it: its default kills
    with installed({signal.SIGTERM: _terminated}):  # the search puts its own in place
        die_with_parent(signum=signal.SIGUSR1)  # the fleet's process, named in TUNER_PARENT_PID
        return _work(WorkerPlan.from_json(argv[0]))


# A worker's stop reason where the fleet's process died (killed outright: SIGKILL, the OOM
# killer), rather than "stopped by the user".
FLEET_DIED = "the search that started this worker died"
_fleet_gone: list[bool] = []  # holds True once the fleet's process died


def _fleet_died(signum: int, frame: Any) -> None:
    """The fleet's process died: note it, then stop as SIGTERM stops this worker (whichever
    handler is in place: this module's while it starts, its search's once it runs)."""
    _fleet_gone.append(True)
    os.kill(os.getpid(), signal.SIGTERM)


def _work(plan: WorkerPlan) -> int:
    runner = None
    if plan.wait_for_go:
        try:
            runner = _runner(plan)
            if runner is not None:
                runner.start_template(plan.factory_module)
            _import_ahead()
            told = sys.stdin.readline()
        except (KeyboardInterrupt, _Terminated):  # stopped before the study was ready
            told = ""
        if told != GO:
            if runner is not None:
                runner.close()
            return 0
    from tuner.cli import measure

    try:
        measure.run_worker(plan, os.environ.get(STORAGE_ENV), as_json=False, runner=runner,
                           stop_cause=lambda: FLEET_DIED if _fleet_gone else None)
    except KeyboardInterrupt:  # joining the study: nothing measured yet, the runner closed
        return EXIT_INTERRUPTED
    except _Terminated:
        return EXIT_TERMINATED
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a storage failing while in use: one line, as user_errors says it
        from tuner.study.storage import storage_failure

        failure = storage_failure(exc)
        if failure is None:
            raise
        print(f"Error: {failure}", file=sys.stderr)
        return 1
    return 0


class _Terminated(BaseException):
    """SIGTERM while the worker starts, before its search handles it (tuner.study.foreground)."""


def _terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def _import_ahead() -> None:
    """What joining the study imports, once the template is started: beside its import, not
    after the go."""
    import tuner.cli.measure  # noqa: F401 - the commands, pandas, the study's modules
    from tuner.study.storage import import_ahead

    import_ahead()  # SQLAlchemy and alembic, which Optuna imports on first use


def _runner(plan: WorkerPlan) -> Runner | None:
    """The worker's runner; None where the plan names a GPU this host lacks: the parent finds
    that too and cancels (were it told to go all the same, run_worker would make the runner
    again and say why it cannot)."""
    try:
        return plan.runner()
    except UserError:
        return None


if __name__ == "__main__":
    sys.exit(main())
