"""Several workers on one study: one process per GPU of this host (``tuner search --gpus``).

Each worker is a whole search loop whose trials see only its GPU, started as
``python -m tuner.cli.fleet_worker PLAN`` with a :class:`WorkerPlan` as JSON. Workers share the
study through its storage alone (the study's SQLite file, or the ``--storage`` URL), exactly as
workers on other hosts do, so there is one mechanism to trust: claimed trials and heartbeats
(:mod:`tuner.study.claims`). :class:`Fleet` starts the workers, creates the study, tells them
to go, passes signals on to them, waits, and writes the Parquet files once all are done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tuner.domain.workload import factory_module
from tuner.errors import UserError
from tuner.launch.runner import LaunchSettings
from tuner.launch.signals import EXIT_INTERRUPTED as EXIT_STOPPED
from tuner.launch.signals import EXIT_TERMINATED, STOPPED_EXITS
from tuner.study.export import export_study
from tuner.study.plan import GO, STORAGE_ENV, WorkerPlan
from tuner.study.progress import SearchSummary, counted
from tuner.study.search import STOPPED, Search
from tuner.study.spec import StudySpec
from tuner.trial.contract import PARENT_PID_ENV

__all__ = ["EXIT_STOPPED", "EXIT_TERMINATED", "GO", "STORAGE_ENV", "Fleet", "WorkerExit",
           "WorkerPlan", "plan_of"]


@dataclasses.dataclass(frozen=True)
class WorkerExit:
    gpu: int
    returncode: int


class Fleet:
    """One worker process per GPU on one study; this process measures nothing.

    The workers start before the study is ready (:meth:`spawn`, ahead of the command's checks
    of its options and model, which take seconds): each imports what it needs and starts its
    trials' template process, whose import of torch the first trial would otherwise wait for
    (10-13 s on the H200 host; benchmarks/fleet_startup.py). :meth:`start` then prepares
    the study and tells them to go; :meth:`cancel` (a bad input) lets them exit, measuring
    nothing. Worker ``i`` samples with seed ``base.seed + i``, so the workers propose different
    configs. :meth:`send_signal` passes a signal on: SIGINT stops each worker after its trial
    in flight (a second SIGINT abandons it), SIGTERM abandons it at once.
    """

    # The module each worker runs (``python -m``); tests put a fake runner behind their own.
    worker_module = "tuner.cli.fleet_worker"

    def __init__(self, base: WorkerPlan, gpus: Sequence[int], *, storage: str | None = None,
                 python: str = sys.executable) -> None:
        if not gpus:
            raise UserError("no GPU to run a worker on")
        self.base = base
        self.gpus = list(gpus)
        self.storage = storage
        self.python = python
        self.exits: list[WorkerExit] = []
        self.passed_on: list[int] = []  # the signals send_signal passed on to the workers
        self._procs: list[subprocess.Popen] = []
        self._spec: StudySpec | None = None

    @classmethod
    def of(cls, spec: StudySpec, gpus: Sequence[int], launch: LaunchSettings, *,
           quiet: bool = False, python: str = sys.executable) -> Fleet:
        """The fleet of an existing spec (the command makes its plan before its spec)."""
        return cls(plan_of(spec.name, spec.root, launch, spec.seed, spec.n_trials, spec.budget_s,
                           quiet, spec.workload.model, retry_failed=spec.retry_failed), gpus,
                   storage=spec.storage, python=python)

    def plan(self, index: int, gpu: int) -> WorkerPlan:
        launch = self.base.launch
        return dataclasses.replace(
            self.base, seed=self.base.seed + index, gpus_checked=True, wait_for_go=True,
            launch=dataclasses.replace(launch, gpu=gpu, compile_threads=launch.compile_threads
                                       or compile_threads(len(self.gpus))))

    def command(self, index: int, gpu: int) -> list[str]:
        return [self.python, "-m", self.worker_module, self.plan(index, gpu).to_json()]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != STORAGE_ENV}
        if self.storage is not None:
            env[STORAGE_ENV] = self.storage
        # The workers die with this process (SIGTERM: each abandons its trial), killed outright
        # though it be: in their own sessions, nothing else would stop them.
        return {**env, "PYTHONUNBUFFERED": "1", PARENT_PID_ENV: str(os.getpid())}

    def spawn(self) -> None:
        """Start the workers; each gets ready and waits for :meth:`start` (or :meth:`cancel`)."""
        if self._procs:
            return
        env = self.environment()
        for index, gpu in enumerate(self.gpus):
            # Own session: a Ctrl-C in the terminal reaches this process only, which passes
            # it on once (see send_signal); the worker's report on stdout is not wanted here.
            self._procs.append(subprocess.Popen(
                self.command(index, gpu), env=env, stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, start_new_session=True))

    def start(self, spec: StudySpec) -> None:
        """Create (or check) the study and queue its baselines, once, then tell the workers
        (started now if :meth:`spawn` was not called) to go."""
        self.spawn()
        search = Search(spec)
        search.prepare()
        self._spec = spec
        self._fronts = search.fronts
        self._measured_before = counted(export_study(self._fronts, spec).trials)[0]
        self._tell(GO)

    def cancel(self) -> None:
        """Let workers that were not told to go exit, measuring nothing (each closes its
        template process); wait for them."""
        self._tell("")
        self.wait()

    def _tell(self, line: str) -> None:
        for proc in self._procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write(line.encode())
                proc.stdin.close()

    def send_signal(self, signum: int) -> None:
        self.passed_on.append(signum)
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signum)

    def wait(self) -> list[WorkerExit]:
        self.exits = [WorkerExit(gpu, proc.wait()) for gpu, proc in zip(self.gpus, self._procs)]
        return self.exits

    def finish(self) -> SearchSummary:
        """Write the Parquet files from the storage; a worker that failed is a user error
        (after the files are written, so nothing measured is lost)."""
        spec = self._spec
        assert spec is not None, "finish() follows start()"
        exported = export_study(self._fronts, spec)
        failed = [e for e in self.exits if e.returncode != 0 and not self.stopped(e)]
        if failed:
            raise UserError("; ".join(f"the worker on GPU {e.gpu} {_ended(e.returncode)}"
                                      for e in failed) + "; the study keeps what was measured")
        # Workers told to stop before their search began exit 0 (still waiting for the go)
        # or by the signal itself: the fleet was stopped all the same.
        stopped = bool(self.passed_on) or any(self.stopped(e) for e in self.exits)
        measured, skipped = counted(exported.trials)
        return SearchSummary(
            spec.directory, measured, measured - self._measured_before,
            STOPPED if stopped else f"all {len(self.exits)} workers finished",
            exported.trials, exported.pareto, stopped=stopped, skipped=skipped)

    def stopped(self, worker: WorkerExit) -> bool:
        """Whether ``worker`` exited as a stopped search does (130 for Ctrl-C, 143 for
        SIGTERM), or was killed by a signal this fleet passed on before it could handle it
        (while it started)."""
        return worker.returncode in STOPPED_EXITS or -worker.returncode in self.passed_on

    def run(self, spec: StudySpec) -> SearchSummary:
        try:
            self.start(spec)
        except BaseException:
            self.cancel()  # the study refused this run, say: the workers measure nothing
            raise
        try:
            self.wait()
        except BaseException:
            self.send_signal(signal.SIGTERM)  # this process is going away; so do its workers
            raise
        return self.finish()


def plan_of(study: str, root: str | Path, launch: LaunchSettings, seed: int,
            n_trials: int | None, budget_s: float | None, quiet: bool, model: str,
            retry_failed: bool = False) -> WorkerPlan:
    """What each worker of a fleet is told, before the study is made: ``model`` (``--model``)
    names the factory module its template process imports ahead."""
    return WorkerPlan(study=study, root=str(Path(root).resolve()), launch=launch, seed=seed,
                      n_trials=n_trials, budget_s=budget_s, quiet=quiet,
                      factory_module=factory_module(model), retry_failed=retry_failed)


def compile_threads(workers: int) -> int:
    """Inductor's parallel compile workers for each of ``workers`` workers on this host: its
    cores shared out, at most 32 (inductor's own cap). Left alone, every worker's compiles
    would start a worker per core, and two at once would share each core two ways."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(32, (cores or 1) // max(1, workers)))


def _ended(returncode: int) -> str:
    """How a worker that failed ended: an error it wrote, or a signal that left it no word (the
    out-of-memory killer's SIGKILL, say)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}, leaving no error"
    return f"stopped with exit code {returncode} (its error is above)"


