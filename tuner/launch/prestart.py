"""A trial process started before its trial: it imports torch while the trial before it runs.

The import costs a fresh process several seconds; started early, it costs the search nothing.
Told what to build, it also builds the model on the CPU before it says it is ready
(:mod:`tuner.trial.prebuild`). Still one process per trial: the waiting process runs exactly one
trial, handed to it as a JSON line on stdin (see :mod:`tuner.trial.__main__`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tuner.files import write_json_atomic
from tuner.trial.prebuild import PrebuildRequest


class Spare:
    """A pre-started ``tuner.trial --wait`` process, its ready file and its log, in a folder
    of its own until :meth:`finish` moves the log into the trial's folder."""

    def __init__(self, proc: subprocess.Popen, folder: Path) -> None:
        self.proc, self.folder = proc, folder
        self.ready, self.log = folder / "ready", folder / "trial.log"

    @classmethod
    def start(cls, python: str, env: dict[str, str],
              prebuild: PrebuildRequest | None = None) -> Spare:
        """Start the process; with ``prebuild``, it builds that model before it is ready."""
        folder = Path(tempfile.mkdtemp(prefix="tuner-spare-"))
        build = []
        if prebuild is not None:
            write_json_atomic(folder / "prebuild.json", prebuild.to_dict())
            build = [str(folder / "prebuild.json")]
        with open(folder / "trial.log", "wb") as log:
            proc = subprocess.Popen(
                [python, "-m", "tuner.trial", "--wait", str(folder / "ready"), *build],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                start_new_session=True)
        return cls(proc, folder)

    def give(self, request_path: Path, result_path: Path, env: dict[str, str]) -> None:
        job = {"request": str(request_path), "result": str(result_path), "env": env,
               "sent_at": time.time()}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died while importing: the trial ends as a crash, with its log

    def watch(self) -> None:
        """Called while the trial before this one runs: if this process died before it was
        ready, say ready anyway, so that trial does not wait for it."""
        if not self.ready.exists() and self.proc.poll() is not None:
            self.ready.touch()

    def finish(self, log_path: Path) -> None:
        """After the trial (process killed and waited for): its log goes to the trial's folder."""
        with contextlib.suppress(OSError):
            shutil.move(str(self.log), str(log_path))
        shutil.rmtree(self.folder, ignore_errors=True)

    def discard(self) -> None:
        kill_group(self.proc.pid)
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
