"""Several hosts' worth of workers on one study in a real PostgreSQL server (fake runner): no trial
lost or measured twice, a killed worker's trial recovered, passwords kept out of every output.

Needs a server on 127.0.0.1:5432 (trust auth, database ``test``) or TUNER_TEST_POSTGRES_URL;
skips with the reason otherwise. Each test makes its own uniquely named study and deletes it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from tests.support import workers
from tests.support.postgres import PASSWORD, REASON, URL, with_password
from tuner.data import files
from tuner.domain import layout
from tuner.study.storage import OWNER_ATTR

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


def test_three_workers_on_one_postgres_study_measure_every_config_once(tmp_path, postgres_study):
    name = postgres_study
    spec = workers.create(tmp_path / "host-a", name, storage=URL)
    procs = [workers.start(spec, seed=i) for i in range(3)]
    for proc in procs:
        workers.finish(proc)
    measured = workers.assert_every_config_measured_once(spec)
    assert len({t.user_attrs[OWNER_ATTR]["pid"] for t in measured}) >= 2  # they shared the work

    # Another host exports the Parquet files from the storage into its own studies folder.
    elsewhere = dataclasses.replace(spec, root=tmp_path / "host-b")
    workers.finish(workers.start(elsewhere, "--export-only"))
    df, meta = files.read(tmp_path / "host-b" / name)
    assert sorted(df["config_key"]) == sorted(c.key for c in spec.space.configs())
    assert meta["storage"] == URL  # no password in this URL to hide


def test_a_killed_workers_trial_on_postgres_goes_stale_and_is_measured_again(tmp_path, postgres_study):
    name = postgres_study
    spec = workers.create(tmp_path, name, storage=URL, space=workers.SPACE_SMALL)
    workers.kill_one_worker_and_check_recovery(spec)


def tuner(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TUNER_STORAGE"}
    return subprocess.run([sys.executable, "-m", "tuner.fake", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def test_a_password_in_the_storage_url_reaches_no_output_log_or_file(tmp_path, postgres_study):
    name = postgres_study
    secret_url = with_password(URL)
    assert PASSWORD in secret_url
    search = tuner("search", "--model", "resnet18", "--device", "cpu",
                   "--backend", "eager,inductor", "--mode", "default", "--batch-sizes", "1",
                   "--name", name, "--storage", secret_url, "--trials", "1", "--json",
                   "--studies-dir", str(tmp_path / "a"), cwd=tmp_path)
    assert search.returncode == 0, search.stderr
    work = tuner("worker", "--study", name, "--storage", secret_url, "--json",
                 "--studies-dir", str(tmp_path / "b"), cwd=tmp_path)
    assert work.returncode == 0, work.stderr
    assert '"pareto"' in work.stdout
    for run in (search, work):
        assert PASSWORD not in run.stdout and PASSWORD not in run.stderr

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == layout.TRIALS_FILE for p in written)
    leaks = [str(p) for p in written if PASSWORD.encode() in p.read_bytes()]
    assert leaks == []
    _, meta = files.read(tmp_path / "b" / name)
    assert meta["storage"] == secret_url.replace(PASSWORD, "***")


@pytest.mark.parametrize("port", ["1", "notaport"])
def test_a_storage_that_cannot_be_opened_is_a_one_line_error_without_the_password(tmp_path, port):
    from sqlalchemy.engine import make_url

    host = make_url(URL).host
    bad = f"postgresql://postgres:{PASSWORD}@{host}:{port}/test"
    run = tuner("worker", "--study", "x", "--storage", bad, cwd=tmp_path)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith("Error: cannot open --storage postgresql://postgres:***@")
    assert run.stderr.count("\n") == 1 and PASSWORD not in run.stderr
