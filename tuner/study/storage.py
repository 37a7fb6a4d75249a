"""Opening a study's Optuna storage: the embedded SQLite file (several processes on one host)
or any storage URL (PostgreSQL, for many hosts); the study's own attributes; refusing to resume
with another workload or space.

Optuna's storage is the source of truth while searching: each trial's record lives in its user
attributes (the names below), so a study resumes from any host that can reach the storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import random
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict, cast

import optuna
from optuna.trial import FrozenTrial

from tuner.data.select import PARETO_OBJECTIVES, Constraints
from tuner.errors import UserError
from tuner.domain.layout import DB_FILE, STUDIES_DIR, TRIALS_FILE, StudyLayout
from tuner.domain.records import TrialProtocol
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
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
MESSAGE_ATTR = "tuner.message"  # why a trial failed, cut to what optuna-dashboard shows whole
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


def open_study(spec: StudySpec,
               on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None) -> Fronts:
    """Create or load the study and the study of each batch size (:mod:`tuner.study.fronts`);
    refuse to resume one made with another workload, space, sampler or limits.

    ``on_stale``: told of the trials the storage fails for want of heartbeats (a search
    process, :class:`tuner.study.search.Search`, hears of its own).
    """
    from sqlalchemy.exc import SQLAlchemyError

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # Search records heartbeats for its ask/tell trials itself (see _Heartbeat).
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    given = spec.storage is not None
    if given:
        _refuse_another_apps_sqlite(cast(str, spec.storage))
    with _opening(spec):
        try:
            storage = make_storage(spec.storage_url, on_stale, given=given)
            _refuse_new_study_over_results(spec, storage)
            fronts = _open_fronts(spec, storage)
        except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
            raise _cannot_open(spec.storage_url, exc, given) from None
    return fronts


def _open_fronts(spec: StudySpec, storage: optuna.storages.BaseStorage) -> Fronts:
    """:func:`open_study` in an open storage."""
    study = optuna.create_study(
        study_name=spec.name, storage=storage,
        directions=["minimize"] * len(PARETO_OBJECTIVES), load_if_exists=True)
    workload = spec.workload.to_dict()
    # A knob the stored space searches is told by the space's check, with both value lists:
    # the workload holds only the first value, which would misreport the study.
    searched = {knob for knob, dimension in SEARCHED_AS.items()
                if (study.user_attrs.get(SPACE_ATTR) or {}).get(dimension)}
    _check_or_set(study, WORKLOAD_ATTR, workload, "workload",
                  compared=lambda stored, wanted: _workload_keys(stored, wanted) - searched)
    stored_workload = study.user_attrs.get(WORKLOAD_ATTR) or {}

    def shown(key: str, value: Any, asked: bool) -> str:
        """A dimension not searched on one side: its workload's one value there."""
        if value is None and key in DIMENSION_OF:
            value = (workload if asked else stored_workload).get(DIMENSION_OF[key])
        return _shown(value)

    _check_or_set(study, SPACE_ATTR, spec.space.to_dict(), "search space",
                  compared=_space_keys, hint=_space_hint, show=shown)
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


