"""The search: an Optuna study that asks for configs, runs them as trials, and tells results.

Optuna's storage is the source of truth while searching (each trial's full record lives in its
user attributes), so a study resumes from any host that can reach the storage; the Parquet
files are re-exported from it after every trial.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import re
import socket
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from tuner import finalists, results
from tuner.errors import UserError
from tuner.records import Protocol, Status, TrialRequest, TrialResult
from tuner.runner import Runner
from tuner.space import EAGER, INDUCTOR, SearchSpace, TrialConfig
from tuner.workload import Workload

KEY_ATTR = "tuner.key"
CONFIG_ATTR = "tuner.config"
RESULT_ATTR = "tuner.result"
OWNER_ATTR = "tuner.owner"
DUPLICATE_ATTR = "tuner.duplicate_of"
INTERRUPTED_ATTR = "tuner.interrupted"
RETRY_ATTR = "tuner.retry_of"  # on a queued trial: the dead trial whose config it measures again
WORKLOAD_ATTR, SPACE_ATTR, PROTOCOL_ATTR = "tuner.workload", "tuner.space", "tuner.protocol"

# While a search process runs a trial it records a heartbeat in the storage every
# HEARTBEAT_INTERVAL_S; a trial whose last beat is older than HEARTBEAT_GRACE_S is failed by any
# other search on the study and its config queued again (a killed worker, a lost host).
# TUNER_HEARTBEAT_INTERVAL_S / TUNER_HEARTBEAT_GRACE_S override them (whole seconds).
HEARTBEAT_INTERVAL_S = 20
HEARTBEAT_GRACE_S = 120
WAIT_POLL_S = 1.0  # how often a search with nothing to start looks at trials running elsewhere
STATUS_ATTR = "tuner.status"


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """Everything that defines a study and how this run of it goes."""

    name: str
    workload: Workload
    space: SearchSpace
    protocol: Protocol = Protocol()
    root: Path = Path("studies")
    # Any Optuna storage URL; default: SQLite in the study folder. Not in repr: it may hold a password.
    storage: str | None = dataclasses.field(default=None, repr=False)
    n_trials: int | None = None  # total measured trials the study should reach
    # Re-measurements of each finalist after the search (tuner.finalists); 0: none.
    confirm_repeats: int = 0
    budget_s: float | None = None  # wall-clock budget of this run
    seed: int = 0

    @property
    def directory(self) -> Path:
        return Path(self.root) / self.name

    @property
    def storage_url(self) -> str:
        return self.storage or sqlite_url(self.directory)


def sqlite_url(directory: Path) -> str:
    """The embedded default storage of the study in ``directory``."""
    return f"sqlite:///{(Path(directory) / 'study.db').resolve()}"


@dataclasses.dataclass(frozen=True)
class TrialEvent:
    """Progress after each trial, for whoever shows it (the CLI prints it to stderr)."""

    number: int  # measured trials in the study so far
    target: int | None
    config: TrialConfig
    result: TrialResult
    best: dict[int, tuple[str, float]]  # batch size -> (label, p50 ms) of the fastest so far
    eta_s: float | None


@dataclasses.dataclass(frozen=True)
class SearchSummary:
    directory: Path
    measured: int
    new: int
    stop_reason: str
    trials: pd.DataFrame
    pareto: pd.DataFrame


class Search:
    """Runs a study to its target. ``stop_after_trial`` and ``abort`` let a caller stop it:
    the first after the trial in flight, the second by killing that trial."""

    def __init__(self, spec: StudySpec, runner: Runner,
                 on_trial: Callable[[TrialEvent], None] | None = None,
                 on_message: Callable[[str], None] | None = None,
                 on_start: Callable[[int, TrialConfig], None] | None = None) -> None:
        self.spec = spec
        self.runner = runner
        self.on_trial = on_trial or (lambda event: None)
        self.on_message = on_message or (lambda text: None)
        self.on_start = on_start or (lambda number, config: None)
        self.stop_after_trial = threading.Event()
        self.abort = threading.Event()
        self._heartbeat: _Heartbeat | None = None
        self.study = open_study(spec, on_stale=self._on_stale)

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> SearchSummary:
        try:
            return self._run()
        finally:
            self._stop_heartbeat()
            self.runner.close()  # a pre-started trial process is not left waiting

    def prepare(self) -> None:
        """What :meth:`run` does first: fail the trials of dead search processes on this host
        (their configs are queued again) and queue the baselines. A process that starts several
        workers calls it once before them, so they do not all queue the baselines at once."""
        self._reap_dead_trials()
        self._enqueue_baselines()

    def _run(self) -> SearchSummary:
        spec, study = self.spec, self.study
        self.prepare()
        started = time.monotonic()
        deadline = started + spec.budget_s if spec.budget_s else None
        new, duplicates_in_a_row, stop_reason = 0, 0, ""
        durations: list[float] = []
        rng = random.Random(spec.seed)
        said_waiting = False
        while True:
            self._stop_heartbeat()  # the trial of the last round is told
            self._fail_stale_trials()
            state = self._state()
            if spec.n_trials is not None and len(state.measured) >= spec.n_trials:
                stop_reason = f"reached {spec.n_trials} trials"
                break
            remaining = [c for c in spec.space.configs()
                         if c.key not in state.measured and c.key not in state.pending]
            # Other workers measure the last configs: wait for them rather than stop, since the
            # trial of one that dies goes stale and its config comes back to the queue.
            nothing_to_start = (not remaining and not state.waiting) or (
                spec.n_trials is not None and len(state.measured) + state.beating >= spec.n_trials)
            if nothing_to_start and not state.beating:
                stop_reason = "every config in the search space is measured"
                break
            if deadline is not None and time.monotonic() >= deadline:
                stop_reason = "the time budget is spent"
                break
            if self.stop_after_trial.is_set() or self.abort.is_set():
                stop_reason = "stopped by the user"
                break
            if nothing_to_start:
                if not said_waiting:
                    self.on_message(f"waiting for {state.beating} trial(s) other workers are "
                                    "running (a dead worker's trial comes back here)")
                    said_waiting = True
                self.stop_after_trial.wait(WAIT_POLL_S)
                continue

            trial = self._ask()
            config = suggest(trial, spec.space)
            state = self._state(exclude=trial.number)
            if config.key in state.measured or config.key in state.pending:
                trial.set_user_attr(DUPLICATE_ATTR, config.key)
                study.tell(trial, state=TrialState.PRUNED)
                duplicates_in_a_row += 1
                if duplicates_in_a_row >= 3 and remaining:
                    # The sampler keeps proposing measured configs; hand it an unmeasured one.
                    pick = rng.choice(remaining)
                    study.enqueue_trial(params_of(pick), user_attrs={KEY_ATTR: pick.key})
                    duplicates_in_a_row = 0
                continue
            duplicates_in_a_row = 0
            # Owner first: a RUNNING trial holds its config only once it names a process that can
            # be checked for life (see _state and _reap_dead_trials).
            trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": os.getpid(),
                                             "heartbeat_s": _heartbeat_interval(study)})
            trial.set_user_attr(KEY_ATTR, config.key)
            trial.set_user_attr(CONFIG_ATTR, config.to_dict())
            if self._lost_claim(trial.number, config.key):
                # Another worker claimed this config at the same moment: at most one goes on.
                trial.set_user_attr(DUPLICATE_ATTR, config.key)
                study.tell(trial, state=TrialState.PRUNED)
                continue

            self.on_start(trial.number, config)
            t0 = time.monotonic()
            # The first trial of a run also times the device's peak matmul rate (fraction_of_peak).
            request = TrialRequest(config, spec.workload,
                                   dataclasses.replace(spec.protocol, measure_peak=new == 0))
            result = self.runner.run(request, spec.directory / "trials" / str(trial.number),
                                     self.abort, cache_dir=finalists.fresh_trial_cache(
                                         spec, config, trial.number))
            durations.append(time.monotonic() - t0)
            if result.status is Status.INTERRUPTED:
                with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                    trial.set_user_attr(INTERRUPTED_ATTR, True)
                    study.tell(trial, state=TrialState.FAIL)
                stop_reason = "stopped by the user (the trial in flight was abandoned)"
                break
            try:
                record(study, trial, result)
            except optuna.exceptions.UpdateFinishedTrialError:
                self.on_message(f"trial {trial.number} ({config.key}) was failed by another worker "
                                "while it ran here (no heartbeat within the grace period); its "
                                "result is dropped and the config is measured again")
                continue
            new += 1
            df = self.export()
            finalists.prune_caches(study, spec, df)
            measured = len(state.measured) + 1
            self.on_trial(TrialEvent(
                number=measured, target=spec.n_trials, config=config, result=result,
                best=_best_by_batch(df), eta_s=_eta(durations, measured, spec.n_trials,
                                                    len(remaining) - 1, deadline)))
            if result.status is Status.WORKLOAD_ERROR:
                raise UserError(f"the model cannot run: {result.message}")

        if spec.confirm_repeats and not (self.stop_after_trial.is_set() or self.abort.is_set()):
            if self.confirm(spec.confirm_repeats).stopped:
                stop_reason += "; confirming the finalists was stopped (the same command resumes it)"
        df = self.export()
        finalists.prune_caches(study, spec, df)
        return SearchSummary(spec.directory, int(df["status"].ne(Status.INTERRUPTED.value).sum()),
                             new, stop_reason, df, results.pareto(df))

    def confirm(self, repeats: int, redo: bool = False) -> finalists.ConfirmSummary:
        """Re-measure the finalists (see :mod:`tuner.finalists`); ``stop_after_trial`` stops
        it before the next process, ``abort`` kills the one in flight."""
        try:
            summary = finalists.confirm(self.study, self.spec, self.runner, self.export(),
                                        repeats, redo=redo, on_message=self.on_message,
                                        stop=self.stop_after_trial, abort=self.abort)
        finally:
            self.runner.close()
        finalists.prune_caches(self.study, self.spec, self.export())
        return summary

    # -- storage helpers --------------------------------------------------------------------
    def export(self) -> pd.DataFrame:
        return export_study(self.study, self.spec)

    @dataclasses.dataclass
    class _State:
        measured: set[str]
        pending: set[str]  # running elsewhere, or enqueued
        waiting: int
        running: set[str] = dataclasses.field(default_factory=set)  # RUNNING elsewhere
        beating: int = 0  # of those, trials whose process records heartbeats

    def _state(self, exclude: int | None = None) -> Search._State:
        measured, pending, waiting, running, beating = set(), set(), 0, set(), 0
        for t in self.study.get_trials(deepcopy=False):
            if t.number == exclude:
                continue
            key = t.user_attrs.get(KEY_ATTR)
            if RESULT_ATTR in t.user_attrs:
                # A broken model says nothing about the config: once fixed, a rerun measures it.
                if t.user_attrs.get(STATUS_ATTR) != Status.WORKLOAD_ERROR.value:
                    measured.add(key)
            elif key and (t.state == TrialState.WAITING or (
                    t.state == TrialState.RUNNING and OWNER_ATTR in t.user_attrs)):
                # An enqueued trial carries its key before anyone owns it; one left RUNNING with
                # no owner (killed between ask and claiming it) would otherwise block its config.
                pending.add(key)
                waiting += t.state == TrialState.WAITING
                if t.state == TrialState.RUNNING:
                    running.add(key)
                    beating += bool((t.user_attrs.get(OWNER_ATTR) or {}).get("heartbeat_s"))
        return Search._State(measured, pending, waiting, running, beating)

    def _enqueue_baselines(self) -> None:
        state = self._state()
        for config in self.spec.space.baselines():
            if config.key not in state.measured and config.key not in state.pending:
                self.study.enqueue_trial(params_of(config), user_attrs={KEY_ATTR: config.key})

    def _reap_dead_trials(self) -> None:
        """A trial left RUNNING by a search process on this host that no longer exists (killed,
        power cut) is marked failed, so its config is measured again."""
        host = socket.gethostname()
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            owner = t.user_attrs.get(OWNER_ATTR) or {}
            if owner.get("host") == host and not _alive(int(owner.get("pid", -1))):
                self.study._storage.set_trial_user_attr(t._trial_id, INTERRUPTED_ATTR, True)
                self.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
                self._requeue(t)
                self.on_message(f"trial {t.number} ({t.user_attrs.get(KEY_ATTR)}) was left "
                                "running by a search that died; it will be measured again")

    # -- several workers on one study ---------------------------------------------------------
    def _ask(self) -> optuna.Trial:
        with warnings.catch_warnings():
            # "heartbeat is meant for optimize()": Search beats for its trial itself, below.
            warnings.simplefilter("ignore", UserWarning)
            trial = self.study.ask()
        self._heartbeat = _Heartbeat(self.study, trial._trial_id)
        return trial

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _lost_claim(self, number: int, key: str) -> bool:
        """After claiming ``key`` (owner + key on a RUNNING trial), is it measured or claimed by
        another trial? Each claimant writes its claim before it reads, so of two that claim at
        once at least one sees the other: both may step back, never both go on."""
        state = self._state(exclude=number)
        return key in state.measured or key in state.running

    def _fail_stale_trials(self) -> None:
        """Fail trials whose search process stopped beating (killed, host lost); the storage
        calls :meth:`_on_stale` for each trial this process failed."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)

    def _on_stale(self, study: optuna.Study, trial: FrozenTrial) -> None:
        owner = trial.user_attrs.get(OWNER_ATTR) or {}
        self._requeue(trial)
        self.on_message(f"trial {trial.number} ({trial.user_attrs.get(KEY_ATTR)}) of "
                        f"{owner.get('host', '?')} pid {owner.get('pid', '?')} sent no heartbeat "
                        "for the grace period; it is failed and will be measured again")

    def _requeue(self, trial: FrozenTrial) -> None:
        """Queue again the config of a trial that died without a result, unless it is measured
        or another trial holds it."""
        key = trial.user_attrs.get(KEY_ATTR)
        config = next((c for c in self.spec.space.configs() if c.key == key), None)
        if config is None or RESULT_ATTR in trial.user_attrs:
            return
        state = self._state(exclude=trial.number)
        if key not in state.measured and key not in state.pending:
            self.study.enqueue_trial(params_of(config),
                                     user_attrs={KEY_ATTR: key, RETRY_ATTR: trial.number})


