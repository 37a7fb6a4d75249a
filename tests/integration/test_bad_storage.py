"""A study's storage gone, elsewhere or not to be opened: the search refuses in one line naming
the storage and why, before it changes anything, and leaves no folder behind."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import shutil
from pathlib import Path

import optuna
import pytest

from tests.support.cli import (
    STUDY,
    assert_one_line_error,
    fingerprint,
    invoke,
    missing,
    search_args,
)
from tests.support.postgres import URL, with_password
from tuner.domain import layout
from tuner.study.storage import make_storage

pytestmark = pytest.mark.usefixtures("fake_cli")

PASSWORD = "s3cret-Pw9"
OR_ELSE = "pick another --name or --studies-dir, or remove the folder"
RESULTS = (layout.TRIALS_FILE, layout.PARETO_FILE, "trials/")


def made(root: Path, **options: str) -> Path:
    """A finished study under ``root`` (fake runner); its folder."""
    result = invoke(*search_args(root, **options))
    assert result.exit_code == 0, result.output
    return root / options.get("name", STUDY)


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} is not installed")


# -- a folder with results whose storage lacks the study: refused, nothing changed ---------------

@pytest.mark.parametrize("kept", [RESULTS, RESULTS[:1], RESULTS[1:2], RESULTS[2:]],
                         ids=["all", "trials.parquet", "pareto.parquet", "trial-records"])
def test_a_study_folder_without_its_study_db_is_refused_and_left_as_it_is(tmp_path, kept):
    folder = made(tmp_path)
    (folder / "trials" / "0").mkdir(parents=True)  # the fake runner writes no trial folder
    (folder / "trials" / "0" / "result.json").write_text("{}\n")
    (folder / layout.DB_FILE).unlink()
    for name in set(RESULTS) - set(kept):
        shutil.rmtree(folder / name) if name.endswith("/") else (folder / name).unlink()
    before = fingerprint(tmp_path)

    result = invoke(*search_args(tmp_path))
    assert_one_line_error(result, f"{folder} holds a study's results ({', '.join(kept)}) but "
                          "no study.db", "a new study would overwrite them",
                          f"restore study.db, {OR_ELSE}")
    assert fingerprint(tmp_path) == before


def test_a_study_db_that_holds_another_study_is_refused_and_left_as_it_is(tmp_path):
    folder, other = made(tmp_path), made(tmp_path, name="other")
    shutil.copy(other / layout.DB_FILE, folder / layout.DB_FILE)
    before = fingerprint(folder)

    result = invoke(*search_args(tmp_path))
    assert_one_line_error(result, f"its study.db has no study '{STUDY}'",
                          f"restore study.db, {OR_ELSE}")
    assert fingerprint(folder) == before


def test_a_storage_without_the_study_of_the_folder_is_refused_and_starts_no_study(tmp_path):
    folder = made(tmp_path / "studies")
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    before = fingerprint(folder)

    result = invoke(*search_args(tmp_path / "studies", storage=elsewhere))
    assert_one_line_error(result, f"but --storage {elsewhere} has no study '{STUDY}'",
                          "pass the --storage it lives in (or none: the folder has a study.db)",
                          OR_ELSE)
    assert fingerprint(folder) == before
    assert not (tmp_path / "elsewhere.db").exists()  # refused before opening would make it
    (tmp_path / "elsewhere.db").touch()  # a SQLite file there, empty: refused once opened
    result = invoke(*search_args(tmp_path / "studies", storage=elsewhere))
    assert_one_line_error(result, f"but --storage {elsewhere} has no study '{STUDY}'")
    assert fingerprint(folder) == before
    assert optuna.get_all_study_names(elsewhere) == []
    again = invoke(*search_args(tmp_path / "studies"))  # its own storage: resumes
    assert again.exit_code == 0 and "0 new trials, 4 in the study" in again.stderr


def test_a_postgres_storage_without_the_study_of_the_folder_is_refused(tmp_path, postgres_study):
    name = postgres_study
    folder = made(tmp_path, name=name)
    secret_url = with_password(URL)
    before = fingerprint(folder)

    result = invoke(*search_args(tmp_path, name=name, storage=secret_url))
    assert_one_line_error(result, f"--storage {secret_url.replace(PASSWORD, '***')} has no study "
                          f"'{name}'", OR_ELSE)
    assert PASSWORD not in result.stderr
    assert fingerprint(folder) == before
    assert name not in optuna.get_all_study_names(make_storage(URL))


# -- a storage that cannot be opened: one line, why, and no folder left ---------------------------

UNOPENABLE = [
    pytest.param("bogus://x", ["unknown kind of database 'bogus'"], id="unknown-kind"),
    pytest.param("not a url", ["not a database URL"], id="not-a-url"),
    pytest.param(f"mysql://u:{PASSWORD}@127.0.0.1:notaport/x", ["its port is not a number"],
                 id="port-not-a-number"),
    pytest.param(f"mysql://u:{PASSWORD}@127.0.0.1/x", ["its driver 'MySQLdb' is not installed"],
                 marks=missing("MySQLdb"), id="no-driver"),
    pytest.param(f"postgresql://u:{PASSWORD}@127.0.0.1:1/x",
                 ['connection to server at "127.0.0.1", port 1 failed: Connection refused'],
                 marks=needs("psycopg2"), id="no-server"),
    pytest.param("sqlite:///{tmp}/no-such-folder/study.db", ["unable to open database file"],
                 id="sqlite-no-folder"),
]


@pytest.mark.parametrize("url, words", UNOPENABLE)
def test_a_storage_that_cannot_be_opened_is_one_line_naming_it_and_why(tmp_path, url, words):
    url = url.replace("{tmp}", str(tmp_path))
    shown = url.replace(PASSWORD, "***")
    for args in (search_args(tmp_path / "studies", storage=url),
                 ["worker", "--study", STUDY, "--storage", url]):
        result = invoke(*args)
        assert_one_line_error(result, f"cannot open --storage {shown}: ", *words)
        assert PASSWORD not in result.stderr
        assert "damaged" not in result.stderr  # no file of it was read
        for raw in ("Can't load plugin", "install appropriate one", "sqlalche.me",
                    "invalid literal", "TCP/IP"):
            assert raw not in result.stderr


def test_a_postgres_storage_without_a_driver_names_the_option_and_what_to_install(
        tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in (
        "psycopg", "psycopg2") else find_spec(name, *a))
    url = f"postgresql://u:{PASSWORD}@127.0.0.1/x"
    for args in (search_args(tmp_path / "studies", storage=url),
                 ["worker", "--study", STUDY, "--storage", url]):
        result = invoke(*args)
        assert_one_line_error(result, "cannot open --storage postgresql://u:***@127.0.0.1/x: no "
                              "PostgreSQL driver is installed: pip install 'tuner[postgres]'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url, words", UNOPENABLE)
def test_a_storage_that_cannot_be_opened_leaves_no_folder(tmp_path, url, words):
    url = url.replace("{tmp}", str(tmp_path))
    result = invoke(*search_args(tmp_path / "new" / "studies", storage=url))
    assert result.exit_code == 1
    assert list(tmp_path.iterdir()) == []
    # A --studies-dir that was there stays, without the study folder.
    (tmp_path / "kept").mkdir()
    result = invoke(*search_args(tmp_path / "kept", storage=url))
    assert result.exit_code == 1
    assert list(tmp_path.iterdir()) == [tmp_path / "kept"]
    assert list((tmp_path / "kept").iterdir()) == []


def test_a_storage_from_tuner_storage_is_named_so_not_as_an_option_never_given(tmp_path):
    from click.testing import CliRunner

    from tuner.cli.app import main

    url = f"bogus://u:{PASSWORD}@host/x"
    for args in (search_args(tmp_path / "studies"), ["worker", "--study", STUDY],
                 ["confirm", STUDY]):
        result = CliRunner().invoke(main, args, env={"TUNER_STORAGE": url})
        assert_one_line_error(result, "cannot open TUNER_STORAGE=bogus://u:***@host/x: unknown "
                              "kind of database 'bogus'")
        assert PASSWORD not in result.stderr and "--storage" not in result.stderr


def test_a_worker_refuses_a_folder_that_holds_another_study_of_the_same_name(tmp_path):
    # A study 's' in its folder's study.db; another study 's' in another storage, joined with
    # the same --studies-dir: its files would overwrite the first's and mix their caches.
    from tests.support.specs import make_spec
    from tuner.fake import FakeRunner
    from tuner.study.search import Search

    here = make_spec(tmp_path / "here")
    Search(here, FakeRunner()).run()
    other = tmp_path / "other.db"
    Search(dataclasses.replace(make_spec(tmp_path / "there"), storage=f"sqlite:///{other}"),
           FakeRunner()).run()
    before = (here.layout.trials_file).read_bytes()
    result = invoke("worker", "--study", "s", "--storage", f"sqlite:///{other}",
                    "--studies-dir", str(tmp_path / "here"), "--export-only")
    assert result.exit_code == 1 and result.stdout == "", result.output
    assert result.stderr.count("\n") == 1 and "holds the files of a study 's' that lives in " \
        "study.db, not in sqlite:///" in result.stderr, result.stderr
    assert here.layout.trials_file.read_bytes() == before
    # Its own storage, or a folder of its own, is fine.
    assert invoke("worker", "--study", "s", "--studies-dir", str(tmp_path / "here"),
                  "--export-only").exit_code == 0
    assert invoke("worker", "--study", "s", "--storage", f"sqlite:///{other}",
                  "--studies-dir", str(tmp_path / "elsewhere"), "--export-only").exit_code == 0


@pytest.mark.parametrize("url", ["postgresql://postgres:p@ss:w/d@127.0.0.1/nodb",
                                 "postgresql://postgres:ab@cd@127.0.0.1/t1"])
def test_a_password_with_an_unescaped_at_or_slash_is_refused_and_never_shown(tmp_path, url):
    # SQLAlchemy ends the password at its first @: the rest was printed as the host.
    result = invoke("worker", "--study", "s", "--storage", url, "--studies-dir", str(tmp_path))
    assert_one_line_error(result, "has a password that holds an unescaped '@' or '/'", "%40")
    secret = url.split("postgres:", 1)[1].rsplit("@", 1)[0]
    after_first_at = secret.split("@", 1)[1]  # what was printed as the host
    for piece in (secret, after_first_at):
        assert piece not in result.stderr, (piece, result.stderr)


@pytest.mark.parametrize("password", ["se cr@et", "p@ss word"])
def test_a_password_with_a_space_and_an_at_is_never_shown(tmp_path, password):
    from click.testing import CliRunner

    from tuner.cli.app import main

    url = f"postgresql://u:{password}@127.0.0.1/x"
    given = CliRunner().invoke(main, search_args(tmp_path, storage=url))
    from_env = CliRunner().invoke(main, search_args(tmp_path), env={"TUNER_STORAGE": url})
    said = ("'postgresql://u:***@127.0.0.1/x' has a password that holds an unescaped '@' or "
            "'/': percent-encode them (@ is %40, / is %2F)")
    assert_one_line_error(given, said)
    assert given.stderr.startswith(f"Error: Invalid value for '--storage': {said} (see ")
    assert_one_line_error(from_env, said)
    assert from_env.stderr.startswith(f"Error: TUNER_STORAGE={said} (see ")
    for result in (given, from_env):  # nothing of the password, whole or in part
        assert result.stderr.count("***") == 1 and "@ss" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_redact_hides_a_password_up_to_the_last_at():
    from tuner.study.redact import redact, scrub

    url = "postgresql://u:ab@cd@127.0.0.1/t1"
    assert redact(url) == "postgresql://u:***@127.0.0.1/t1"
    assert scrub(f"cannot open {url}: no", url) == "cannot open postgresql://u:***@127.0.0.1/t1: no"
    assert redact("postgresql://u:s:e@h/db") == "postgresql://u:***@h/db"  # ':' may stay in one


def test_a_short_password_is_masked_where_it_stands_not_inside_every_word():
    from tuner.study.redact import scrub

    url = "postgresql://u:p@127.0.0.1:1/x"
    said = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    assert scrub(said, url) == said  # was '..., ***ort 1 failed'
    assert scrub('auth failed for u with "p" (p)', url) == 'auth failed for u with "***" (***)'
    assert scrub("dsn: user=u password=p host=h", url) == "dsn: user=u password=*** host=h"
    assert scrub("u:p@127.0.0.1", url) == "u:***@127.0.0.1"


# -- a study.db that fails while in use: one line with the database's own words and what next ----

KEPT = "trials.parquet beside it keeps what was measured (tuner show reads it)"


def damage(db: Path) -> None:
    """Zero two pages in the middle of a SQLite file, as a disk error or a crash of a copy
    would (dd if=/dev/zero bs=4096 count=2 seek=5 conv=notrunc)."""
    with db.open("r+b") as f:
        f.seek(5 * 4096)
        f.write(bytes(2 * 4096))


def test_a_damaged_study_db_is_one_line_with_the_databases_words_and_what_to_do(tmp_path):
    # Optuna said "StorageInternalError: An exception is raised during the commit. This
    # typically happens due to invalid data in the commit, e.g. exceeding max length." after
    # a traceback; SQLite's own words were in the chain of causes.
    folder = made(tmp_path)
    damage(folder / layout.DB_FILE)
    for args in (search_args(tmp_path), ["worker", "--study", STUDY, "--studies-dir",
                                         str(tmp_path), "--export-only"]):
        result = invoke(*args)
        assert_one_line_error(result, f"storage {folder.resolve() / layout.DB_FILE} failed "
                              "(database disk image is malformed)",
                              "restore study.db from a copy and run the same command again",
                              KEPT)
        assert "StorageInternalError" not in result.stderr and "commit" not in result.stderr


def test_a_study_db_that_is_not_a_database_says_to_restore_it(tmp_path):
    folder = made(tmp_path)
    (folder / layout.DB_FILE).write_bytes(b"not sqlite at all " * 100)
    result = invoke(*search_args(tmp_path))
    assert_one_line_error(result, "file is not a database",
                          "restore study.db from a copy and run the same command again", KEPT)


def test_a_storage_given_as_another_file_says_so_and_never_to_restore_it(tmp_path):
    folder = made(tmp_path)
    parquet = folder / layout.TRIALS_FILE
    before = parquet.read_bytes()
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    told = {parquet: "trials.parquet is a Parquet file", text: "notes.txt is not an SQLite database"}
    for file, said in told.items():
        for args in (search_args(tmp_path, storage=f"sqlite:///{file}"),
                     ["worker", "--study", STUDY, "--studies-dir", str(tmp_path),
                      "--storage", f"sqlite:///{file}"]):
            result = invoke(*args)
            assert_one_line_error(result, "file is not a database", said,
                                  "not a study's storage: point --storage at the study's study.db")
            assert "restore" not in result.stderr  # the file is fine: it is the wrong one
    assert parquet.read_bytes() == before


def test_another_applications_sqlite_database_is_refused_and_left_as_it_is(tmp_path):
    # A search given an app's database (a mistyped path) added Optuna's 13 tables to it.
    import sqlite3

    app = tmp_path / "other_app.db"
    with contextlib.closing(sqlite3.connect(app)) as db:
        db.executescript("CREATE TABLE users (id INTEGER); CREATE TABLE orders (id INTEGER);")
    before = app.read_bytes()
    result = invoke(*search_args(tmp_path / "studies", storage=f"sqlite:///{app}"))
    assert_one_line_error(result, f"--storage sqlite:///{app} is a SQLite database of something "
                          "else (tables orders, users), with no Optuna study in it",
                          "name a new file (sqlite:///path/to/study.db)")
    assert app.read_bytes() == before and not (tmp_path / "studies").exists()
    # A study's own database, and one that another study shares, are opened as before.
    shared = made(tmp_path / "shared") / layout.DB_FILE
    result = invoke(*search_args(tmp_path / "shared", storage=f"sqlite:///{shared}", name="b"))
    assert result.exit_code == 0, result.output


def failing_write(monkeypatch, said: str) -> None:
    """The search's next store of a trial fails in SQLite as Optuna raises it: the database's
    own error, in SQLAlchemy's, in Optuna's StorageInternalError."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from tuner.study import search

    def store(*args, **kwargs):
        try:
            try:
                raise sqlite3.OperationalError(said)
            except sqlite3.OperationalError as exc:
                raise OperationalError("INSERT INTO trial_values ...", (), exc) from exc
        except OperationalError as exc:
            raise optuna.exceptions.StorageInternalError(
                "An exception is raised during the commit. This typically happens due to "
                "invalid data in the commit, e.g. exceeding max length. ") from exc

    monkeypatch.setattr(search, "store_result", store)


