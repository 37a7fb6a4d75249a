"""Several workers on one study: who measures which config, and what happens when one dies.

A worker claims a config by naming itself (host, pid) and the config's key on its RUNNING
trial, then checks that no other trial holds the key (in any batch size's study,
:mod:`tuner.study.fronts`); of two that claim at once, at least one sees the other and steps
back. While a trial runs, its worker records a heartbeat in the
storage; a trial whose heartbeats stop (a killed worker, a lost host) is failed by any other
worker and its config queued again. A trial left RUNNING by a dead process on this host is
found at once by its pid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import socket
import threading
import warnings
from collections.abc import Callable
from typing import cast

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.domain.config import TrialConfig
from tuner.domain.records import Status
from tuner.domain.space import SearchSpace
from tuner.launch.prestart import alive
from tuner.study.broken import HELD, Breakage, breakage_of, retried
from tuner.study.fronts import Fronts, StoredTrial
from tuner.study.params import params_of
from tuner.study.record import is_measured, stored_result, was_run
from tuner.study.start_plan import StartFrom
from tuner.study.storage import (
    CONFIG_ATTR,
    DUPLICATE_ATTR,
    INTERRUPTED_ATTR,
    KEY_ATTR,
    OWNER_ATTR,
    RETRY_ATTR,
    STARTED_FROM_ATTR,
)

HELD_STATUSES = {status.value for status in HELD}  # as records store them

# A process whose trial ended this recently still measures the study (StudyState.workers): it
# is between trials, which takes a second or so, up to a fresh process's import.
WORKER_RECENT_S = 30.0


@dataclasses.dataclass
class StudyState:
    """What the storage says of the study's configs, seen from one worker."""

    measured: set[str]
    pending: set[str]  # running elsewhere, or enqueued
    waiting: int  # enqueued, not started
    running: set[str] = dataclasses.field(default_factory=set)  # RUNNING elsewhere
    beating: int = 0  # of those, trials whose process records heartbeats
    # Optuna study name -> the number of its oldest enqueued trial (tuner.study.fronts)
    queued: dict[str, int] = dataclasses.field(default_factory=dict)
    # key -> the tuner's numbers of the trials that hold it pending (running or enqueued)
    holders: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    # keys with a stored record of any kind (measured, a workload_error, a not-run row)
    recorded: set[str] = dataclasses.field(default_factory=set)
    # batch size -> the stored eager failure that skips it (tuner.study.broken), the oldest
    broken: dict[int, Breakage] = dataclasses.field(default_factory=dict)
    # the tuner's trial number -> the config of each trial that compiled past --compile-timeout
    # (run, not a not-run row): the other configs of its mode there are skipped (Search)
    compile_timeouts: dict[int, TrialConfig] = dataclasses.field(default_factory=dict)
    # keys of ``measured`` whose row is a not-run one (a skipped config): done, never run
    not_run: set[str] = dataclasses.field(default_factory=set)
    # The other processes measuring the study now, (host, pid namespace, pid): the owners of
    # trials running, and of trials that ended within WORKER_RECENT_S (one between two trials)
    workers: set[tuple[object, ...]] = dataclasses.field(default_factory=set)

    @property
    def ran(self) -> set[str]:
        """The measured configs that ran: what ``--trials`` and the progress count (a config
        skipped as not run is done, but no trial)."""
        return self.measured - self.not_run

    def taken(self, key: str) -> bool:
        return key in self.measured or key in self.pending

    def taken_by_another(self, key: str, number: int) -> bool:
        """Whether a trial other than the tuner's trial ``number`` measured ``key`` or holds it:
        the check, on the state read before ``number`` was asked, of the config the sampler
        proposed for it (an enqueued trial that ``ask`` handed out holds its own key). Only a
        hint that spares a claim: :meth:`Claims.claim` reads afresh."""
        return key in self.measured or bool(self.holders.get(key, set()) - {number})