@contextlib.contextmanager
def _opening(spec: StudySpec) -> Iterator[None]:
    """Around opening the study's storage: first refuse a folder whose results the new study
    would overwrite, then make the folder; where opening fails, remove the folders this made
    (those still empty), so a storage that cannot be opened leaves nothing behind."""
    _refuse_new_study_over_results(spec, None)
    made = list(itertools.takewhile(lambda p: not p.exists(),
                                    (spec.directory, *spec.directory.parents)))
    try:
        ensure_folder(spec)
        yield
    except BaseException:
        for folder in made:  # the study folder first, then the parents this made
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _refuse_new_study_over_results(spec: StudySpec,
                                   storage: optuna.storages.BaseStorage | None) -> None:
    """A folder that holds a study's results (its Parquet files, trial records) but whose storage
    lacks the study (study.db gone, or another --storage) would get a new study, whose files
    overwrite them: refuse. ``storage``: None before it is opened (then only a missing
    study.db is known, or a SQLite file not made yet)."""
    found = spec.layout.results()
    if not found:
        return
    db = spec.layout.db.exists()
    other = "pick another --name or --studies-dir, or remove the folder"
    if storage is None and spec.storage is None:
        if db:
            return
        lacks, fix = "no study.db", f"restore study.db, {other}"
    elif storage is None and not _new_sqlite_file(cast(str, spec.storage)):
        return  # known once it is opened (a SQLite file not made yet holds no study)
    elif storage is not None and _holds(storage, spec.name):
        return
    elif spec.storage is None:
        if storage is not None and (renamed := _renamed_folder(spec.layout, storage, spec.name)):
            raise renamed
        lacks, fix = f"its study.db has no study {spec.name!r}", f"restore study.db, {other}"
    else:
        lacks = f"--storage {redact(spec.storage)} has no study {spec.name!r}"
        fix = ("pass the --storage it lives in"
               + (" (or none: the folder has a study.db)" if db else "") + f", {other}")
    raise UserError(f"{spec.directory} holds a study's results ({', '.join(found)}) but {lacks}, "
                    f"so a new study would overwrite them: {fix}")


# Optuna's tables (those of its RDB storage, and alembic's): a file holding any of them is a
# study's storage, or one being made by another process at this moment.
OPTUNA_TABLES = frozenset({
    "studies", "version_info", "study_directions", "study_user_attributes",
    "study_system_attributes", "trials", "trial_user_attributes", "trial_system_attributes",
    "trial_params", "trial_values", "trial_intermediate_values", "trial_heartbeats",
    "alembic_version"})


