"""Run one trial in a fresh process, enforce its deadline, and classify how it ended."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from tuner.domain.records import Status, TrialRequest, TrialResult
from tuner.domain.workload import Workload
from tuner.files import write_json_atomic
from tuner.launch.compile_budget import CompileWatch
from tuner.launch.prestart import Process, Spare, Template, kill_group
from tuner.trial import prewarm
from tuner.trial.contract import (
    BUILD_FILE_ENV,
    LAUNCHED_AT_ENV,
    PARENT_PID_ENV,
    QUIET_FILE_ENV,
    TEMPLATE_ENV,
)
from tuner.trial.prebuild import PrebuildRequest

STDERR_TAIL_CHARS = 4000
COMPILE_THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"


class Runner(Protocol):
    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        """Run one trial; files for it may be kept under ``workdir``. Never raises for a
        failed trial. Setting ``abort`` ends the trial early as ``interrupted``.
        ``cache_dir``: the inductor and triton caches to use and keep (see ProcessRunner)."""
        ...

    def start_spare(self, prebuild: PrebuildRequest | None = None) -> None:
        """Start the first trial's process now, if the runner pre-starts them (see
        ProcessRunner); otherwise nothing."""
        ...

    def start_template(self, factory_module: str | None = None) -> None:
        """Start importing what trial processes import, before the workload is known, if the
        runner forks them from a template (see ProcessRunner); otherwise nothing."""
        ...

    def close(self) -> None:
        """Release what the runner keeps between trials (a pre-started process)."""
        ...


@dataclasses.dataclass(frozen=True)
class LaunchSettings:
    """How trial processes are started: the same for every trial of a run."""

    timeout_s: float = 1800.0  # kill a trial's process group after this long
    # Start the next trial's process while one runs (ProcessRunner). None: not asked, so on
    # (prestart_for), where a worker learns it from the study.
    prestart: bool | None = False
    gpu: int | None = None  # show the trials only this GPU (an index this process sees)
    # Inductor's parallel compile workers per trial (TORCHINDUCTOR_COMPILE_THREADS); None:
    # inductor's own choice, every core up to 32. A fleet gives each worker its share.
    compile_threads: int | None = None


def prestart_for(asked: bool | None) -> bool:
    """``--prestart/--no-prestart`` as asked; not asked: on. With the next processes forked
    from a template and the device readied ahead (:mod:`tuner.trial.prewarm`), it cut the
    tuner's own time per trial from 12.1 s to 0.45 s (resnet50 bf16) and from 11.2 s to 0.25 s
    (a factory model) on the H200; from 3.0 s to 0.13 s (resnet18) on a 2-core CPU box, where
    the compiles beside it took as long as without, one run each (benchmarks/trial_overhead.py
    measures it). It
    was off on the CPU while each next process imported beside the trial."""
    return True if asked is None else asked


def make_runner(settings: LaunchSettings, shared_cache: Path | None = None) -> Runner:
    """The runner of a search, a worker or a confirm run. ``shared_cache``: the cache folder of
    a --warm-cache study."""
    from tuner.launch.gpus import pin
    from tuner.trial.affinity import check_timing_cpu

    check_timing_cpu()
    env = pin(settings.gpu) if settings.gpu is not None else {}
    if settings.compile_threads is not None and COMPILE_THREADS_ENV not in os.environ:
        env[COMPILE_THREADS_ENV] = str(settings.compile_threads)  # the user's own setting wins
    return ProcessRunner(timeout_s=settings.timeout_s, cache_dir=shared_cache, env=env,
                         prestart=bool(settings.prestart))


class ProcessRunner:
    """Each trial in its own process group, killed whole at the deadline.

    ``cache_dir``: where inductor and triton keep compiled artifacts when the protocol asks
    for a warm cache; otherwise every trial gets fresh, empty cache folders (a cold compile),
    deleted after it, unless :meth:`run` is given a ``cache_dir`` of the trial's own: that one
    is used as it is (empty for a cold compile, filled for a warm one) and kept.
    ``env``: extra environment for the worker (``CUDA_VISIBLE_DEVICES`` to pin a GPU).

    ``prestart``: hide the seconds a fresh process spends importing torch. While a trial runs,
    the process for the next one is already started (CUDA untouched) and builds the model it
    expects; the next :meth:`run` hands it its request. Still one process per trial. With
    ``template`` (the default), a template process imports torch, inductor and the user's
    module once, and forks each of those processes (:mod:`tuner.trial.template`); without it,
    or where the template is unusable, each is a fresh ``tuner.trial --wait`` that imports.
    The running trial waits after its first call until the next process is ready
    (``quiet_wait_s``), so its warm-up and measurement never share the machine with an import
    or a build. :meth:`close` ends the waiting process and the template (both also die with
    this one).
    """

    def __init__(self, timeout_s: float, cache_dir: Path | None = None,
                 env: dict[str, str] | None = None, python: str = sys.executable,
                 prestart: bool = False, template: bool | None = None) -> None:
        self.timeout_s = timeout_s
        self.cache_dir = cache_dir
        self.env = dict(env or {})
        self.python = python
        self.prestart = prestart
        # None: on, unless TUNER_TEMPLATE=0 in the environment
        self.use_template = os.environ.get(TEMPLATE_ENV) != "0" if template is None else template
        self._spare: Spare | None = None  # started, importing or waiting for its request
        self._template: Template | None = None  # started with the first spare
        self._gone_told = False  # the user was told the template ended
        self._batch_sizes: list[int] = []  # of the trials run, least recently run first

    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        workdir.mkdir(parents=True, exist_ok=True)
        request_path, result_path = workdir / "request.json", workdir / "result.json"
        log_path = workdir / "trial.log"
        result_path.unlink(missing_ok=True)
        write_json_atomic(request_path, request.to_dict())

        fresh_cache = None
        if cache_dir is not None:
            cache = Path(cache_dir)
            cache.mkdir(parents=True, exist_ok=True)
        elif request.protocol.warm_cache and self.cache_dir is not None:
            cache = self.cache_dir
        else:
            cache = fresh_cache = Path(tempfile.mkdtemp(prefix="tuner-cache-"))
        watch = CompileWatch(workdir, request.protocol.compile_timeout_s)
        trial_env = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                     "TRITON_CACHE_DIR": str(cache / "triton"), **watch.env}

        started = time.monotonic()
        if self.prestart:
            spare = self._hand_over(request, request_path, result_path, trial_env)
            proc: Process = spare.proc
            outcome = _wait(proc, self.timeout_s, abort, result_path, watch,
                            tick=self._spare.watch if self._spare else None)
        else:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [self.python, "-m", "tuner.trial", str(request_path), str(result_path)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env={**self._env(), **trial_env, LAUNCHED_AT_ENV: repr(time.monotonic())},
                    start_new_session=True,  # own process group: Ctrl-C in the terminal skips it
                )
                outcome = _wait(proc, self.timeout_s, abort, result_path, watch)
        wall_s = time.monotonic() - started
        kill_group(proc.pid)  # inductor's compile workers die with the trial, whatever happened
        proc.wait()
        if self.prestart:
            spare.finish(log_path)
            if self._spare is not None:  # the trial may have ended before its first call
                self._spare.let_build()
        if fresh_cache is not None:
            shutil.rmtree(fresh_cache, ignore_errors=True)

        tail = _tail(log_path)
        if outcome == "compile_timeout" or (outcome == "timeout" and watch.in_first_call()):
            # the record so far, which the trial keeps in its marker while it compiles
            result = watch.record() if outcome == "compile_timeout" else \
                watch.timed_out(self.timeout_s)
            result.prestarted = self.prestart
        elif outcome == "timeout":
            result = TrialResult.failure(Status.TIMEOUT, f"no result after {self.timeout_s:g} s "
                                         "(--timeout); process group killed")
        elif outcome == "aborted":
            result = TrialResult.failure(Status.INTERRUPTED, "stopped by the user")
        else:
            result = _read_result(result_path, proc.poll())
        result.wall_s = wall_s
        if not result.ok:
            result.stderr_tail = tail
        return result

    def start_spare(self, prebuild: PrebuildRequest | None = None) -> None:
        """With ``prestart``, start the first trial's process now, before the search has opened
        its study and asked its sampler: its import (seconds on a GPU host) runs beside that
        work instead of after it. ``prebuild``: what it builds once imported. A search or
        worker calls it as early as it knows its workload; without it the first :meth:`run`
        starts the process."""
        if self.prestart and self._spare is None:
            self._spare = self._new_spare(prebuild.workload if prebuild else None, prebuild)

    def start_template(self, factory_module: str | None = None) -> None:
        """With ``prestart`` and a template, start the template process now (it imports torch,
        inductor and ``factory_module``, seconds on a GPU host) for :meth:`start_spare` and the
        trials to fork from later: a fleet's worker calls it before its study exists."""
        if self.prestart and self.use_template and self._template is None:
            self._template = Template.start(self.python, self._env(), factory_module)

    def close(self) -> None:
        if self._template is not None:  # first: a spare it has not forked yet never will be
            self._template.close()
        if self._spare is not None:
            self._spare.discard()
            self._spare = None

    def _new_spare(self, workload: Workload | None, prebuild: PrebuildRequest | None = None,
                   build_now: bool = True) -> Spare:
        """Forked by the template (started here the first time, with the workload's factory
        module); started fresh where there is no usable template. ``build_now`` False: it
        builds once the trial running beside it starts compiling (BUILD_FILE_ENV)."""
        if self._template is None:
            self.start_template(workload.factory_module if workload else None)
        if self._template is not None and self._template.alive():
            return Spare.fork(self._template, prebuild, build_now)
        if self._template is not None and not self._gone_told:
            self._gone_told = True
            print(f"tuner: trial processes now start fresh, importing torch each: their "
                  f"template process ended ({self._template.why_gone()})", file=sys.stderr)
        return Spare.start(self.python, self._env(), prebuild, build_now)

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env, "PYTHONUNBUFFERED": "1",
                PARENT_PID_ENV: str(os.getpid())}  # the trial dies with this process

    def _hand_over(self, request: TrialRequest, request_path: Path, result_path: Path,
                   trial_env: dict[str, str]) -> Spare:
        """The trial's process: the pre-started one (a new one if none is alive), given the
        request; the next trial's process is started at once."""
        spare, self._spare = self._spare, None
        for _ in range(2):  # a second try: a fresh process, where the template just ended
            if spare is not None and spare.started(self.timeout_s) and spare.proc.poll() is None:
                break
            if spare is not None:
                spare.discard()
            spare = self._new_spare(request.workload)
        assert spare is not None
        self._spare = self._new_spare(request.workload, self._next_build(request), build_now=False)
        spare.give(request_path, result_path, {**trial_env, QUIET_FILE_ENV: str(self._spare.ready),
                                               BUILD_FILE_ENV: str(self._spare.build)})
        return spare

    def _next_build(self, request: TrialRequest) -> PrebuildRequest:
        """What the next trial most likely builds (tuner.trial.prebuild): this workload (a
        search's is fixed) at the batch size this runner ran least recently. A search gives each
        trial to the batch size with the fewest trials, so it cycles through them; a torchvision
        model serves every batch size anyway. It readies the device in this trial's precision
        and memory format, where that is safe beside this trial (tuner.trial.prewarm)."""
        seen = self._batch_sizes
        if request.config.batch_size in seen:
            seen.remove(request.config.batch_size)
        seen.append(request.config.batch_size)
        return PrebuildRequest(request.workload, seen[0],
                               warm=prewarm.expected(request.config, request.workload))


