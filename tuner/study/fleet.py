"""Several workers on one study: one process per GPU of this host (``tuner search --gpus``).

Each worker is a whole search loop whose trials see only its GPU, started as
``python -m tuner.cli.fleet_worker PLAN`` with a :class:`WorkerPlan` as JSON. Workers share the
study through its storage alone (the study's SQLite file, or the ``--storage`` URL), exactly as
workers on other hosts do, so there is one mechanism to trust: claimed trials and heartbeats
(:mod:`tuner.study.claims`). :class:`Fleet` creates the study, starts the workers, passes
signals on to them, waits, and writes the Parquet files once all are done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.errors import UserError
from tuner.launch.runner import LaunchSettings
from tuner.spec.records import Status
from tuner.study.export import export_study
from tuner.study.search import Search, SearchSummary
from tuner.study.spec import StudySpec

# The storage URL reaches the workers in their environment, never in argv: `ps` shows argv to
# every user of the host, and the URL may hold a password. `tuner worker` reads it from here too.
STORAGE_ENV = "TUNER_STORAGE"
EXIT_STOPPED = 130  # a worker (or search) stopped by the user


@dataclasses.dataclass(frozen=True)
class WorkerPlan:
    """What one worker of a study does: join it, measure on one GPU, stop at the target."""

    study: str
    root: str  # where this host keeps the study folder
    launch: LaunchSettings
    seed: int
    n_trials: int | None = None
    budget_s: float | None = None
    quiet: bool = False
    # The process that made the plan checked this host's GPUs (a fleet's parent): the worker
    # does not import torch again to count them, seconds before its first trial.
    gpus_checked: bool = False

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerPlan:
        data: dict[str, Any] = json.loads(text)
        data["launch"] = LaunchSettings(**data["launch"])
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class WorkerExit:
    gpu: int
    returncode: int


class Fleet:
    """One worker process per GPU, all on ``spec``'s study; this process measures nothing.

    Worker ``i`` samples with seed ``spec.seed + i``, so the workers propose different configs.
    :meth:`send_signal` passes a signal on: SIGINT stops each worker after its trial in flight
    (a second SIGINT abandons it), SIGTERM abandons it at once.
    """

    # The module each worker runs (``python -m``); tests put a fake runner behind their own.
    worker_module = "tuner.cli.fleet_worker"

    def __init__(self, spec: StudySpec, gpus: Sequence[int], launch: LaunchSettings, *,
                 quiet: bool = False, python: str = sys.executable) -> None:
        if not gpus:
            raise UserError("no GPU to run a worker on")
        self.spec = spec
        self.gpus = list(gpus)
        self.launch = launch
        self.quiet = quiet
        self.python = python
        self.exits: list[WorkerExit] = []
        self._procs: list[subprocess.Popen] = []

    def plan(self, index: int, gpu: int) -> WorkerPlan:
        spec = self.spec
        return WorkerPlan(study=spec.name, root=str(Path(spec.root).resolve()),
                          launch=dataclasses.replace(
                              self.launch, gpu=gpu, compile_threads=self.launch.compile_threads
                              or compile_threads(len(self.gpus))),
                          seed=spec.seed + index, n_trials=spec.n_trials, budget_s=spec.budget_s,
                          quiet=self.quiet, gpus_checked=True)

    def command(self, index: int, gpu: int) -> list[str]:
        return [self.python, "-m", self.worker_module, self.plan(index, gpu).to_json()]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != STORAGE_ENV}
        if self.spec.storage is not None:
            env[STORAGE_ENV] = self.spec.storage
        return {**env, "PYTHONUNBUFFERED": "1"}

    def start(self) -> None:
        """Create (or check) the study and queue its baselines, once, then start the workers."""
        search = Search(self.spec)
        search.prepare()
        self._fronts = search.fronts
        self._measured_before = _measured(export_study(self._fronts, self.spec).trials)
        env = self.environment()
        for index, gpu in enumerate(self.gpus):
            # Own session: a Ctrl-C in the terminal reaches this process only, which passes
            # it on once (see send_signal); the worker's report on stdout is not wanted here.
            self._procs.append(subprocess.Popen(
                self.command(index, gpu), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True))

    def send_signal(self, signum: int) -> None:
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
        exported = export_study(self._fronts, self.spec)
        failed = [e for e in self.exits if e.returncode not in (0, EXIT_STOPPED)]
        if failed:
            raise UserError("; ".join(f"the worker on GPU {e.gpu} stopped with exit code "
                                      f"{e.returncode}" for e in failed)
                            + " (its error is above); the study keeps what was measured")
        stopped = any(e.returncode == EXIT_STOPPED for e in self.exits)
        measured = _measured(exported.trials)
        return SearchSummary(
            self.spec.directory, measured, measured - self._measured_before,
            "stopped by the user" if stopped else f"all {len(self.exits)} workers finished",
            exported.trials, exported.pareto)

    def run(self) -> SearchSummary:
        self.start()
        try:
            self.wait()
        except BaseException:
            self.send_signal(signal.SIGTERM)  # this process is going away; so do its workers
            raise
        return self.finish()


def compile_threads(workers: int) -> int:
    """Inductor's parallel compile workers for each of ``workers`` workers on this host: its
    cores shared out, at most 32 (inductor's own cap). Left alone, every worker's compiles
    would start a worker per core, and two at once would share each core two ways."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(32, (cores or 1) // max(1, workers)))


def _measured(df: pd.DataFrame) -> int:
    return int(df["status"].ne(Status.INTERRUPTED.value).sum())