def _refuse_another_apps_sqlite(url: str) -> None:
    """A --storage that names an existing SQLite file holding tables, none of them Optuna's (an
    application's database, a mistyped path): opening it would add Optuna's 13 tables to that
    file, so refuse before anything is written."""
    file = _sqlite_file(url)
    if file is None or not file.is_file() or not _sqlite_header(file):
        return  # a new file, or not a database at all: opening it says so
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro",
                                                uri=True)) as db:
            tables = sorted(row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite%'"))
    except sqlite3.Error:
        return  # damaged, locked: opening it says why
    if tables and not OPTUNA_TABLES.intersection(tables):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise UserError(f"--storage {redact(url)} is a SQLite database of something else "
                        f"(tables {shown}), with no Optuna study in it: tuner would add its "
                        "tables to it; name a new file (sqlite:///path/to/study.db) or a "
                        "study's own")


def _holds(storage: optuna.storages.BaseStorage, name: str) -> bool:
    try:
        storage.get_study_id_from_name(name)
        return True
    except KeyError:
        return False


def _new_sqlite_file(url: str) -> bool:
    """Whether ``url`` names a SQLite file that does not exist yet (opening it would make it)."""
    path = _sqlite_file(url)
    return path is not None and not path.exists()


def _sqlite_file(url: str) -> Path | None:
    """The file a SQLite ``url`` names; None for another database, or one in memory."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - opening it says what is wrong with it
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return Path(database)


def ensure_folder(spec: StudySpec) -> None:
    """Create the study folder; a one-line error where it cannot be written."""
    if spec.directory.exists() and not spec.directory.is_dir():
        raise UserError(f"cannot make the study folder {spec.directory}: a file of that name is "
                        "there; pick another --name, or move the file")
    try:
        spec.directory.mkdir(parents=True, exist_ok=True)
        if spec.storage is None:
            # A name of its own: workers of one fleet start together, and a shared probe name
            # let one delete another's ("cannot write ...: No such file or directory").
            with tempfile.NamedTemporaryFile(dir=spec.directory, prefix=".write-test-"):
                pass
    except OSError as exc:
        fix = "pass --studies-dir to a writable folder"
        if spec.storage is None and (spec.layout.db.exists() or spec.layout.results()):
            # The study lives in this folder's study.db: under another --studies-dir without
            # it, the same command would start a new study from nothing.
            fix = (f"copy the folder {spec.directory.name}/ into a writable folder first and "
                   "pass that as --studies-dir (without the copy, another --studies-dir starts "
                   "a new study)")
        raise UserError(f"cannot write to {spec.directory}: {exc.strerror}; {fix}") from exc


def join_spec(name: str, storage: str | None, root: Path = STUDIES_DIR,
              argument: str = "--study", **run: Any) -> StudySpec:
    """The spec of an existing study, read from its storage, for a worker that joins it from
    this host or another; ``run`` holds this run's own fields (n_trials, budget_s, seed).
    ``argument``: how the command was given the study's name, for the errors."""
    from sqlalchemy.exc import SQLAlchemyError

    layout = StudyLayout.of(root, name)
    url = storage or layout.sqlite_url
    if storage is None and not layout.db.exists():
        if found := layout.results():  # a study folder copied without its study.db, say
            raise UserError(f"{layout.directory} holds a study's results ({', '.join(found)}) "
                            f"but no {layout.db.name}, the Optuna storage this command needs: "
                            "copy it along, or pass --storage with the URL the study lives in")
        raise UserError(f"no study {name!r} under {root}: start it with `tuner search`, or pass "
                        "--storage with the URL of the storage it lives in")
    if storage is not None and (named := _sqlite_file(storage)) is not None \
            and not named.exists() and named.parent.is_dir():
        # Opening it would make an empty database file, left behind by a mistyped name (in a
        # folder that is not there, opening it fails and says so).
        raise UserError(f"no study {name!r}: --storage {redact(storage)} names a SQLite file "
                        "that does not exist; check the path")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            if not _has_schema(url):
                raise _no_schema(name, storage, layout)
            opened = make_storage(url, given=storage is not None)
            study = optuna.load_study(study_name=name, storage=opened)
            attrs = _defining_attrs(study)
    except KeyError:
        raise _no_such_study(name, storage, layout, opened, argument) from None
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise _cannot_open(url, exc, storage is not None) from None
    if attrs is None:
        raise UserError(f"study {name!r} in {redact(url)} was not made by tuner (no workload, "
                        "search space or trial protocol stored with it)")
    return StudySpec(name=name, workload=Workload.from_dict(attrs[WORKLOAD_ATTR]),
                     space=SearchSpace.from_dict(attrs[SPACE_ATTR]),
                     protocol=TrialProtocol.from_dict(attrs[PROTOCOL_ATTR]),
                     root=root, storage=storage, **run)


def _has_schema(url: str) -> bool:
    """Whether the database ``url`` names holds Optuna's tables. Opening a storage creates
    them, so a worker joining a mistyped database would leave 13 tables in it; this looks on a
    short-lived engine of its own and writes nothing."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(_with_driver(url))
    try:
        inspector = sqlalchemy.inspect(engine)
        return inspector.has_table("studies") or inspector.has_table("alembic_version")
    finally:
        engine.dispose()


def _no_schema(name: str, storage: str | None, layout: StudyLayout) -> UserError:
    """A database with no Optuna tables: a mistyped --storage, most likely."""
    if storage is None:
        return UserError(f"no study {name!r}: {layout.db} holds no tuner study at all; start "
                         f"it with `tuner search --name {name}`")
    return UserError(f"no study {name!r}: --storage {redact(storage)} holds no tuner study at "
                     "all (no Optuna tables); check the database name in the URL")


# A search creates its study, then stores the attributes that define it one write at a time; a
# worker that finds some missing waits up to JOIN_WAIT_S for the rest, reading again every
# JOIN_POLL_S, before it says the study was not made by tuner.
JOIN_WAIT_S = 5.0
JOIN_POLL_S = 0.1


def _defining_attrs(study: optuna.Study) -> dict[str, Any] | None:
    """The study's user attributes once its workload, space and protocol are all stored; None
    where they are not after JOIN_WAIT_S. A spec built from some of them would be wrong (a
    default protocol for the one not stored yet) and refused later as another study's."""
    deadline = time.monotonic() + JOIN_WAIT_S
    while True:
        attrs = study.user_attrs
        if all(a in attrs for a in (WORKLOAD_ATTR, SPACE_ATTR, PROTOCOL_ATTR)):
            return attrs
        if time.monotonic() >= deadline:
            return None
        time.sleep(JOIN_POLL_S)


def _no_such_study(name: str, storage: str | None, layout: StudyLayout,
                   opened: optuna.storages.BaseStorage, argument: str) -> UserError:
    """Why the storage holds no study ``name``, naming ``argument``; a study folder renamed
    since (its study.db holds one study, of another name) gets the name to give it back."""
    if storage is None and (renamed := _renamed_folder(layout, opened, name)):
        return renamed
    held = _held(opened)
    where = layout.db if storage is None else redact(storage)
    there = f" (it holds {', '.join(map(repr, held[:5]))})" if held else ""
    return UserError(f"no study {name!r} in {where}{there}: check {argument}, or start it with "
                     f"`tuner search --name {name}{' --storage ...' if storage else ''}`")


def _held(opened: optuna.storages.BaseStorage) -> list[str]:
    """The names of the tuner studies in a storage (not the per-batch-size studies,
    ``<name>:bs<N>``)."""
    return [s.study_name for s in opened.get_all_studies() if ":" not in s.study_name]


def _renamed_folder(layout: StudyLayout, opened: optuna.storages.BaseStorage,
                    name: str) -> UserError | None:
    """A study folder renamed since its study was made: its study.db (``opened``) holds one
    study, of another name than ``name``, the folder's, and the folder's trials.parquet (if
    any) is of that study too, not of ``name`` (another study's study.db copied in). The error
    says which, and to rename the folder back; None otherwise."""
    held = _held(opened)
    if len(held) != 1 or held[0] == name or _files_study(layout) not in (None, held[0]):
        return None
    return UserError(f"{layout.directory} holds study {held[0]!r}, not {name!r}: a study is "
                     f"found by its folder's name, so rename the folder back to {held[0]}")


def _files_study(layout: StudyLayout) -> str | None:
    """The study named in the metadata of the folder's trials.parquet; None where there is no
    such file, or it cannot be read."""
    import json

    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(layout.trials_file).metadata or {}).get(b"tuner.study")
        return None if raw is None else str(json.loads(raw))
    except (OSError, ValueError):
        return None


