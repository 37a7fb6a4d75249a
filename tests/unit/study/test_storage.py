"""Joining a study (worker, confirm) reads its spec from the storage: a database with no study
in it is left as it was, and a study still being created is waited for, never half read."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid

import optuna
import pytest

from tests.support.postgres import REASON, URL
from tests.support.specs import SPACE, WORKLOAD
from tuner.domain.records import TrialProtocol
from tuner.errors import UserError
from tuner.study.storage import PROTOCOL_ATTR, SPACE_ATTR, WORKLOAD_ATTR, join, join_spec
from tuner.study.storage.engine import with_driver

PROTOCOL = TrialProtocol(compile_timeout_s=300.0)  # not the default, which a half read gave
DEFINING = {WORKLOAD_ATTR: WORKLOAD.to_dict(), SPACE_ATTR: SPACE.to_dict(),
            PROTOCOL_ATTR: PROTOCOL.to_dict()}


# -- a database with no Optuna schema: refused, nothing written -----------------------------------

@pytest.fixture
def empty_database():
    """The URL of a new, empty PostgreSQL database on the server of tests/support/postgres.py
    (skipped with its reason where there is none); dropped afterwards."""
    if REASON is not None:
        pytest.skip(REASON)
    import sqlalchemy
    from sqlalchemy.engine import make_url

    name = f"tuner_test_{uuid.uuid4().hex[:12]}"
    server = sqlalchemy.create_engine(make_url(URL).set(drivername="postgresql+psycopg2"),
                                      isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield make_url(URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with server.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        server.dispose()


def tables(url: str) -> list[str]:
    import sqlalchemy

    engine = sqlalchemy.create_engine(with_driver(url))
    try:
        return sqlalchemy.inspect(engine).get_table_names()
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_joining_a_postgres_database_with_no_study_is_refused_and_creates_no_table(
        tmp_path, empty_database):
    with pytest.raises(UserError, match=r"^no study 's': --storage .* holds no tuner study at all"):
        join_spec("s", empty_database, tmp_path)
    assert tables(empty_database) == []


def test_joining_an_empty_sqlite_file_is_refused_and_creates_no_table(tmp_path):
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()  # an empty file, as a mistyped name would have left
    url = f"sqlite:///{db}"
    with pytest.raises(UserError, match=r"^no study 's': --storage .* holds no tuner study at all"):
        join_spec("s", url, tmp_path)
    assert tables(url) == []


# -- a study whose defining attributes are not all stored yet -------------------------------------

def half_made(tmp_path, stored: tuple[str, ...]) -> str:
    """A SQLite storage URL with study ``s`` holding only the ``stored`` attributes, as the
    search that creates it leaves it between its writes."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="s", storage=url)
    for attr in stored:
        study.set_user_attr(attr, DEFINING[attr])
    return url


@pytest.mark.parametrize("stored", [(WORKLOAD_ATTR, SPACE_ATTR), (WORKLOAD_ATTR,)],
                         ids=["no-protocol-yet", "workload-only-yet"])
def test_a_worker_joining_a_study_being_created_waits_for_its_whole_spec(tmp_path, stored):
    url = half_made(tmp_path, stored)

    def finish() -> None:
        time.sleep(0.5)
        study = optuna.load_study(study_name="s", storage=url)
        for attr in DEFINING.keys() - set(stored):
            study.set_user_attr(attr, DEFINING[attr])

    writer = threading.Thread(target=finish)
    writer.start()
    try:
        spec = join_spec("s", url, tmp_path)
    finally:
        writer.join()
    assert (spec.workload, spec.space, spec.protocol) == (WORKLOAD, SPACE, PROTOCOL)


def test_a_study_whose_spec_never_comes_was_not_made_by_tuner(tmp_path, monkeypatch):
    monkeypatch.setattr(join, "JOIN_WAIT_S", 0.3)
    url = half_made(tmp_path, (WORKLOAD_ATTR, SPACE_ATTR))
    with pytest.raises(UserError, match=r"^study 's' in .* was not made by tuner"):
        join_spec("s", url, tmp_path)
