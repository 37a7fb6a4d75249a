"""Opening a study's Optuna storage: the embedded SQLite file (several processes on one host)
or any storage URL (PostgreSQL, for many hosts); the study's own attributes; refusing to resume
with another workload or space.

Optuna's storage is the source of truth while searching: each trial's record lives in its user
attributes (the names below), so a study resumes from any host that can reach the storage.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import optuna
from optuna.trial import FrozenTrial

from tuner.data.select import PARETO_OBJECTIVES, Constraints
from tuner.errors import UserError
from tuner.spec.layout import StudyLayout
from tuner.spec.records import TrialProtocol
from tuner.spec.space import SearchSpace
from tuner.spec.workload import Workload
from tuner.study.fronts import Fronts
from tuner.study.redact import redact, scrub
from tuner.study.sampler import DEFAULT_SAMPLER, check_sampler, make_sampler
from tuner.study.spec import StudySpec

# User attributes of each trial: its config's key (set when claimed, or when queued), the
# config, the full record, its status, the process that owns it while it runs, and why it ended
# without a record.
KEY_ATTR = "tuner.key"
CONFIG_ATTR = "tuner.config"
RESULT_ATTR = "tuner.result"
STATUS_ATTR = "tuner.status"
OWNER_ATTR = "tuner.owner"
DUPLICATE_ATTR = "tuner.duplicate_of"
INTERRUPTED_ATTR = "tuner.interrupted"
RETRY_ATTR = "tuner.retry_of"  # on a queued trial: the dead trial whose config it measures again
# User attributes of the study: what defines it.
WORKLOAD_ATTR, SPACE_ATTR, PROTOCOL_ATTR = "tuner.workload", "tuner.space", "tuner.protocol"
# ... and how it samples: the sampler's kind (tuner.study.sampler), the limits its trials'
# constraints were set under (tuner.data.select.Constraints, as a dict).
SAMPLER_ATTR, LIMITS_ATTR = "tuner.sampler", "tuner.limits"

# While a search process runs a trial it records a heartbeat in the storage every
# HEARTBEAT_INTERVAL_S; a trial whose last beat is older than HEARTBEAT_GRACE_S is failed by any
# other search on the study and its config queued again (a killed worker, a lost host).
# TUNER_HEARTBEAT_INTERVAL_S / TUNER_HEARTBEAT_GRACE_S override them (whole seconds).
HEARTBEAT_INTERVAL_S = 20
HEARTBEAT_GRACE_S = 120


def open_study(spec: StudySpec, storage: optuna.storages.BaseStorage | None = None) -> Fronts:
    """Create or load the study and the study of each batch size (:mod:`tuner.study.fronts`);
    refuse to resume one made with another workload, space, sampler or limits.

    ``storage``: one made by :func:`make_storage` for ``spec.storage_url`` (a worker makes its
    own, to hear of the trials it fails for want of heartbeats); default: a new one.
    """
    from sqlalchemy.exc import SQLAlchemyError

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # Search records heartbeats for its ask/tell trials itself (see _Heartbeat).
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ensure_folder(spec)
    try:
        storage = storage or make_storage(spec.storage_url)
        study = optuna.create_study(
            study_name=spec.name, storage=storage,
            directions=["minimize"] * len(PARETO_OBJECTIVES), load_if_exists=True)
        _check_or_set(study, WORKLOAD_ATTR, spec.workload.to_dict(), "workload")
        _check_or_set(study, SPACE_ATTR, spec.space.to_dict(), "search space",
                      hint=_space_hint)
        _check_or_set(study, PROTOCOL_ATTR, spec.protocol.to_dict(), "trial protocol",
                      compared=_protocol_keys)
        kind = _sampler_of(study, spec.sampler)
        limits = _limits_of(study, spec.limits)
        # A study made before samples its trials here; a newer one in each batch size's study.
        study.sampler = make_sampler(kind, spec.seed)
        if study.metric_names is None:
            study.set_metric_names(list(PARETO_OBJECTIVES))
        fronts = Fronts.open(study, storage, spec.space.batch_sizes,
                             lambda: make_sampler(kind, spec.seed))
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise _cannot_open(spec.storage_url, exc) from None
    fronts.sampler, fronts.limits = kind, limits
    return fronts


def _sampler_of(study: optuna.Study, asked: str | None) -> str:
    """The study's sampler: stored when the study was made (``asked``, else the default);
    a resume that asks for another is refused, since the study's trials were sampled by it."""
    stored = study.user_attrs.get(SAMPLER_ATTR)
    if stored is None:
        kind = check_sampler(asked or DEFAULT_SAMPLER)
        study.set_user_attr(SAMPLER_ATTR, kind)
        return kind
    if asked is not None and asked != stored:
        raise UserError(f"study {study.study_name!r} was made with --sampler {stored}, asked "
                        f"{check_sampler(asked)}: rerun with --sampler {stored} (or without "
                        "--sampler) or pick a new --name")
    return str(stored)


