"""Several `tuner worker` processes (fake runner) on one study, for the SQLite and PostgreSQL
tests: start them, kill one, and check that every config was measured exactly once."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.study.fronts import Fronts, StoredTrial
from tuner.study.record import is_measured
from tuner.study.spec import StudySpec
from tuner.study.storage import KEY_ATTR, OWNER_ATTR, open_study

# 2 batch sizes x (eager + inductor 2 modes x 2 dynamic + aot_eager 2 dynamic) = 14 configs.
SPACE = SearchSpace(backends=("eager", "inductor", "aot_eager"),
                    modes=("default", "max-autotune-no-cudagraphs"), dynamic=(False, True),
                    batch_sizes=(1, 2))
# 2 batch sizes x (eager + inductor default) = 4 configs.
SPACE_SMALL = SearchSpace(backends=("eager", "inductor"), modes=("default",), dynamic=(False,),
                          batch_sizes=(1, 2))
WORKLOAD = Workload(model="resnet18", device="cuda")  # never run: the fake runner makes it up
# A killed worker's trial goes stale 2-3 s after its last beat, not minutes.
FAST_HEARTBEAT = {"TUNER_HEARTBEAT_INTERVAL_S": "1", "TUNER_HEARTBEAT_GRACE_S": "2"}


def create(root: Path, name: str, storage: str | None, space: SearchSpace = SPACE) -> StudySpec:
    """Create the study as `tuner search` would, so that workers can join it."""
    spec = StudySpec(name=name, workload=WORKLOAD, space=space, root=root, storage=storage)
    open_study(spec)
    return spec


def start(spec: StudySpec, *extra: str, delay_s: float = 0.02, seed: int = 0,
          env: dict[str, str] | None = None, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`tuner worker` on the study; the storage URL goes in the environment, as Fleet does."""
    seeded = [] if "--export-only" in extra else ["--seed", str(seed)]  # it samples nothing
    command = [sys.executable, "-m", "tuner.fake", "--fake-delay", str(delay_s), "worker",
               "--study", spec.name, "--studies-dir", str(spec.root), *seeded, *extra]
    environ = {k: v for k, v in os.environ.items() if k != "TUNER_STORAGE"}
    if spec.storage:
        environ["TUNER_STORAGE"] = spec.storage
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            env={**environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def finish(proc: subprocess.Popen, timeout_s: float = 60) -> tuple[str, str]:
    out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err
    return out, err


def load(spec: StudySpec) -> Fronts:
    """The study's Optuna studies (one per batch size), its trials numbered as the tuner does."""
    return open_study(spec)


def assert_every_config_measured_once(spec: StudySpec) -> list[optuna.trial.FrozenTrial]:
    """No config lost, none measured twice, nothing left running or queued; the measured
    trials come back."""
    trials = load(spec).trials()
    measured = [t.frozen for t in trials if is_measured(t.frozen)]
    counts = collections.Counter(t.user_attrs[KEY_ATTR] for t in measured)
    assert sorted(counts) == sorted(c.key for c in spec.space.configs())
    assert {k: n for k, n in counts.items() if n > 1} == {}
    assert [t.number for t in trials
            if t.frozen.state in (TrialState.RUNNING, TrialState.WAITING)] == []
    return measured


def wait_for_trial(spec: StudySpec, pid: int, running: bool = True,
                   timeout_s: float = 30) -> StoredTrial:
    """The first trial that process ``pid`` has claimed (and is still measuring)."""
    fronts = load(spec)
    deadline = time.monotonic() + timeout_s
    states = (TrialState.RUNNING,) if running else None
    while time.monotonic() < deadline:
        for t in fronts.trials(states=states):
            attrs = t.frozen.user_attrs
            if (attrs.get(OWNER_ATTR) or {}).get("pid") == pid and KEY_ATTR in attrs:
                return t
        time.sleep(0.05)
    raise AssertionError(f"process {pid} claimed no trial within {timeout_s} s")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def wait_for_text(path: Path, text: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path} within {timeout_s} s")


def kill_one_worker_and_check_recovery(spec: StudySpec, elsewhere: bool = True) -> None:
    """Two workers on ``spec``; the one stuck in a long trial is SIGKILLed, and its config must
    be measured again by the survivor. ``elsewhere``: its trial names another host as its
    owner, as a worker's on another machine would, so only its stopped heartbeat can tell it
    is dead: the trial goes stale and is failed. Otherwise the survivor, on the same host,
    finds the dead process by its pid at its next round, long before the grace period."""
    from tuner.study.storage import INTERRUPTED_ATTR, RETRY_ATTR

    heartbeat = FAST_HEARTBEAT if elsewhere else None  # the default grace period: 2 minutes
    log = spec.root / "doomed.stderr"
    with log.open("w") as stderr:
        doomed = start(spec, delay_s=60, env=heartbeat, stderr=stderr)
    survivor = start(spec, seed=1, env=heartbeat)
    # A worker announces a trial only once its claim on the config survived the check against
    # other workers' claims (a claim that loses is pruned): from then on it sleeps for 60 s.
    wait_for_text(log, "running ")
    stuck = wait_for_trial(spec, doomed.pid)
    fronts = load(spec)
    if elsewhere:
        owner = {**stuck.frozen.user_attrs[OWNER_ATTR], "host": "another-host"}
        fronts.storage.set_trial_user_attr(fronts.trial_id(stuck.study, stuck.frozen.number),
                                           OWNER_ATTR, owner)
    # Once the survivor claims a trial it is past its start-up check for dead processes.
    wait_for_trial(spec, survivor.pid, running=False)
    kill(doomed)
    _, err = finish(survivor, timeout_s=60 if elsewhere else 30)

    measured = assert_every_config_measured_once(spec)
    dead = load(spec).find(stuck.number).frozen
    assert dead.state is TrialState.FAIL, (dead.state, log.read_text())
    redo = [t for t in measured if t.user_attrs[KEY_ATTR] == stuck.frozen.user_attrs[KEY_ATTR]]
    assert redo[0].user_attrs[RETRY_ATTR] == stuck.number
    assert redo[0].user_attrs[OWNER_ATTR]["pid"] == survivor.pid
    key = stuck.frozen.user_attrs[KEY_ATTR]
    if elsewhere:
        assert INTERRUPTED_ATTR not in dead.user_attrs
        assert f"trial {stuck.number} " in err and "sent no heartbeat" in err
    else:
        assert dead.user_attrs[INTERRUPTED_ATTR] is True
        assert (f"trial {stuck.number} ({key}) was left running by search process {doomed.pid}, "
                "which died; it will be measured again") in err