class _Heartbeat:
    """Records the heartbeat of one trial every interval, in a thread, until stopped: what
    ``Study.optimize`` does for its trials, for Search's ask/tell loop."""

    def __init__(self, study: optuna.Study, trial_id: int) -> None:
        self._storage, self._trial_id = study._storage, trial_id
        self._interval = _heartbeat_interval(study)
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
            self._storage.record_heartbeat(self._trial_id)
        except Exception:  # noqa: BLE001 - the storage hiccupped; the grace period absorbs a miss
            pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _heartbeat_interval(study: optuna.Study) -> int | None:
    get = getattr(study._storage, "get_heartbeat_interval", None)
    return get() if get is not None else None


def open_study(spec: StudySpec,
               on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None) -> optuna.Study:
    """Create or load the study; refuse to resume one made with another workload or space.

    ``on_stale`` is called for each trial this process fails for want of heartbeats.
    """
    from sqlalchemy.exc import SQLAlchemyError

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # Search records heartbeats for its ask/tell trials itself (see _Heartbeat).
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if spec.storage is None:
        try:
            spec.directory.mkdir(parents=True, exist_ok=True)
            probe = spec.directory / ".write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise UserError(f"cannot write to {spec.directory}: {exc.strerror}; "
                            "pass --studies-dir to a writable folder") from exc
    else:
        spec.directory.mkdir(parents=True, exist_ok=True)
    sampler = optuna.samplers.TPESampler(multivariate=True, group=True, constant_liar=True,
                                         seed=spec.seed)
    try:
        study = optuna.create_study(
            study_name=spec.name, storage=make_storage(spec.storage_url, on_stale),
            sampler=sampler, directions=["minimize"] * len(results.OBJECTIVES),
            load_if_exists=True)
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise _cannot_open(spec.storage_url, exc) from None
    _check_or_set(study, WORKLOAD_ATTR, spec.workload.to_dict(), "workload")
    _check_or_set(study, SPACE_ATTR, spec.space.to_dict(), "search space")
    if PROTOCOL_ATTR not in study.user_attrs:  # for workers that join (tuner worker)
        study.set_user_attr(PROTOCOL_ATTR, spec.protocol.to_dict())
    study.set_metric_names(list(results.OBJECTIVES))
    return study