# The storage this process opened last, for :func:`storage_failure` to name: Optuna's error,
# raised deep inside it long after the storage was opened, names none. A command opens one
# study's storage, so the last one opened is the one that failed.
_last_opened: str | None = None


def make_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None,
                 *, given: bool = True) -> optuna.storages.BaseStorage:
    """An RDB storage with heartbeats; SQLite set up for several processes on one host. A URL
    SQLAlchemy cannot use (an unknown scheme, a server that does not answer) is a one-line
    error naming it, its password masked; ``given``: the user gave it (--storage), rather than
    it being the study's own SQLite file."""
    from sqlalchemy.exc import SQLAlchemyError

    global _last_opened
    try:
        storage = _make_storage(url, on_stale)
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise _cannot_open(url, exc, given) from None
    if ":memory:" not in url:  # import_ahead's, which holds no study
        _last_opened = url
    return storage


def import_ahead() -> None:
    """Import what opening a storage imports on first use (Optuna imports SQLAlchemy and alembic
    lazily), by opening one in memory. A fleet's worker does it while it waits for its study,
    not after: on the H200 host this took 1.3-1.9 s, and opening the study after it 0.04-0.06 s,
    against 1.3-1.9 s without (benchmarks/fleet-startup-h200-8981518.md, -220d17f-a.md)."""
    make_storage("sqlite:///:memory:", given=False)


