"""Making an Optuna RDB storage: heartbeats, SQLite set up for several processes on one host, a
PostgreSQL driver named, and opening again where another process is creating the same schema."""

from __future__ import annotations

import os
import random
import re
import time
import warnings
from collections.abc import Callable
from typing import Any, TypedDict

import optuna
from optuna.trial import FrozenTrial

from tuner.errors import UserError
from tuner.study.storage.errors import NoDriver, cannot_open, note_opened

# While a search process runs a trial it records a heartbeat in the storage every
# HEARTBEAT_INTERVAL_S; a trial whose last beat is older than HEARTBEAT_GRACE_S is failed by any
# other search on the study and its config queued again (a killed worker, a lost host).
# TUNER_HEARTBEAT_INTERVAL_S / TUNER_HEARTBEAT_GRACE_S override them (whole seconds).
HEARTBEAT_INTERVAL_S = 20
HEARTBEAT_GRACE_S = 120


def make_storage(url: str, on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None,
                 *, given: bool = True) -> optuna.storages.BaseStorage:
    """An RDB storage with heartbeats; SQLite set up for several processes on one host. A URL
    SQLAlchemy cannot use (an unknown scheme, a server that does not answer) is a one-line
    error naming it, its password masked; ``given``: the user gave it (--storage), rather than
    it being the study's own SQLite file."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        storage = _make_storage(url, on_stale)
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise cannot_open(url, exc, given) from None
    if ":memory:" not in url:  # import_ahead's, which holds no study
        note_opened(url)
    return storage


def import_ahead() -> None:
    """Import what opening a storage imports on first use (Optuna imports SQLAlchemy and alembic
    lazily), by opening one in memory. A fleet's worker does it while it waits for its study,
    not after: on the H200 host this took 1.3-1.9 s, and opening the study after it 0.04-0.06 s,
    against 1.3-1.9 s without (benchmarks/fleet_startup.py measures it)."""
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
            return optuna.storages.RDBStorage(with_driver(url),
                                              engine_kwargs={"pool_pre_ping": True}, **heartbeat)
        # Several processes on one host share the file: wait for locks instead of failing, and
        # let every transaction begin with the write lock (below).
        storage = optuna.storages.RDBStorage(
            url, engine_kwargs={"connect_args": {"timeout": 60, "isolation_level": None}},
            **heartbeat)
    _begin_immediate(storage.engine)
    return storage


def with_driver(url: str) -> str:
    """Name the installed PostgreSQL driver in a plain ``postgresql://`` URL: SQLAlchemy 2.1
    reads it as psycopg (3), 2.0 as psycopg2, and the ``postgres`` extra installs psycopg2."""
    import importlib.util

    if not url.startswith("postgresql://"):
        return url
    for driver in ("psycopg", "psycopg2"):
        if importlib.util.find_spec(driver) is not None:
            return f"postgresql+{driver}://{url[len('postgresql://'):]}"
    raise NoDriver("no PostgreSQL driver")


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