def join_spec(name: str, storage: str | None, root: Path = Path("studies"),
              **run: Any) -> StudySpec:
    """The spec of an existing study, read from its storage, for a worker that joins it from
    this host or another; ``run`` holds this run's own fields (n_trials, budget_s, seed)."""
    from sqlalchemy.exc import SQLAlchemyError

    url = storage or sqlite_url(Path(root) / name)
    if storage is None and not (Path(root) / name / "study.db").exists():
        raise UserError(f"no study {name!r} under {root}: start it with `tuner search`, or pass "
                        "--storage with the URL of the storage it lives in")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            study = optuna.load_study(study_name=name, storage=make_storage(url))
    except KeyError:
        raise UserError(f"no study {name!r} in {redact(url)}: check --study, or start it with "
                        "`tuner search --name ... --storage ...`") from None
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise _cannot_open(url, exc) from None
    attrs = study.user_attrs
    if WORKLOAD_ATTR not in attrs or SPACE_ATTR not in attrs:
        raise UserError(f"study {name!r} in {redact(url)} was not made by tuner "
                        "(no workload or search space stored with it)")
    protocol = Protocol.from_dict(attrs[PROTOCOL_ATTR]) if PROTOCOL_ATTR in attrs else Protocol()
    return StudySpec(name=name, workload=Workload.from_dict(attrs[WORKLOAD_ATTR]),
                     space=SearchSpace.from_dict(attrs[SPACE_ATTR]), protocol=protocol,
                     root=root, storage=storage, **run)


