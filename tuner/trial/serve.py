"""One trial's request, run in this process: handed to it at its start, or, pre-started, once it
has imported, built its model and been given its job.

A pre-started process (``python -m tuner.trial --wait READY [PREBUILD.json]``, or one a template
forked: :mod:`tuner.trial.template`) imports torch and, given a
:class:`tuner.trial.prebuild.PrebuildRequest` file, builds that model on the CPU once the file
BUILD beside READY exists or its job has come (contract.BUILD_FILE_ENV); it then creates the file
READY and waits for one job on stdin, a JSON line ``{"request": ..., "result": ..., "env":
{...}}``, runs that one trial and exits. CUDA is not touched before the job arrives, unless the
request asks to ready the device with the built model before READY (:mod:`tuner.trial.prewarm`).
See :mod:`tuner.launch.prestart`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from tuner.domain.records import Status, TrialRequest, TrialResult
from tuner.files import write_json_atomic
from tuner.trial.contract import EXIT_CODES, PARENT_PID_ENV
from tuner.trial.prebuild import Prebuilt


def die_with_parent(parent_pid: int | None = None, signum: int | None = None) -> None:
    """Be sent ``signum`` (SIGKILL by default) when the process named by TUNER_PARENT_PID (or
    ``parent_pid``) dies (Linux; elsewhere a no-op).

    The parent kills this trial's process group whenever it ends a trial, but killed outright
    (SIGKILL, the OOM killer) it cannot, and an orphaned trial would go on computing on the GPU
    beside the trial that measures its config again. The kernel signals us when the parent's
    thread that started us exits: the runner starts trials from the search loop's thread.
    A fleet's worker (tuner.cli.fleet_worker) asks for SIGUSR1 instead: its handler notes
    that its fleet died and stops it as SIGTERM does (the trial in flight is abandoned and dies
    with it; the worker exits 143).
    """
    parent = str(parent_pid) if parent_pid else os.environ.get(PARENT_PID_ENV, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(  # PR_SET_PDEATHSIG
            1, int(signal.SIGKILL if signum is None else signum))
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # a wrapper between us, or the parent died just before
        try:
            os.kill(int(parent), 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:
            pass


def preload(module: str | None = None) -> None:
    """Import what a trial imports before its request: torch, and what torch.compile(backend=
    "inductor") imports when called (1-2 s, more on a slow disk), torchvision, the trial's own
    modules; with ``module``, the user's factory module (an import error is the trial's to
    report). CUDA untouched; the caches' folders are read when used, so still the job's."""
    import importlib

    import torch  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import torchvision  # noqa: F401

    from tuner.runtime import artifacts, fingerprint, knobs  # noqa: F401
    from tuner.trial import (  # noqa: F401
        build,
        checks,
        device,
        health,
        protocol,
    )

    if module:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit):  # noqa: BLE001 - the trial's build says what is wrong
            traceback.print_exc()


def wait_for_job(ready: Path, prebuild_file: Path | None = None) -> int:
    """Pre-started: import what every trial needs (CUDA untouched), build the model of
    ``prebuild_file`` on the CPU if given one, create ``ready``, then run the one job that
    arrives on stdin. No job (stdin closed) is a quiet exit."""
    preload()  # nothing left to import where a template forked this process
    imported_at = time.monotonic()
    prebuilt = None
    if prebuild_file is not None:
        from tuner.trial.prebuild import PrebuildRequest, prebuild, warm

        wait_for_turn(ready.with_name("build"))
        prebuilt = prebuild(PrebuildRequest.from_dict(json.loads(prebuild_file.read_text())))
        failed = warm(prebuilt, job_waiting=job_waiting())
        if failed:
            start_afresh(ready, failed)
    ready_at = time.monotonic()
    ready.touch()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    received_at = time.monotonic()
    job = json.loads(line)
    os.environ.update(job.get("env") or {})  # this trial's cache folders, read lazily by torch
    # What was left, when the job was sent, of the import (import_s) and of the build and the
    # device's readying (build_s); 0 once the process is ready. The rest, the hand-over
    # itself, is launch_s.
    sent_at = float(job.get("sent_at", ready_at))
    left_s = max(0.0, imported_at - sent_at)
    if prebuilt is not None:
        prebuilt.left_s = max(0.0, ready_at - max(imported_at, sent_at))
    return serve(Path(job["request"]), Path(job["result"]), time.perf_counter() - left_s,
                 prestarted=True, prebuilt=prebuilt,
                 launch_s=max(0.0, received_at - max(ready_at, sent_at)))


def start_afresh(ready: Path, why: str) -> None:
    """Replace this process with a fresh ``python -m tuner.trial --wait READY``: same pid, so
    the runner and the template keep track of it, same stdin, where its job may already wait,
    same log; it imports and builds nothing ahead. Never returns."""
    print(f"tuner: {why}; this process starts afresh for its trial", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "tuner.trial", "--wait", str(ready)])


def job_waiting(jobs: int | None = None, timeout: float = 0.0) -> bool:
    """Whether this process's job has come on stdin (or ``jobs``, a file descriptor), waiting
    at most ``timeout`` seconds for it."""
    import select

    jobs = sys.stdin.fileno() if jobs is None else jobs
    return bool(select.select([jobs], [], [], timeout)[0])


def wait_for_turn(build: Path, jobs: int | None = None) -> None:
    """Wait until the file ``build`` exists (the trial before this one has started compiling:
    BUILD_FILE_ENV) or this process's own job has come on stdin (or ``jobs``, a file
    descriptor), whichever is first."""
    while not build.exists():
        if job_waiting(jobs, timeout=0.005):
            return


def serve(request_path: Path, result_path: Path, started: float, prestarted: bool = False,
          prebuilt: Prebuilt | None = None, launch_s: float | None = None) -> int:
    """Run the request's trial and write its record; the exit code for the record's status.
    ``started``: the process's clock at its start (import_s counts from there); ``launch_s``:
    the time before it, since the runner started the trial."""
    from tuner.trial.failures import describe_error
    from tuner.trial.protocol import run_trial

    request = TrialRequest.from_dict(json.loads(request_path.read_text()))
    try:
        result = run_trial(request, started, prebuilt)
        result.prestarted = prestarted
        result.launch_s = launch_s
        if request.protocol.measure_peak:  # last, so it cannot disturb the trial's numbers
            result.peak_tflops_measured = _peak_tflops(request.workload.device)
    except Exception as exc:  # noqa: BLE001 - unexpected: still leave a record behind
        traceback.print_exc()
        result = TrialResult(status=Status.CRASH, message=f"trial process error: {describe_error(exc)}")
    result.process_s = time.perf_counter() - started + (prebuilt.left_s if prebuilt else 0.0)
    write_json_atomic(result_path, result.to_dict())
    return EXIT_CODES.get(result.status, 1)


def _peak_tflops(device: str) -> float | None:
    from tuner.trial.checks import peak_matmul_tflops

    try:
        return peak_matmul_tflops(device)
    except Exception:  # noqa: BLE001 - a device that cannot run it leaves the cell blank
        traceback.print_exc()
        return None