@pytest.mark.parametrize("said, words", [
    ("database or disk is full", ["free disk space and the same command resumes", KEPT]),
    ("attempt to write a readonly database",
     ["make study.db and its folder writable", "copy the study folder into a writable folder",
      "the same command then resumes", KEPT]),
    ("disk I/O error", ["once it works again, run the same command again"]),
], ids=["full", "read-only", "other"])
def test_a_study_db_that_fails_mid_search_is_one_line_with_why_and_what_next(
        tmp_path, monkeypatch, said, words):
    folder = made(tmp_path, trials="2")  # 2 of its 4 configs: the resume stores more
    failing_write(monkeypatch, said)
    result = invoke(*search_args(tmp_path, "-q"))
    assert_one_line_error(result, f"storage {folder.resolve() / layout.DB_FILE} failed ({said})",
                          *words)


def test_a_full_disk_while_writing_the_files_names_the_file_and_what_next(tmp_path,
                                                                           monkeypatch):
    # It said "Error: Error writing bytes to file. Detail: [errno 28] No space left on device".
    from tuner.data import files

    folder = made(tmp_path, trials="2")

    def full(table, where, **kwargs):
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(files.atomic.pq, "write_table", full)
    result = invoke(*search_args(tmp_path, "-q"))
    assert_one_line_error(result, f"cannot write {folder / layout.TRIALS_FILE}: No space left on "
                          "device; study.db holds every trial, so once you free disk space the "
                          "same command writes the file again")
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_fleet_worker_whose_storage_fails_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    import io
    import sys

    from tuner.cli import fleet_worker, measure
    from tuner.fake import FakeRunner
    from tuner.launch import runner as runners
    from tuner.launch.runner import LaunchSettings
    from tuner.study import fleet
    from tuner.study.storage import errors

    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_storage(url)

    def run_worker(*args, **kwargs):
        import sqlite3

        from sqlalchemy.exc import OperationalError

        try:
            raise OperationalError("COMMIT", (), sqlite3.OperationalError(
                "database or disk is full"))
        except OperationalError as exc:
            raise optuna.exceptions.StorageInternalError("An exception is raised during "
                                                         "the commit.") from exc

    monkeypatch.setattr(measure, "run_worker", run_worker)
    monkeypatch.setattr(runners, "make_runner", lambda settings, shared=None: FakeRunner())
    monkeypatch.setattr(sys, "stdin", io.StringIO(fleet.GO))  # the study is ready
    plan = fleet.Fleet(fleet.plan_of("w", tmp_path, LaunchSettings(60), 0, None, None, False,
                                     "resnet18"), [0]).plan(0, 0)
    assert fleet_worker.main([plan.to_json()]) == 1
    err = capsys.readouterr().err
    assert err == f"Error: storage {tmp_path / 'study.db'} failed (database or disk is full): " \
        "free disk space and the same command resumes\n"
    assert errors._last_opened == url