class Claims:
    """This worker's side of sharing one study with others (see the module's docstring)."""

    def __init__(self, fronts: Fronts, space: SearchSpace, on_message: Callable[[str], None],
                 finish: Callable[[StoredTrial], None] | None = None,
                 retry_held: bool = False) -> None:
        """``finish``: tells Optuna of a trial whose search process stored its result and died
        before telling it (:meth:`tuner.study.search.Search._finish`); without it such a trial
        is failed, as one without a result. ``retry_held``: eager's held failures
        (:data:`tuner.study.broken.HELD`) count as not measured, so they are measured again
        (``tuner search --retry-failed``)."""
        self.fronts, self.storage, self.space = fronts, fronts.storage, space
        self.on_message = on_message
        self._finish = finish
        self._retry_held = retry_held
        self._heartbeat: Heartbeat | None = None
        # The GPUs this worker's trials see (CUDA_VISIBLE_DEVICES, as its runner pins them), kept
        # with each claim: a search beside another on the same GPUs is told (Search).
        self.gpus: str | None = os.environ.get("CUDA_VISIBLE_DEVICES")

    @property
    def heartbeat_s(self) -> int | None:
        get = getattr(self.storage, "get_heartbeat_interval", None)
        return get() if get is not None else None

    def trial_id(self, number: int) -> int:
        """The storage's id of the tuner's trial ``number``."""
        return self.fronts.id_of(number)

    def state(self, exclude: int | None = None) -> StudyState:
        """The study's configs as the storage has them, the tuner's trial ``exclude`` left out."""
        measured, pending, waiting, running, beating = set(), set(), 0, set(), 0
        queued: dict[str, int] = {}
        holders: dict[str, set[int]] = {}
        recorded: set[str] = set()
        broken: dict[int, Breakage] = {}
        compile_timeouts: dict[int, TrialConfig] = {}
        not_run: set[str] = set()
        workers: set[tuple[object, ...]] = set()
        me = _owner_id({"host": socket.gethostname(), "pid_namespace": pid_namespace(),
                        "pid": os.getpid()})
        recent = datetime.datetime.now() - datetime.timedelta(seconds=WORKER_RECENT_S)
        for stored in sorted(self.fronts.trials(), key=lambda s: s.number):
            t = stored.frozen
            if stored.number == exclude:
                continue
            owner = t.user_attrs.get(OWNER_ATTR)
            if isinstance(owner, dict) and (t.state == TrialState.RUNNING or (
                    t.datetime_complete is not None and t.datetime_complete >= recent and (
                        not sees_processes_of(owner) or alive(int(owner.get("pid", -1)))))):
                workers.add(_owner_id(owner))  # not a search just killed, where that is seen
            key = t.user_attrs.get(KEY_ATTR)
            record = stored_result(t)
            if record is not None:
                recorded.add(cast(str, key))  # every measured trial carries its key
                if not was_run(record):
                    not_run.add(cast(str, key))
                # A model that raised says nothing about the config, and eager past --timeout
                # may finish under a larger one: a rerun measures them (tuner.study.broken).
                # The status of the record, not the attribute set after it: a search killed
                # between the two left only the record.
                config = TrialConfig.from_dict(t.user_attrs[CONFIG_ATTR])
                held = record.get("status") in HELD_STATUSES
                if held:
                    self._note_breakage(stored, record, broken)
                if record.get("status") == Status.COMPILE_TIMEOUT.value and was_run(record):
                    compile_timeouts[stored.number] = config
                if not retried(config, record.get("status")) and not (
                        held and self._retry_held and not config.compiled):
                    measured.add(cast(str, key))
            elif key and (t.state == TrialState.WAITING or (
                    t.state == TrialState.RUNNING and OWNER_ATTR in t.user_attrs)):
                # An enqueued trial carries its key before anyone owns it; one left RUNNING with
                # no owner (killed between ask and claiming it) would otherwise block its config.
                pending.add(key)
                holders.setdefault(key, set()).add(stored.number)
                waiting += t.state == TrialState.WAITING
                if t.state == TrialState.WAITING:
                    name = stored.study.study_name
                    queued[name] = min(queued.get(name, stored.number), stored.number)
                if t.state == TrialState.RUNNING:
                    running.add(key)
                    beating += bool((t.user_attrs.get(OWNER_ATTR) or {}).get("heartbeat_s"))
        return StudyState(measured, pending, waiting, running, beating, queued, holders,
                          recorded, broken, compile_timeouts, not_run & measured,
                          workers - {me})

    @staticmethod
    def _note_breakage(stored: StoredTrial, record: dict[str, object],
                       broken: dict[int, Breakage]) -> None:
        """Add the failed trial ``stored`` to ``broken`` if its record skips its batch size and
        none before it does (the trials come in the order they were made)."""
        config = TrialConfig.from_dict(stored.frozen.user_attrs[CONFIG_ATTR])
        if config.batch_size not in broken:
            found = breakage_of(stored.number, config, record)
            if found is not None:
                broken[config.batch_size] = found

    def enqueue(self, config: TrialConfig, **attrs: object) -> None:
        """Queue ``config`` in its batch size's study: the next trial asked there measures it."""
        self.fronts.of(config.batch_size).enqueue_trial(
            params_of(config), user_attrs={KEY_ATTR: config.key, **attrs})

    def ask(self, study: optuna.Study) -> tuple[optuna.Trial, int]:
        """A new trial of ``study`` (one of the fronts) and the tuner's number for it, its
        heartbeat started."""
        with warnings.catch_warnings():
            # "heartbeat is meant for optimize()": this worker beats for its trial itself.
            warnings.simplefilter("ignore", UserWarning)
            trial = study.ask()
        self._heartbeat = Heartbeat(self.storage, self.fronts.trial_id(study, trial.number),
                                    self.heartbeat_s)
        return trial, self.fronts.number(study, trial.number)

    def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def claim(self, trial: optuna.Trial, number: int, config: TrialConfig) -> bool:
        """Claim ``config`` for ``trial`` (the tuner's trial ``number``); False if another trial
        measured or claimed it."""
        # Owner first: a RUNNING trial holds its config only once it names a process that can
        # be checked for life (see state and reap_dead).
        trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": os.getpid(),
                                         "pid_namespace": pid_namespace(),
                                         "heartbeat_s": self.heartbeat_s, "gpus": self.gpus})
        trial.set_user_attr(KEY_ATTR, config.key)
        trial.set_user_attr(CONFIG_ATTR, config.to_dict())
        plan = self.fronts.start_from
        if plan is not None and (came := StartFrom.from_dict(plan).source_of(config.key)):
            # A config --start-from gave says so whichever trial measures it, not only the one
            # it was queued in: a worker's sampler may propose it while another worker holds
            # that queued trial, asked but not claimed yet (no owner: no holder, see state),
            # and then this claim goes on and that one steps back.
            trial.set_user_attr(STARTED_FROM_ATTR, came)
        # Each claimant writes its claim before it reads, so of two that claim at once at least
        # one sees the other: both may step back, never both go on.
        state = self.state(exclude=number)
        return not (config.key in state.measured or config.key in state.running)

    @staticmethod
    def step_back(trial: optuna.Trial, config: TrialConfig) -> None:
        """Prune ``trial``, whose ``config`` another trial measured or holds."""
        trial.set_user_attr(DUPLICATE_ATTR, config.key)
        trial.study.tell(trial, state=TrialState.PRUNED)

    def reap_dead(self) -> None:
        """A trial left RUNNING by a search process on this host that no longer exists (killed,
        power cut) is marked failed, so its config is measured again; one that holds its result
        (the process died after storing it) is told it instead (:meth:`finish`). A search calls
        it as it starts and before each trial, so a worker killed beside it on this host is
        found then, not after the heartbeat grace period."""
        for stored in self.fronts.trials(states=(TrialState.RUNNING,)):
            t = stored.frozen
            owner = t.user_attrs.get(OWNER_ATTR) or {}
            if sees_processes_of(owner) and not alive(int(owner.get("pid", -1))):
                if self.finish(stored):
                    self.on_message(f"trial {stored.number} ({t.user_attrs.get(KEY_ATTR)}) was "
                                    "measured by a search that died before it finished the "
                                    "trial; its result is kept, not measured again")
                    continue
                try:
                    self.storage.set_trial_user_attr(
                        self.fronts.trial_id(stored.study, t.number), INTERRUPTED_ATTR, True)
                except optuna.exceptions.UpdateFinishedTrialError:
                    continue  # another worker on this host found it dead first and requeued it
                stored.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
                self.requeue(stored.study, t)
                self.on_message(f"trial {stored.number} ({t.user_attrs.get(KEY_ATTR)}) was "
                                f"left running by {_process(owner)}, which died; it will be "
                                "measured again")

    def finish(self, stored: StoredTrial) -> bool:
        """Tell Optuna of ``stored``, a RUNNING trial whose process died, if it holds its result
        (the process stored it and died before telling: :meth:`tuner.study.search.Search.record`);
        whether it was told (by this process or, meanwhile, another)."""
        if self._finish is None or not is_measured(stored.frozen):
            return False
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            self._finish(stored)  # another process that found it dead may have told it first
        return True

    def fail_stale(self) -> None:
        """Fail trials whose search process stopped beating (killed, host lost); the storage
        calls :meth:`on_stale` for each trial this process failed. A stale trial that holds its
        result is told it first (:meth:`finish`): failed, the sampler would lose its point."""
        # Which trials are stale is the heartbeat storage's to say (BaseHeartbeat declares it).
        stale = getattr(self.storage, "_get_stale_trial_ids", None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            for study in self.fronts.studies():
                if stale is not None and self._finish is not None and self.heartbeat_s:
                    for trial_id in stale(self.fronts.study_id(study)):
                        self._finish_stale(study, trial_id)
                optuna.storages.fail_stale_trials(study)

    def _finish_stale(self, study: optuna.Study, trial_id: int) -> None:
        trial = self.storage.get_trial(trial_id)
        stored = StoredTrial(study, trial, self.fronts.number(study, trial.number))
        if trial.state == TrialState.RUNNING and self.finish(stored):
            owner = trial.user_attrs.get(OWNER_ATTR) or {}
            self.on_message(f"trial {stored.number} ({trial.user_attrs.get(KEY_ATTR)}) of "
                            f"{owner.get('host', '?')} pid {owner.get('pid', '?')} sent no "
                            "heartbeat for the grace period after it stored its result; the "
                            "result is kept, not measured again")

    def on_stale(self, study: optuna.Study, trial: FrozenTrial) -> None:
        owner = trial.user_attrs.get(OWNER_ATTR) or {}
        number = self.fronts.number(study, trial.number)
        where = (f"trial {number} ({trial.user_attrs.get(KEY_ATTR)}) of {owner.get('host', '?')} "
                 f"pid {owner.get('pid', '?')} sent no heartbeat for the grace period")
        if is_measured(trial):  # another process failed it before this one could tell it
            self.on_message(f"{where} after it stored its result; the result is kept, not "
                            "measured again (Optuna has the trial failed)")
            return
        self.requeue(study, trial)
        self.on_message(f"{where}; it is failed and will be measured again")

    def requeue(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Queue again the config of ``study``'s ``trial``, which died without a result, unless
        it is measured or another trial holds it."""
        key = trial.user_attrs.get(KEY_ATTR)
        config = next((c for c in self.space.configs() if c.key == key), None)
        if config is None or is_measured(trial):
            return
        number = self.fronts.number(study, trial.number)
        if not self.state(exclude=number).taken(config.key):  # config.key == key
            # A config another study gave (--start-from) still says so when measured again.
            came = {k: v for k, v in trial.user_attrs.items() if k == STARTED_FROM_ATTR}
            self.enqueue(config, **{RETRY_ATTR: number}, **came)


def _process(owner: dict[str, object]) -> str:
    """The search process a trial's OWNER_ATTR names, for a message: its pid, and the GPUs its
    trials saw, which tell a fleet's workers apart."""
    gpus = owner.get("gpus")
    return f"search process {owner.get('pid')}" + (
        f" (CUDA_VISIBLE_DEVICES={gpus})" if gpus is not None else "")


def _owner_id(owner: dict[str, object]) -> tuple[object, ...]:
    """Which process a trial's OWNER_ATTR names."""
    return owner.get("host"), owner.get("pid_namespace"), owner.get("pid")


def pid_namespace() -> int | None:
    """This process's PID namespace (Linux: the inode of /proc/self/ns/pid), None where there
    is no such thing. Containers that share a host name (``--network host``) each have their
    own, in which another's pids mean other processes."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def sees_processes_of(owner: dict[str, object]) -> bool:
    """Whether a trial's owner (its ``tuner.owner`` attribute) is a process this one can check
    for life by its pid: the same host name and the same PID namespace (both None on a system
    without them). An owner recorded by tuner 0.1.0 before 2026-12-04 (ed46fab), without the
    namespace, is not: its stopped heartbeat finds it, after the grace period."""
    return (owner.get("host") == socket.gethostname() and "pid_namespace" in owner
            and owner["pid_namespace"] == pid_namespace())


class Heartbeat:
    """Records the heartbeat of one trial every interval, in a thread, until stopped: what
    ``Study.optimize`` does for its trials, for the search's ask/tell loop."""

    def __init__(self, storage: optuna.storages.BaseStorage, trial_id: int,
                 interval_s: int | None) -> None:
        self._storage, self._trial_id, self._interval = storage, trial_id, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._interval:
            self._beat()  # now: a trial with no beat at all is never found stale
            self._thread = threading.Thread(target=self._loop, name="tuner-heartbeat",
                                            daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._beat()

    def _beat(self) -> None:
        try:
            # the RDB storage (and its cache) records heartbeats; BaseStorage does not declare it
            self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the storage hiccupped; the grace period absorbs a miss
            pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