def _wait(proc: Process, timeout_s: float, abort: threading.Event | None,
          result_path: Path, watch: CompileWatch | None = None,
          tick: Callable[[], None] | None = None) -> str:
    """How the trial ended: exited; recorded (its record is written, whole: the process is not
    waited for while it tears torch down, a second or two, since the record is the truth);
    aborted; compile_timeout (its first call ran past ``watch``'s budget); or timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=0.05)
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        if result_path.exists():  # written atomically: complete once it exists
            return "recorded"
        if tick is not None:
            tick()
        if abort is not None and abort.is_set():
            kill_group(proc.pid)
            proc.wait()
            return "aborted"
        if watch is not None and watch.spent():
            kill_group(proc.pid)
            proc.wait()
            return "compile_timeout"
        if time.monotonic() >= deadline:
            kill_group(proc.pid)
            proc.wait()
            return "timeout"


def _read_result(path: Path, returncode: int | None) -> TrialResult:
    """The trial's record; without one, a crash that says how the process ended."""
    if path.exists():
        try:
            return TrialResult.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError) as exc:
            return TrialResult.failure(Status.CRASH, f"unreadable result record: {exc}")
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else "?"
        hint = " (the host may have run out of memory)" if name == "SIGKILL" else ""
        return TrialResult.failure(Status.CRASH, f"worker killed by {name}{hint}")
    return TrialResult.failure(Status.CRASH, f"worker exited with code {returncode} and no result")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - STDERR_TAIL_CHARS))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