def _limits_of(study: optuna.Study, asked: Constraints | None) -> Constraints:
    """The study's limits: stored when the study was made (``asked``, else none). Each trial's
    constraints were set under them, so a resume that asks for others is refused."""
    if asked is not None:
        _check_or_set(study, LIMITS_ATTR, asked.to_dict(), "set of limits")
        return asked
    stored = study.user_attrs.get(LIMITS_ATTR)
    if stored is None:
        study.set_user_attr(LIMITS_ATTR, Constraints().to_dict())
        return Constraints()
    return Constraints(**stored)


def ensure_folder(spec: StudySpec) -> None:
    """Create the study folder; a one-line error where it cannot be written."""
    try:
        spec.directory.mkdir(parents=True, exist_ok=True)
        if spec.storage is None:
            # A name of its own: workers of one fleet start together, and a shared probe name
            # let one delete another's ("cannot write ...: No such file or directory").
            with tempfile.NamedTemporaryFile(dir=spec.directory, prefix=".write-test-"):
                pass
    except OSError as exc:
        raise UserError(f"cannot write to {spec.directory}: {exc.strerror}; "
                        "pass --studies-dir to a writable folder") from exc


def join_spec(name: str, storage: str | None, root: Path = Path("studies"),
              **run: Any) -> StudySpec:
    """The spec of an existing study, read from its storage, for a worker that joins it from
    this host or another; ``run`` holds this run's own fields (n_trials, budget_s, seed)."""
    from sqlalchemy.exc import SQLAlchemyError

    layout = StudyLayout.of(root, name)
    url = storage or layout.sqlite_url
    if storage is None and not layout.db.exists():
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
    protocol = TrialProtocol.from_dict(attrs[PROTOCOL_ATTR]) if PROTOCOL_ATTR in attrs else TrialProtocol()
    return StudySpec(name=name, workload=Workload.from_dict(attrs[WORKLOAD_ATTR]),
                     space=SearchSpace.from_dict(attrs[SPACE_ATTR]), protocol=protocol,
                     root=root, storage=storage, **run)


def make_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None
                 ) -> optuna.storages.BaseStorage:
    """An RDB storage with heartbeats; SQLite set up for several processes on one host. A URL
    SQLAlchemy cannot use (an unknown scheme, a server that does not answer) is a one-line
    error naming it, its password masked."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return _make_storage(url, on_stale)
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise _cannot_open(url, exc) from None


class _Heartbeat(TypedDict):
    """The heartbeat keywords of ``RDBStorage``."""

    heartbeat_interval: int
    grace_period: int
    heartbeat_stale_trial_callback: Callable[[optuna.Study, FrozenTrial], None] | None


def _make_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None
                  ) -> optuna.storages.BaseStorage:
    heartbeat: _Heartbeat = {
        "heartbeat_interval": _env_seconds("TUNER_HEARTBEAT_INTERVAL_S", HEARTBEAT_INTERVAL_S),
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


# Set per trial, not per study (the first trial of each run measures the device's peak).
_PER_TRIAL_PROTOCOL_KEYS = {"measure_peak"}


def _protocol_keys(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    """The protocol fields both sides know: a study stored by an older tuner lacks the newer
    fields, and resumes as long as the fields it has agree."""
    return (set(stored) & set(wanted)) - _PER_TRIAL_PROTOCOL_KEYS


def resumed_protocol(study: optuna.Study, asked: TrialProtocol) -> TrialProtocol:
    """The protocol a run's trials follow: ``asked``, but a field the study's stored protocol
    lacks (a study made by an older tuner) takes its default, as :func:`join_spec` reads it:
    a study made before compile budgets has none."""
    stored = study.user_attrs.get(PROTOCOL_ATTR) or {}
    older: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(TrialProtocol)
                             if f.name not in stored and f.name not in _PER_TRIAL_PROTOCOL_KEYS}
    return dataclasses.replace(asked, **older) if stored else asked


def _every_key(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    return set(stored) | set(wanted)


def _space_hint(stored: dict[str, Any], differ: set[str]) -> str:
    """Why a study made before the default knobs (tuner.spec.space.default_options) differs
    from the same command now, and how to ask for its space."""
    if differ <= {"options", "channels_last"} and not stored.get("options") \
            and not stored.get("channels_last"):
        return ("; a CUDA search now also covers inductor options and channels_last where they "
                "are not given: --inductor-option none --channels-last false asks for the space "
                "of a study made before that")
    return ""


def _check_or_set(study: optuna.Study, attr: str, wanted: dict[str, Any], what: str,
                  compared: Callable[[dict[str, Any], dict[str, Any]], set[str]] = _every_key,
                  hint: Callable[[dict[str, Any], set[str]], str] | None = None) -> None:
    """Store what defines the study on first use; after that, refuse a run that asks for
    another one, since its trials would not be comparable with the stored ones. ``hint``:
    more to say, given the stored value and the keys that differ."""
    stored = study.user_attrs.get(attr)
    if stored is None:
        study.set_user_attr(attr, wanted)
        return
    differ = {k for k in compared(stored, wanted) if stored.get(k) != wanted.get(k)}
    if differ:
        diff = [f"{k}: study has {stored.get(k)!r}, asked {wanted.get(k)!r}" for k in sorted(differ)]
        raise UserError(f"study {study.study_name!r} was made with another {what} "
                        f"({'; '.join(diff)}); rerun with the same options or pick a new "
                        f"--name{hint(stored, differ) if hint else ''}")
