"""The search: an Optuna study that asks for configs, runs them as trials, and tells results.

Optuna's storage is the source of truth while searching (each trial's full record lives in its
user attributes), so a study resumes from any host that can reach the storage; the Parquet
files are re-exported from it after every trial.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.trial import TrialState

from tuner import results
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


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """Everything that defines a study and how this run of it goes."""

    name: str
    workload: Workload
    space: SearchSpace
    protocol: Protocol = Protocol()
    root: Path = Path("studies")
    storage: str | None = None  # any Optuna storage URL; default: SQLite in the study folder
    n_trials: int | None = None  # total measured trials the study should reach
    budget_s: float | None = None  # wall-clock budget of this run
    seed: int = 0

    @property
    def directory(self) -> Path:
        return Path(self.root) / self.name

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{(self.directory / 'study.db').resolve()}"


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
        self.study = open_study(spec)

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> SearchSummary:
        spec, study = self.spec, self.study
        self._reap_dead_trials()
        self._enqueue_baselines()
        started = time.monotonic()
        deadline = started + spec.budget_s if spec.budget_s else None
        new, duplicates_in_a_row, stop_reason = 0, 0, ""
        durations: list[float] = []
        rng = random.Random(spec.seed)
        while True:
            state = self._state()
            if spec.n_trials is not None and len(state.measured) >= spec.n_trials:
                stop_reason = f"reached {spec.n_trials} trials"
                break
            remaining = [c for c in spec.space.configs()
                         if c.key not in state.measured and c.key not in state.pending]
            if not remaining and not state.waiting:
                stop_reason = "every config in the search space is measured"
                break
            if deadline is not None and time.monotonic() >= deadline:
                stop_reason = "the time budget is spent"
                break
            if self.stop_after_trial.is_set() or self.abort.is_set():
                stop_reason = "stopped by the user"
                break

            trial = study.ask()
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
            trial.set_user_attr(KEY_ATTR, config.key)
            trial.set_user_attr(CONFIG_ATTR, config.to_dict())
            trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": os.getpid()})

            self.on_start(trial.number, config)
            t0 = time.monotonic()
            request = TrialRequest(config, spec.workload, spec.protocol)
            result = self.runner.run(request, spec.directory / "trials" / str(trial.number),
                                     self.abort)
            durations.append(time.monotonic() - t0)
            if result.status is Status.INTERRUPTED:
                trial.set_user_attr(INTERRUPTED_ATTR, True)
                study.tell(trial, state=TrialState.FAIL)
                stop_reason = "stopped by the user (the trial in flight was abandoned)"
                break
            record(study, trial, result)
            new += 1
            df = self.export()
            measured = len(state.measured) + 1
            self.on_trial(TrialEvent(
                number=measured, target=spec.n_trials, config=config, result=result,
                best=_best_by_batch(df), eta_s=_eta(durations, measured, spec.n_trials,
                                                    len(remaining) - 1, deadline)))
            if result.status is Status.WORKLOAD_ERROR:
                raise UserError(f"the model cannot run: {result.message}")

        df = self.export()
        return SearchSummary(spec.directory, int(df["status"].ne(Status.INTERRUPTED.value).sum()),
                             new, stop_reason, df, results.pareto(df))

    # -- storage helpers --------------------------------------------------------------------
    def export(self) -> pd.DataFrame:
        df = study_frame(self.study, self.spec.name, self.spec.workload)
        results.export(self.spec.directory, df, {
            "study": self.spec.name, "workload": self.spec.workload.to_dict(),
            "space": self.spec.space.to_dict(), "protocol": self.spec.protocol.to_dict(),
            "storage": redact(self.spec.storage_url)})
        return df

    @dataclasses.dataclass
    class _State:
        measured: set[str]
        pending: set[str]  # running elsewhere, or enqueued
        waiting: int

    def _state(self, exclude: int | None = None) -> Search._State:
        measured, pending, waiting = set(), set(), 0
        for t in self.study.get_trials(deepcopy=False):
            if t.number == exclude:
                continue
            key = t.user_attrs.get(KEY_ATTR)
            if RESULT_ATTR in t.user_attrs:
                measured.add(key)
            elif t.state in (TrialState.RUNNING, TrialState.WAITING) and key:
                pending.add(key)
                waiting += t.state == TrialState.WAITING
        return Search._State(measured, pending, waiting)

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
                self.on_message(f"trial {t.number} ({t.user_attrs.get(KEY_ATTR)}) was left "
                                "running by a search that died; it will be measured again")


def open_study(spec: StudySpec) -> optuna.Study:
    """Create or load the study; refuse to resume one made with another workload or space."""
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
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
            study_name=spec.name, storage=make_storage(spec.storage_url), sampler=sampler,
            directions=["minimize"] * len(results.OBJECTIVES), load_if_exists=True)
    except (ValueError, ImportError, OSError) as exc:
        raise UserError(f"cannot open storage {redact(spec.storage_url)}: {exc}") from exc
    _check_or_set(study, "tuner.workload", spec.workload.to_dict(), "workload")
    _check_or_set(study, "tuner.space", spec.space.to_dict(), "search space")
    study.set_metric_names(list(results.OBJECTIVES))
    return study


def make_storage(url: str) -> optuna.storages.BaseStorage:
    if url.startswith("sqlite"):
        # Several processes on one host share the file; wait for locks instead of failing.
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    return optuna.storages.RDBStorage(url)


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
    trial.set_user_attr("tuner.status", result.status.value)
    values = results.objective_values(result)
    if result.ok and values is not None:
        study.tell(trial, values)
    else:
        study.tell(trial, state=TrialState.FAIL)


def study_frame(study: optuna.Study, name: str, workload: Workload) -> pd.DataFrame:
    rows = []
    for t in study.get_trials(deepcopy=False):
        if RESULT_ATTR not in t.user_attrs:
            continue
        config = TrialConfig.from_dict(t.user_attrs[CONFIG_ATTR])
        result = TrialResult.from_dict(t.user_attrs[RESULT_ATTR])
        rows.append(results.trial_row(name, t.number, config, workload, result))
    return results.frame(rows)


def redact(url: str) -> str:
    """Hide the password of a storage URL: ``postgresql://u:***@host/db``."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a SQLAlchemy URL; show nothing secret
        return url.split("@")[-1] if "@" in url else url


def _best_by_batch(df: pd.DataFrame) -> dict[int, tuple[str, float]]:
    ok = df[(df["status"] == Status.OK.value) & (df["correct"] != False)]  # noqa: E712
    best = {}
    for bs, group in ok.groupby("batch_size"):
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