class _Heartbeat(TypedDict):
    """The heartbeat keywords of ``RDBStorage``."""

    heartbeat_interval: int
    grace_period: int
    heartbeat_stale_trial_callback: Callable[[optuna.Study, FrozenTrial], None] | None


# Opening a new storage creates its schema; where another process creates it at the same moment
# (two searches started together on a new study), opening is tried again this many times in all,
# after SCHEMA_RACE_WAIT_S, then twice that, and so on.
SCHEMA_RACE_TRIES = 6
SCHEMA_RACE_WAIT_S = 0.05


def _make_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None
                  ) -> optuna.storages.BaseStorage:
    """:func:`make_storage`, tried again where another process was creating the same new
    storage's schema: Optuna creates each missing table, then inserts the schema's version,
    with no lock around the whole, so of two processes that open a new SQLite file at once one
    found a table the other had just made ("table ... already exists") or a version row it had
    just inserted ("UNIQUE constraint failed: alembic_version.version_num"). Once the other is
    done the schema is there, and opening it again finds it whole."""
    for attempt in range(SCHEMA_RACE_TRIES):
        try:
            return _open_storage(url, on_stale)
        except Exception as exc:
            if attempt == SCHEMA_RACE_TRIES - 1 or not _schema_race(exc):
                raise
            time.sleep(SCHEMA_RACE_WAIT_S * 2 ** attempt * random.uniform(1.0, 1.5))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _schema_race(exc: Exception) -> bool:
    """Whether ``exc``, raised while opening a storage, is another process creating its schema
    at the same moment: a table it made, or a row of the schema's version it inserted."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    if isinstance(exc, IntegrityError):  # opening inserts only the schema's version rows
        return True
    return isinstance(exc, OperationalError | ProgrammingError) and "already exists" in str(exc)


def _open_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None
                  ) -> optuna.storages.BaseStorage:
    interval = _env_seconds("TUNER_HEARTBEAT_INTERVAL_S", HEARTBEAT_INTERVAL_S)
    grace = _env_seconds("TUNER_HEARTBEAT_GRACE_S", HEARTBEAT_GRACE_S)
    if grace <= interval:
        # Every running trial's last beat would be older than the grace between two beats:
        # other searches would fail live trials as stale and measure their configs again.
        raise UserError(f"TUNER_HEARTBEAT_GRACE_S={grace} is not more than the "
                        f"{interval} s between heartbeats (TUNER_HEARTBEAT_INTERVAL_S): every "
                        "running trial would be taken for dead; give a grace of several beats "
                        f"(the defaults: {HEARTBEAT_INTERVAL_S} and {HEARTBEAT_GRACE_S})")
    heartbeat: _Heartbeat = {"heartbeat_interval": interval, "grace_period": grace,
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


def _cannot_open(url: str, exc: Exception, given: bool = True) -> UserError:
    """One line, no secret: where (--storage, when the user gave the URL), the URL with its
    password masked, why in a few words rather than the driver's paragraph, and what to do
    where the file itself is the trouble (damaged, full, read-only)."""
    where = "--storage" if given else "storage"
    cause = scrub(_cause(url, exc), url)
    step = _next_step(url, cause)
    return UserError(f"cannot open {where} {redact(url)}: {cause}{f'; {step}' if step else ''}")


def storage_failure(exc: BaseException) -> UserError | None:
    """A storage that failed while in use, as one line; None where ``exc`` is not that. Optuna
    raises StorageInternalError "An exception is raised during the commit. This typically
    happens due to invalid data in the commit, e.g. exceeding max length." for whatever the
    database said (a damaged file, a full disk, a read-only file): the driver's own words are
    in the chain of causes, SQLAlchemy's error holding them as ``orig``. The line has those
    words, the storage (:data:`_last_opened`, its password masked) and what to do next."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    kinds = (optuna.exceptions.StorageInternalError, SQLAlchemyError, sqlite3.Error)
    if not any(isinstance(e, kinds) for e in chain):
        return None
    driver: BaseException = \
        next((e.orig for e in chain if isinstance(e, DBAPIError) and e.orig is not None), None) \
        or next((e for e in chain if isinstance(e, sqlite3.Error)), None) \
        or next((e for e in chain if isinstance(e, SQLAlchemyError)), exc)
    text = str(driver)
    reason = " ".join(next((line for line in text.splitlines() if line.strip()),
                           type(driver).__name__).split())
    url = _last_opened
    if url is None:
        return UserError(f"the study's storage failed ({reason}): once it works again, run "
                         "the same command again")
    reason = scrub(reason, url)
    file = _sqlite_file(url)
    step = _next_step(url, reason) or "once it works again, run the same command again"
    return UserError(f"storage {file or redact(url)} failed ({reason}): {step}")


