"""Several workers on one study: one process per GPU of this host (``tuner search --gpus``).

Each worker is ``python -m tuner.cli worker --gpu N``, a whole search loop whose trials see only
GPU N. Workers share the study through its storage alone (the study's SQLite file, or the
``--storage`` URL), exactly as workers on other hosts do, so there is one mechanism to trust:
claimed trials and heartbeats (see :mod:`tuner.study`). :class:`Fleet` creates the study, starts
the workers, passes signals on to them, waits, and writes the Parquet files once all are done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from tuner import results
from tuner.errors import UserError
from tuner.records import Status, TrialRequest, TrialResult
from tuner.study import Search, SearchSummary, StudySpec, export_study

# The storage URL reaches the workers in their environment, never in argv: `ps` shows argv to
# every user of the host, and the URL may hold a password. `tuner worker` reads it from here too.
STORAGE_ENV = "TUNER_STORAGE"
EXIT_STOPPED = 130  # a worker (or search) stopped by the user


def visible_gpus() -> int:
    """How many CUDA GPUs torch sees here (after CUDA_VISIBLE_DEVICES); 0 without CUDA.
    Counting does not create a CUDA context."""
    import torch

    return torch.cuda.device_count()


def choose_gpus(text: str, available: int) -> list[int]:
    """``--gpus`` as GPU indices: ``all``, or a comma-separated list such as ``0,1``."""
    if available == 0:
        raise UserError("--gpus needs CUDA GPUs and torch sees none on this machine: "
                        "drop --gpus to search on the CPU")
    text = text.strip().lower()
    if text == "all":
        return list(range(available))
    gpus: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit():
            raise UserError(f"--gpus {text!r}: give GPU indices such as 0,1, or all")
        if int(item) >= available:
            raise UserError(f"--gpus: there is no GPU {item}; torch sees {available} "
                            f"(0-{available - 1})")
        if int(item) not in gpus:
            gpus.append(int(item))
    return gpus


def pin(gpu: int, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment that shows a trial only GPU ``gpu``, counted among the GPUs this process
    sees: an existing CUDA_VISIBLE_DEVICES (indices or UUIDs) is respected."""
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return {"CUDA_VISIBLE_DEVICES": str(gpu)}
    visible = [v.strip() for v in environ["CUDA_VISIBLE_DEVICES"].split(",") if v.strip()]
    if gpu >= len(visible):
        raise UserError(f"--gpu {gpu}: CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']!r} "
                        f"shows this process {len(visible)} GPU(s)")
    return {"CUDA_VISIBLE_DEVICES": visible[gpu]}


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

    def __init__(self, spec: StudySpec, gpus: Sequence[int], *, timeout_s: float,
                 quiet: bool = False, fake_runner: bool = False, fake_delay_s: float = 0.0,
                 prestart: bool = False, python: str = sys.executable) -> None:
        if not gpus:
            raise UserError("no GPU to run a worker on")
        self.spec = spec
        self.gpus = list(gpus)
        self.timeout_s = timeout_s
        self.quiet = quiet
        self.fake_runner = fake_runner
        self.fake_delay_s = fake_delay_s
        self.prestart = prestart
        self.python = python
        self.exits: list[WorkerExit] = []
        self._procs: list[subprocess.Popen] = []

    def command(self, index: int, gpu: int) -> list[str]:
        spec = self.spec
        cmd = [self.python, "-m", "tuner.cli", "worker", "--study", spec.name,
               "--studies-dir", str(Path(spec.root).resolve()), "--gpu", str(gpu),
               "--seed", str(spec.seed + index), "--timeout", str(self.timeout_s)]
        if spec.n_trials is not None:
            cmd += ["--trials", str(spec.n_trials)]
        if spec.budget_s is not None:
            cmd += ["--budget", str(spec.budget_s)]
        if self.quiet:
            cmd.append("--quiet")
        if self.prestart:
            cmd.append("--prestart")
        if self.fake_runner:
            cmd += ["--fake-runner", "--fake-delay", str(self.fake_delay_s)]
        return cmd

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != STORAGE_ENV}
        if self.spec.storage is not None:
            env[STORAGE_ENV] = self.spec.storage
        return {**env, "PYTHONUNBUFFERED": "1"}

    def start(self) -> None:
        """Create (or check) the study and queue its baselines, once, then start the workers."""
        search = Search(self.spec, _NoTrials())
        search.prepare()
        self._study = search.study
        self._measured_before = _measured(export_study(self._study, self.spec))
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
        df = export_study(self._study, self.spec)
        failed = [e for e in self.exits if e.returncode not in (0, EXIT_STOPPED)]
        if failed:
            raise UserError("; ".join(f"the worker on GPU {e.gpu} stopped with exit code "
                                      f"{e.returncode}" for e in failed)
                            + " (its error is above); the study keeps what was measured")
        stopped = any(e.returncode == EXIT_STOPPED for e in self.exits)
        measured = _measured(df)
        return SearchSummary(
            self.spec.directory, measured, measured - self._measured_before,
            "stopped by the user" if stopped else f"all {len(self.exits)} workers finished",
            df, results.pareto(df))

    def run(self) -> SearchSummary:
        self.start()
        try:
            self.wait()
        except BaseException:
            self.send_signal(signal.SIGTERM)  # this process is going away; so do its workers
            raise
        return self.finish()


def _measured(df) -> int:
    return int(df["status"].ne(Status.INTERRUPTED.value).sum())


class _NoTrials:
    """The runner of the fleet's own Search, which only prepares the study: it runs no trial."""

    def close(self) -> None:
        pass

    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None) -> TrialResult:
        raise AssertionError("the fleet's own process runs no trial")