# -- the folder renamed, or not writable: what to do with the study that is there ----------------

def test_a_search_in_a_renamed_study_folder_gets_the_name_to_give_it_back(tmp_path):
    # It said "its study.db has no study 'renamed' ... restore study.db", though study.db was
    # there, holding the study of the folder's old name.
    folder = made(tmp_path / "studies")
    renamed = tmp_path / "studies" / "renamed"
    folder.rename(renamed)
    before = fingerprint(renamed)
    result = invoke(*search_args(tmp_path / "studies", name="renamed"))
    assert_one_line_error(result, f"{renamed} holds study '{STUDY}', not 'renamed'",
                          f"rename the folder back to {STUDY}")
    assert "restore study.db" not in result.stderr
    assert fingerprint(renamed) == before


def test_a_study_folder_that_cannot_be_written_says_to_copy_it_not_to_start_anew(
        tmp_path, monkeypatch):
    # "pass --studies-dir to a writable folder" started a new study there, from nothing. Root
    # writes into read-only folders, so the folder's write test fails here as it would there.
    import tempfile

    from tuner.study.storage import folder as study_folder

    folder = made(tmp_path / "studies")

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(study_folder.tempfile, "NamedTemporaryFile", read_only)
    result = invoke(*search_args(tmp_path / "studies"))
    assert_one_line_error(result, f"cannot write to {folder}: Permission denied; copy the folder "
                          f"{STUDY}/ into a writable folder first and pass that as --studies-dir",
                          "another --studies-dir starts a new study")
    # A new study has nothing to copy: any writable --studies-dir does.
    result = invoke(*search_args(tmp_path / "new"))
    assert_one_line_error(result, "Permission denied; pass --studies-dir to a writable folder")
    monkeypatch.setattr(study_folder.tempfile, "NamedTemporaryFile", tempfile.NamedTemporaryFile)