def _next_step(url: str, reason: str) -> str | None:
    """What to do about a storage whose database said ``reason``, where that is the file
    (damaged, full disk, read-only), else None. What the study measured is in its
    trials.parquet too, written after the trials, which ``tuner show`` reads without the
    storage; the storage holds every trial, so a resumed search or worker rewrites the file."""
    said = reason.lower()
    file = _sqlite_file(url)
    kept = f"; {TRIALS_FILE} beside it keeps what was measured (tuner show reads it)" \
        if file is not None and (file.parent / TRIALS_FILE).is_file() else ""
    what = "it" if file is None else file.name
    # SQLite's own words (SQLITE_CORRUPT, SQLITE_NOTADB), never ours: "not a database URL".
    if file is not None and "file is not a database" in said and not _sqlite_header(file) \
            and (file.name != DB_FILE or _starts_with(file, b"PAR1")):
        # Not a damaged study.db but another file given as --storage (a trials.parquet, say):
        # never "restore" it from a copy.
        kind = "a Parquet file" if _starts_with(file, b"PAR1") else "not an SQLite database"
        return (f"{file.name} is {kind}, not a study's storage: point --storage at the "
                f"study's {DB_FILE} (sqlite:///path/to/{DB_FILE}), or leave --storage out to "
                f"use the study folder's")
    if any(word in said for word in ("malformed", "file is not a database", "encrypted")):
        return f"the file is damaged: restore {what} from a copy and run the same command " \
               f"again{kept}"
    if any(word in said for word in ("disk is full", "no space left")):
        return f"free disk space and the same command resumes{kept}"
    if file is not None and "readonly" in said:
        return (f"make {what} and its folder writable (chmod u+w; chattr -i), or copy the study "
                "folder into a writable folder and pass that as --studies-dir; the same "
                f"command then resumes{kept}")
    return None


def _sqlite_header(file: Path) -> bool:
    """Whether ``file`` begins as every SQLite 3 database does (its damage is past the header)."""
    return _starts_with(file, b"SQLite format 3\x00")


def _starts_with(file: Path, magic: bytes) -> bool:
    try:
        with file.open("rb") as handle:
            return handle.read(len(magic)) == magic
    except OSError:
        return False


