"""A trial process started before its trial, while the trial before it runs.

Told what to build, it builds the model on the CPU before it says it is ready
(:mod:`tuner.trial.prebuild`). Still one process per trial: the waiting process runs exactly one
trial, handed to it as a JSON line on stdin (see :mod:`tuner.trial.serve`).

Where it comes from: forked by a :class:`Template` (:mod:`tuner.trial.template`), a process that
imported torch, inductor and the user's module once, so the spare imports nothing; or, where
there is no usable template, started fresh (``tuner.trial --wait``), importing for seconds
(6-12 s on the H200 host) beside the trial before it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Protocol

from tuner.files import write_json_atomic
from tuner.trial.prebuild import PrebuildRequest


class Process(Protocol):
    """What the runner uses of a trial's process: ``subprocess.Popen``, or :class:`Forked`."""

    returncode: int | None

    @property
    def pid(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Spare:
    """A pre-started ``tuner.trial --wait`` process (or one a template forked), its ready file
    and its log, in a folder of its own until :meth:`finish` moves the log into the trial's
    folder."""

    def __init__(self, proc: Process, folder: Path,
                 template: Template | None = None) -> None:
        self.proc, self.folder, self.template = proc, folder, template
        self.ready, self.log = folder / "ready", folder / "trial.log"
        self.build = folder / "build"  # exists: it may build its model (contract.BUILD_FILE_ENV)
        self._waited_from: float | None = None  # when the runner began waiting for the fork

    @classmethod
    def start(cls, python: str, env: dict[str, str], prebuild: PrebuildRequest | None = None,
              build_now: bool = True) -> Spare:
        """Start the process; with ``prebuild``, it builds that model before it is ready: at
        once, or (``build_now`` False) once :meth:`let_build` or the trial running beside it
        says so."""
        folder = _folder(prebuild, build_now)
        build = [str(folder / "prebuild.json")] if prebuild is not None else []
        with open(folder / "trial.log", "wb") as log:
            proc = subprocess.Popen(
                [python, "-m", "tuner.trial", "--wait", str(folder / "ready"), *build],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                start_new_session=True)
        return cls(proc, folder)

    @classmethod
    def fork(cls, template: Template, prebuild: PrebuildRequest | None = None,
             build_now: bool = True) -> Spare:
        """Have ``template`` fork the process (once it has imported, if it is still at it);
        ``prebuild`` and ``build_now`` as for :meth:`start`."""
        folder = _folder(prebuild, build_now)
        prebuild_file = folder / "prebuild.json" if prebuild is not None else None
        template.send({"fork": str(folder),
                       "prebuild": str(prebuild_file) if prebuild_file else None})
        return cls(Forked(template, folder), folder, template)

    def started(self, timeout_s: float) -> bool:
        """Whether the process exists: a forked one may still wait for its template to finish
        importing (the first trial's), for at most ``timeout_s``; then the template is killed
        (the runner starts fresh processes instead). False: it never will."""
        if not isinstance(self.proc, Forked) or self.proc.forked():
            return True
        self._waited_from = time.monotonic()  # the wait is the import's: the trial counts it so
        deadline = time.monotonic() + timeout_s
        while not self.proc.forked() and self.proc.template.alive():
            if time.monotonic() > deadline:
                kill_group(self.proc.template.proc.pid)
                self.proc.template.proc.wait()
                break
            time.sleep(0.005)
        return self.proc.pid is not None

    def give(self, request_path: Path, result_path: Path, env: dict[str, str]) -> None:
        job = {"request": str(request_path), "result": str(result_path), "env": env,
               "sent_at": self._waited_from or time.monotonic()}
        if self.template is not None:
            self.template.send({"job": str(self.folder), "line": json.dumps(job)})
            return
        try:
            stdin = _stdin(self.proc)
            stdin.write((json.dumps(job) + "\n").encode())
            stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died while importing: the trial ends as a crash, with its log

    def let_build(self) -> None:
        self.build.touch()

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
        if isinstance(self.proc, subprocess.Popen):
            with contextlib.suppress(OSError, ValueError):
                _stdin(self.proc).close()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class Template:
    """The runner's side of a template process (:mod:`tuner.trial.template`): started once,
    it imports for seconds, then forks each spare in milliseconds. Commands sent before it has
    imported wait in its stdin."""

    def __init__(self, proc: subprocess.Popen, folder: Path) -> None:
        self.proc, self.folder = proc, folder
        self.log = folder / "template.log"

    @classmethod
    def start(cls, python: str, env: dict[str, str], module: str | None = None) -> Template:
        """``module``: the user's factory module, imported once there too."""
        folder = Path(tempfile.mkdtemp(prefix="tuner-template-"))
        with open(folder / "template.log", "wb") as log:
            proc = subprocess.Popen(
                [python, "-m", "tuner.trial", "--template", *([module] if module else [])],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                # torch.cuda.is_available() by NVML: called while importing, it does not start
                # CUDA, which the forked processes could then not use.
                env={**env, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}, start_new_session=True)
        return cls(proc, folder)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, command: dict[str, Any]) -> None:
        try:
            _stdin(self.proc).write((json.dumps(command) + "\n").encode())
            _stdin(self.proc).flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # it is gone: its spares say so (Forked.poll)

    def why_gone(self) -> str:
        """For a template that exited: its exit code and the last line of its log."""
        lines = [ln for ln in _read(self.log).splitlines() if ln.strip()]
        return f"exit code {self.proc.poll()}" + (f": {lines[-1].strip()}" if lines else "")

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            _stdin(self.proc).close()
        kill_group(self.proc.pid)  # the children it forked die with it
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class Forked:
    """A process a :class:`Template` forked, seen through what the runner uses of
    ``subprocess.Popen``: its pid, and its exit status, which the template (its parent) writes
    to the spare's folder."""

    def __init__(self, template: Template, folder: Path) -> None:
        self.template, self.folder = template, folder
        self.returncode: int | None = None
        self._pid: int | None = None

    def forked(self) -> bool:
        """Whether the template has forked it (its pid is known), without waiting."""
        if self._pid is None:
            text = _read(self.folder / "pid")
            self._pid = int(text) if text else None
        return self._pid is not None

    @property
    def pid(self) -> int | None:
        """None until forked (the runner waits for that with :meth:`Spare.started` before it
        hands the process a trial)."""
        return self._pid if self.forked() else None

    def poll(self) -> int | None:
        if self.returncode is None:
            text = _read(self.folder / "exit")
            if text:
                self.returncode = int(text)
            elif not self.template.alive():  # its children die with it (PR_SET_PDEATHSIG)
                pid = _read(self.folder / "pid")
                if not pid or not alive(int(pid)):
                    self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (returncode := self.poll()) is None:
            if timeout is not None and deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired([sys.executable, "-m", "tuner.trial"], timeout)
            time.sleep(0.005)
        return returncode


def kill_group(pgid: int | None) -> None:
    if pgid is None or pgid <= 1:  # never forked; 0 or 1 would name this group or init's
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _folder(prebuild: PrebuildRequest | None, build_now: bool) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tuner-spare-"))
    if build_now:
        (folder / "build").touch()
    if prebuild is not None:
        write_json_atomic(folder / "prebuild.json", prebuild.to_dict())
    return folder


def _stdin(proc: Any) -> IO[bytes]:
    stdin = proc.stdin  # a Popen started with stdin=PIPE
    assert stdin is not None
    return stdin


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (one of another user's counts). A
    zombie does not: it has exited and holds no memory, only its exit status. A spare whose
    template was killed stays one until the host's init reaps it: 1.4 s in a container whose
    pid 1 reaps slowly (measured on the 2-core CI box, 2026-12-01)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether /proc says the process has exited but is not reaped; False where there is no
    /proc (macOS)."""
    stat = _read(Path(f"/proc/{pid}/stat"))
    # pid (comm) state ...: comm may hold spaces and parentheses, so split at the last one.
    return stat.rpartition(")")[2].split()[:1] == ["Z"]
