"""Entry point of a trial process: ``python -m tuner.trial REQUEST.json RESULT.json``.

Pre-started (``python -m tuner.trial --wait READY``): the process imports torch, creates the
file READY and waits for one job on stdin, a JSON line ``{"request": ..., "result": ...,
"env": {...}}``; it then runs that one trial exactly as above and exits. CUDA is not touched
before the job arrives. See :mod:`tuner.launch.prestart`.

If the parent sets TUNER_PARENT_PID, the trial dies with that process (Linux).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from tuner.files import write_json_atomic
from tuner.spec.records import Status, TrialRequest, TrialResult
from tuner.trial.contract import EXIT_CODES, PARENT_PID_ENV


def die_with_parent() -> None:
    """Be killed when the process named by TUNER_PARENT_PID dies (Linux; elsewhere a no-op).

    The parent kills this trial's process group whenever it ends a trial, but killed outright
    (SIGKILL, the OOM killer) it cannot, and an orphaned trial would go on computing on the GPU
    beside the trial that measures its config again. The kernel signals us when the parent's
    thread that started us exits: the runner starts trials from the search loop's thread.
    """
    parent = os.environ.get(PARENT_PID_ENV, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # a wrapper between us, or the parent died just before
        try:
            os.kill(int(parent), 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:
            pass


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    die_with_parent()
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--wait":
        return wait_for_job(Path(argv[1]))
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: python -m tuner.trial REQUEST.json RESULT.json\n"
              "       python -m tuner.trial --wait READY  (then one JSON job line on stdin)",
              file=sys.stderr)
        return 2
    return serve(Path(argv[0]), Path(argv[1]), started)


def wait_for_job(ready: Path) -> int:
    """Pre-started: import what every trial needs (CUDA untouched), create ``ready``, then run
    the one job that arrives on stdin. No job (stdin closed) is a quiet exit."""
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    from tuner.trial import (  # noqa: F401
        artifacts,
        build,
        checks,
        device,
        fingerprint,
        health,
        protocol,  # noqa: F401
    )

    imported_at = time.time()
    ready.touch()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    job = json.loads(line)
    os.environ.update(job.get("env") or {})  # this trial's cache folders, read lazily by torch
    # import_s: what was left of the import when the job was sent (0 once the process is ready).
    left_s = max(0.0, imported_at - float(job.get("sent_at", imported_at)))
    return serve(Path(job["request"]), Path(job["result"]), time.perf_counter() - left_s,
                 prestarted=True)


def serve(request_path: Path, result_path: Path, started: float, prestarted: bool = False) -> int:
    """Run the request's trial and write its record; the exit code for the record's status."""
    from tuner.trial.protocol import describe_error, run_trial

    request = TrialRequest.from_dict(json.loads(request_path.read_text()))
    try:
        result = run_trial(request, started)
        result.prestarted = prestarted
        if request.protocol.measure_peak:  # last, so it cannot disturb the trial's numbers
            result.peak_tflops_measured = _peak_tflops(request.workload.device)
    except Exception as exc:  # noqa: BLE001 - unexpected: still leave a record behind
        traceback.print_exc()
        result = TrialResult(status=Status.CRASH, message=f"trial process error: {describe_error(exc)}")
    write_json_atomic(result_path, result.to_dict())
    return EXIT_CODES.get(result.status, 1)


def _peak_tflops(device: str) -> float | None:
    from tuner.trial.checks import peak_matmul_tflops

    try:
        return peak_matmul_tflops(device)
    except Exception:  # noqa: BLE001 - a device that cannot run it leaves the cell blank
        traceback.print_exc()
        return None


if __name__ == "__main__":
    sys.exit(main())