def _cause(url: str, exc: Exception) -> str:
    """Why ``url`` could not be opened, in a few words: what SQLAlchemy, optuna and the drivers
    say is a paragraph (a plugin path, "install appropriate one", a link)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    if isinstance(exc, NoSuchModuleError):
        return (f"unknown kind of database {url.partition(':')[0].partition('+')[0]!r} "
                "(e.g. postgresql://user@host/db or sqlite:///path/study.db)")
    if isinstance(exc, ArgumentError):
        return "not a database URL (e.g. postgresql://user@host/db or sqlite:///path/study.db)"
    if isinstance(exc, _NoDriver):
        return ("no PostgreSQL driver is installed: pip install 'tuner[postgres]' (or "
                "psycopg2-binary)")
    if isinstance(exc, ImportError):  # optuna's, over the driver's own ModuleNotFoundError
        missing = getattr(exc.__cause__, "name", None) or getattr(exc, "name", None)
        return f"its driver{f' {missing!r}' if missing else ''} is not installed"
    if isinstance(exc, ValueError):
        try:
            make_url(url)
        except ValueError:  # int() of its port
            return "its port is not a number"
    text = str(getattr(exc, "orig", None) or exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return " ".join(first.split())


def _with_driver(url: str) -> str:
    """Name the installed PostgreSQL driver in a plain ``postgresql://`` URL: SQLAlchemy 2.1
    reads it as psycopg (3), 2.0 as psycopg2, and the ``postgres`` extra installs psycopg2."""
    import importlib.util

    if not url.startswith("postgresql://"):
        return url
    for driver in ("psycopg", "psycopg2"):
        if importlib.util.find_spec(driver) is not None:
            return f"postgresql+{driver}://{url[len('postgresql://'):]}"
    raise _NoDriver("no PostgreSQL driver")


class _NoDriver(ImportError):
    """Neither PostgreSQL driver SQLAlchemy reads a plain ``postgresql://`` URL with is
    installed."""


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
    if not re.fullmatch(r"[0-9]+", text.strip()) or int(text) <= 0:
        raise UserError(f"{name}={text!r}: give a whole number of seconds above zero")
    return int(text)


# Set per trial, not per study (the first trial of each run measures the device's peak).
_PER_TRIAL_PROTOCOL_KEYS = {"measure_peak"}


# The unit a stored number is in, for a refused resume to say "300 s", not "300.0".
_UNIT_OF = {"compile_timeout_s": "s", "min_seconds": "s", "max_compile_s": "s",
            "max_vram_gb": "GiB"}


def _shown(value: Any, unit: str | None = None) -> str:
    """A stored value as the options spell it: none for no value, false/true, a number in its
    ``unit`` (``300 s``), else its repr."""
    if value is None:
        return "none"
    if unit is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g} {unit}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, (bool, str)) for v in value):
        return ",".join(_shown(v) for v in value)  # as the options take them
    return repr(value)


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


def _space_keys(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    """Every key, but the dimensions whose order does not change what is measured, listed in
    another order, are the same space (:data:`_UNORDERED`; a resume takes the stored order of
    those Optuna samples, :func:`resumed_space`). The first value of the others is what the
    baselines run."""
    keys = _every_key(stored, wanted)
    return {key for key in keys if not _same_but_order(key, stored.get(key), wanted.get(key))}


# The dimensions whose order only breaks ties in what is searched next: the baselines run
# every batch size, inductor's default mode first (tuner.domain.space.SearchSpace.baselines),
# and dynamic=False where it is searched at all.
_UNORDERED = ("batch_sizes", "backends", "modes", "dynamic")


def _same_but_order(key: str, stored: Any, wanted: Any) -> bool:
    if key not in _UNORDERED or (key == "dynamic" and False not in (stored or [])):
        return False  # without dynamic=False, the baselines run dynamic's first value
    return _reordered(stored, wanted)


def resumed_space(study: optuna.Study, asked: SearchSpace) -> SearchSpace:
    """The space a run searches: ``asked``, with its backends, modes and dynamic values in the
    study's stored order where they differ only in order, so that each trial's parameters keep
    the choices Optuna stored with the study's first trials (batch sizes keep the asked order:
    each has its own study, and the order says which is searched first)."""
    stored = study.user_attrs.get(SPACE_ATTR) or {}
    kept = {key: tuple(stored[key]) for key in ("backends", "modes", "dynamic")
            if _same_but_order(key, stored.get(key), list(getattr(asked, key)))}
    return dataclasses.replace(asked, **kept) if kept else asked


def _workload_keys(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    """Every key but a factory model's image size: its factory makes its own inputs, and a study
    made before --image-size was refused with a factory stored the one it was given."""
    keys = _every_key(stored, wanted)
    return keys - {"image_size"} if ":" in str(wanted.get("model", "")) else keys


def _space_hint(stored: dict[str, Any], wanted: dict[str, Any], differ: set[str]) -> str:
    """What to pass where a dimension lists the study's values in another order (its first value
    is what the baselines run), else :func:`_cover_hint`."""
    reordered = sorted(key for key in differ if _reordered(stored.get(key), wanted.get(key)))
    if reordered:
        named = " and ".join(OPTION_OF.get(key, key) for key in reordered)
        return (f"; {named} {'lists' if len(reordered) == 1 else 'list'} the study's values in "
                f"another order, and the baselines run the first value: give them in the "
                f"study's order")
    return _cover_hint(stored, differ)


def _reordered(stored: Any, wanted: Any) -> bool:
    return isinstance(stored, list) and isinstance(wanted, list) and stored != wanted \
        and len(stored) == len(wanted) and all(value in stored for value in wanted) \
        and all(value in wanted for value in stored)


def _cover_hint(stored: dict[str, Any], differ: set[str]) -> str:
    """Why a study that searched neither inductor options nor channels_last differs from the
    same command now, where only those differ: a CUDA search without --space adds them
    (tuner.domain.space.default_options, default_formats), and the study was made with a --space
    file, which does not, or before tuner added them. The study does not store which."""
    if differ <= {"options", "channels_last"} and not stored.get("options") \
            and not stored.get("channels_last"):
        return ("; without --space a CUDA search also covers inductor options and channels_last "
                "where they are not given: if the study was made with a --space file, pass the "
                "same --space file; if it was made before tuner searched them, "
                "--inductor-option none --channels-last false asks for its space")
    return ""


# The option that sets each stored field, for a refused resume to name ("rerun with the same
# options"); a field no option sets keeps its name.
OPTION_OF = {
    "model": "--model", "device": "--device", "dtype": "--dtype", "dtypes": "--dtype",
    "image_size": "--image-size", "channels_last": "--channels-last",
    "cudnn_benchmark": "--cudnn-benchmark", "shape_schedule": "--shape-schedule",
    "backends": "--backend", "modes": "--mode", "dynamic": "--dynamic",
    "batch_sizes": "--batch-sizes", "options": "--inductor-option",
    "min_calls": "--min-calls", "min_seconds": "--min-seconds", "warm_cache": "--warm-cache",
    "compile_timeout_s": "--compile-timeout", "max_vram_gb": "--max-vram-gb",
    "max_compile_s": "--max-compile-s"}


# The workload's knobs that a space searches when given several values: knob -> dimension.
SEARCHED_AS = {"dtype": "dtypes", "channels_last": "channels_last",
               "cudnn_benchmark": "cudnn_benchmark"}
DIMENSION_OF = {dimension: knob for knob, dimension in SEARCHED_AS.items()}


def _check_or_set(study: optuna.Study, attr: str, wanted: dict[str, Any], what: str,
                  compared: Callable[[dict[str, Any], dict[str, Any]], set[str]] = _every_key,
                  hint: Callable[[dict[str, Any], dict[str, Any], set[str]], str] | None = None,
                  show: Callable[[str, Any, bool], str] | None = None) -> None:
    """Store what defines the study on first use; after that, refuse a run that asks for
    another one, since its trials would not be comparable with the stored ones. ``hint``:
    more to say, given the stored value and the keys that differ; ``show``: how to show a
    value, given its key and whether it is the asked one (default :func:`_shown`)."""
    stored = study.user_attrs.get(attr)
    if stored is None:
        study.set_user_attr(attr, wanted)
        return
    differ = {k for k in compared(stored, wanted) if stored.get(k) != wanted.get(k)}
    if differ:
        told = show or (lambda key, value, __: _shown(value, _UNIT_OF.get(key)))
        diff = [f"{OPTION_OF.get(k, k)}: study has {told(k, stored.get(k), False)}, asked "
                f"{told(k, wanted.get(k), True)}" for k in sorted(differ)]
        raise UserError(f"study {study.study_name!r} was made with another {what} "
                        f"({'; '.join(diff)}); rerun with the same options or pick a new "
                        f"--name{hint(stored, wanted, differ) if hint else ''}",
                        about=tuple(OPTION_OF[k] for k in sorted(differ) if k in OPTION_OF))
