"""A template process: it imports what every trial needs once, then forks each pre-started
trial process from itself, so that no trial process imports torch.

``python -m tuner.trial --template [MODULE]`` (started by :class:`tuner.launch.prestart.Template`)
imports torch, inductor, torchvision, the trial's modules and, given one, the user's factory
module; it never touches CUDA (a forked child can use CUDA only where its parent never did). It
then reads commands on stdin, one JSON line each:

- ``{"fork": FOLDER, "prebuild": PATH or null}``: fork a child. The child is its own process
  group, logs to FOLDER/trial.log and runs :func:`tuner.trial.serve.wait_for_job` exactly as a
  fresh ``tuner.trial --wait`` process does, its stdin a pipe the template holds. The template
  writes the child's pid to FOLDER/pid.
- ``{"job": FOLDER, "line": JOB}``: write the job line to that child's stdin and close it.

When a child exits, the template writes its exit status (as ``Popen.returncode`` says it) to
FOLDER/exit. A template that finds CUDA started after its imports (a factory module that touches
CUDA when imported) exits with code 3 before forking anything; the runner then starts fresh
processes instead. Stdin closed: the template exits, and its children with it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback
from pathlib import Path

from tuner.trial.serve import die_with_parent, preload, wait_for_job

UNUSABLE_EXIT = 3  # CUDA started in the template: its children could not use it


def main(module: str | None) -> int:
    preload(module)
    import torch

    if torch.cuda.is_initialized():
        print(f"template unusable: importing {module} started CUDA", file=sys.stderr)
        return UNUSABLE_EXIT
    children: dict[int, Path] = {}  # pid -> folder, until it exits
    stdins: dict[str, int] = {}  # folder -> the write end of a waiting child's stdin
    # A child's exit wakes the loop (SIGCHLD, through a pipe): no polling beside a trial that
    # measures.
    exits, exited = os.pipe()
    os.set_blocking(exited, False)
    signal.set_wakeup_fd(exited)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        readable, _, _ = select.select([0, exits], [], [])
        if exits in readable:
            os.read(exits, 4096)
        _reap(children, stdins)
        if 0 not in readable:
            continue
        data = os.read(0, 65536)
        if not data:
            return 0  # the runner is gone or done; children die with this process
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            command = json.loads(line)
            if "fork" in command:
                folder = Path(command["fork"])
                pid, stdin = _fork(folder, command.get("prebuild"), stdins, (exits, exited))
                children[pid] = folder
                stdins[str(folder)] = stdin
                _put(folder / "pid", str(pid))
            elif "job" in command:
                stdin = stdins.pop(command["job"], -1)
                if stdin >= 0:
                    try:
                        os.write(stdin, (command["line"] + "\n").encode())
                    except OSError:
                        pass  # it died while waiting: its exit status says so
                    os.close(stdin)


def _fork(folder: Path, prebuild: str | None, stdins: dict[str, int],
          wakeup: tuple[int, int]) -> tuple[int, int]:
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.setpgid(0, 0)  # its own group, killed whole by the runner
            signal.set_wakeup_fd(-1)  # the template's, not this trial's
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (write, *wakeup):
                os.close(fd)
            for other in stdins.values():  # another child's stdin must see EOF without us
                os.close(other)
            os.dup2(read, 0)
            os.close(read)
            log = os.open(folder / "trial.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            die_with_parent(os.getppid())  # dies with the template, which dies with the runner
            code = wait_for_job(folder / "ready", Path(prebuild) if prebuild else None)
        except BaseException:  # noqa: BLE001 - whatever happens, the child must not return
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(read)
    try:
        os.setpgid(pid, pid)  # also here, so the group exists before the runner can kill it
    except OSError:
        pass  # the child did it first
    return pid, write


def _reap(children: dict[int, Path], stdins: dict[str, int]) -> None:
    """Write the exit status of each child that has exited; close the stdin kept for one that
    died waiting for its job."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        folder = children.pop(pid, None)
        if folder is not None:
            _put(folder / "exit", str(os.waitstatus_to_exitcode(status)))
            stdin = stdins.pop(str(folder), -1)
            if stdin >= 0:
                os.close(stdin)


def _put(path: Path, text: str) -> None:
    """Write a small file whole (a reader polls for it): written aside, then renamed. A folder
    the runner has removed already needs it no more."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        pass