def export_study(study: optuna.Study, spec: StudySpec) -> pd.DataFrame:
    """Write the study's Parquet files under this host's ``spec.directory`` from the storage."""
    df = study_frame(study, spec.name, spec.workload, spec.directory)
    results.export(spec.directory, df, {
        "study": spec.name, "workload": spec.workload.to_dict(),
        "space": spec.space.to_dict(), "protocol": spec.protocol.to_dict(),
        "storage": redact(spec.storage_url)})
    return df


def make_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None
                 ) -> optuna.storages.BaseStorage:
    """An RDB storage with heartbeats; SQLite set up for several processes on one host."""
    heartbeat = {"heartbeat_interval": _env_seconds("TUNER_HEARTBEAT_INTERVAL_S",
                                                    HEARTBEAT_INTERVAL_S),
                 "grace_period": _env_seconds("TUNER_HEARTBEAT_GRACE_S", HEARTBEAT_GRACE_S),
                 "heartbeat_stale_trial_callback": on_stale}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if not url.startswith("sqlite"):
            return optuna.storages.RDBStorage(_with_driver(url),
                                              engine_kwargs={"pool_pre_ping": True}, **heartbeat)
        # Several processes on one host share the file: wait for locks instead of failing, and
        # let every transaction begin with the write lock (below).
        storage = optuna.storages.RDBStorage(
            url, engine_kwargs={"connect_args": {"timeout": 60, "isolation_level": None}},
            **heartbeat)
    _begin_immediate(storage.engine)
    return storage


