"""A study's storage gone, elsewhere or not to be opened: the search refuses in one line naming
the storage and why, before it changes anything, and leaves no folder behind."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import optuna
import pytest

from tests.test_bad_inputs import fingerprint, missing
from tests.test_cli import STUDY, assert_one_line_error, invoke, search_args
from tests.test_postgres import URL, with_password
from tuner.spec import layout
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
    from tests.fakes import FakeRunner
    from tests.test_study import make_spec
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
    assert_one_line_error(result, "the password holds an unescaped '@' or '/'", "%40")
    secret = url.split("postgres:", 1)[1].rsplit("@", 1)[0]
    after_first_at = secret.split("@", 1)[1]  # what was printed as the host
    for piece in (secret, after_first_at):
        assert piece not in result.stderr, (piece, result.stderr)


def test_redact_hides_a_password_up_to_the_last_at():
    from tuner.study.redact import redact, scrub

    url = "postgresql://u:ab@cd@127.0.0.1/t1"
    assert redact(url) == "postgresql://u:***@127.0.0.1/t1"
    assert scrub(f"cannot open {url}: no", url) == "cannot open postgresql://u:***@127.0.0.1/t1: no"
    assert redact("postgresql://u:s:e@h/db") == "postgresql://u:***@h/db"  # ':' may stay in one