def _cannot_open(url: str, exc: Exception) -> UserError:
    """One line, no secret: the driver's own message (not SQLAlchemy's wrapper) and the URL
    with its password masked."""
    reason = " ".join(line.strip() for line in str(getattr(exc, "orig", None) or exc).splitlines()
                      if line.strip())
    return UserError(f"cannot open storage {redact(url)}: {scrub(reason, url)}")


def _with_driver(url: str) -> str:
    """Name the installed PostgreSQL driver in a plain ``postgresql://`` URL: SQLAlchemy 2.1
    reads it as psycopg (3), 2.0 as psycopg2, and the ``postgres`` extra installs psycopg2."""
    import importlib.util

    if not url.startswith("postgresql://"):
        return url
    for driver in ("psycopg", "psycopg2"):
        if importlib.util.find_spec(driver) is not None:
            return f"postgresql+{driver}://{url[len('postgresql://'):]}"
    raise UserError("a postgresql:// storage needs a driver: pip install 'tuner[postgres]' "
                    "(or psycopg2-binary)")


def _begin_immediate(engine: Any) -> None:
    """pysqlite opens a transaction only at the first write, so optuna's read-check-write steps
    (popping a queued trial, failing a stale one) interleave between processes and two of them
    pop the same trial. ``BEGIN IMMEDIATE`` takes the file's write lock for the whole step."""
    from sqlalchemy import event

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _env_seconds(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None:
        return default
    if not text.strip().isdigit() or int(text) <= 0:
        raise UserError(f"{name}={text!r}: give a whole number of seconds above zero")
    return int(text)


def _check_or_set(study: optuna.Study, attr: str, wanted: dict[str, Any], what: str) -> None:
    stored = study.user_attrs.get(attr)
    if stored is None:
        study.set_user_attr(attr, wanted)
        return
    if stored != wanted:
        diff = [f"{k}: study has {stored.get(k)!r}, asked {wanted.get(k)!r}"
                for k in sorted(set(stored) | set(wanted)) if stored.get(k) != wanted.get(k)]
        raise UserError(f"study {study.study_name!r} was made with another {what} "
                        f"({'; '.join(diff)}); rerun with the same options or pick a new --name")


def suggest(trial: optuna.Trial, space: SearchSpace) -> TrialConfig:
    """Ask Optuna for one config; the conditional structure keeps impossible combos out."""
    batch_size = trial.suggest_categorical("batch_size", list(space.batch_sizes))
    backend = trial.suggest_categorical("backend", list(space.backends))
    mode = trial.suggest_categorical("mode", list(space.modes)) if backend == INDUCTOR else None
    dynamic = (trial.suggest_categorical("dynamic", list(space.dynamic))
               if backend != EAGER else None)
    return TrialConfig(backend=backend, batch_size=batch_size, mode=mode, dynamic=dynamic)


def params_of(config: TrialConfig) -> dict[str, Any]:
    params: dict[str, Any] = {"batch_size": config.batch_size, "backend": config.backend}
    if config.backend == INDUCTOR:
        params["mode"] = config.mode
    if config.compiled:
        params["dynamic"] = config.dynamic
    return params


def record(study: optuna.Study, trial: optuna.Trial, result: TrialResult) -> None:
    """Store the full record on the trial and tell Optuna the objectives (or the failure)."""
    trial.set_user_attr(RESULT_ATTR, result.to_dict())
    trial.set_user_attr(STATUS_ATTR, result.status.value)
    values = results.objective_values(result)
    if result.ok and values is not None:
        study.tell(trial, values)
    else:
        study.tell(trial, state=TrialState.FAIL)


def study_frame(study: optuna.Study, name: str, workload: Workload,
                directory: Path | None = None) -> pd.DataFrame:
    """Every measured trial as a Parquet row; ``directory`` (the study folder on this host) is
    where finalists' artifacts files are looked for."""
    repeats = finalists.repeats_of(study)
    rows = []
    for t in study.get_trials(deepcopy=False):
        if RESULT_ATTR not in t.user_attrs:
            continue
        config = TrialConfig.from_dict(t.user_attrs[CONFIG_ATTR])
        result = TrialResult.from_dict(t.user_attrs[RESULT_ATTR])
        row = results.trial_row(name, t.number, config, workload, result)
        row.update(finalists.columns(result, repeats.get(t.number, []), config.key, directory))
        rows.append(row)
    return finalists.with_ranks(results.frame(rows))


def redact(url: str) -> str:
    """Hide the password of a storage URL: ``postgresql://u:***@host/db`` (and ``password=``
    in its query)."""
    from sqlalchemy.engine import make_url

    try:
        text = make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: mask what looks secret
        text = _mask_userinfo(url)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def scrub(text: str, url: str) -> str:
    """``text`` (an error message, say) with the secrets of the storage ``url`` masked."""
    from urllib.parse import unquote

    text = text.replace(url, redact(url))
    for raw in re.findall(r"://[^:/@?#\s]*:([^@/?#\s]+)@", url) + [
            v for _, v in re.findall(r"(?i)([a-z_]*password)=([^&;\s]+)", url)]:
        for secret in {raw, unquote(raw)}:
            text = text.replace(secret, "***")
    text = _mask_userinfo(text)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def _mask_userinfo(text: str) -> str:
    """``scheme://user:secret@host`` (or ``user:secret@host``) → ``...user:***@host``."""
    if "://" in text:
        return re.sub(r"(://[^:/@\s]*:)[^@\s]+@", r"\1***@", text)
    return re.sub(r"^([^:/@\s]*:)[^@\s]+@", r"\1***@", text)


_QUERY_PASSWORD = re.compile(r"(?i)((?:^|[?&;\s])[a-z_]*password=)[^&;\s]*")


def _best_by_batch(df: pd.DataFrame) -> dict[int, tuple[str, float]]:
    best = {}
    for bs, group in results.candidates(df).groupby("batch_size"):
        row = group.loc[group["latency_ms_p50"].idxmin()]
        best[int(bs)] = (str(row["label"]), float(row["latency_ms_p50"]))
    return best


def _eta(durations: list[float], measured: int, target: int | None, left_in_space: int,
         deadline: float | None) -> float | None:
    if not durations:
        return None
    left = left_in_space if target is None else min(left_in_space, target - measured)
    eta = max(0, left) * sum(durations) / len(durations)
    if deadline is not None:
        eta = min(eta, max(0.0, deadline - time.monotonic()))
    return eta


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
