from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tuner.fake.runner import FAKE_OFFERED_ENV, offered

ROOT = Path(__file__).resolve().parents[1]
# Workers import `tests.support.models` by name: make the repo root importable in their processes
# too.
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
# pytest-xdist's workers run with COLUMNS=80 (the controller's terminal width): the tests read
# output as a pipe gets it (COLUMNS unset: 120 columns), and a test that wants a width sets it.
os.environ.pop("COLUMNS", None)
# What the installed torch offers, found once here: the fake commands the tests start in their own
# processes read it instead of importing torchvision, dynamo and inductor each (tuner.fake).
if FAKE_OFFERED_ENV not in os.environ:
    os.environ[FAKE_OFFERED_ENV] = offered()


@pytest.fixture
def fake_cli(monkeypatch):
    """The command line, in this process and the fleet workers it starts, with FakeRunner behind
    it (tuner.fake.install), for one test; TUNER_TEST_FAKE_DELAY_S sets each fake trial's
    seconds."""
    from tuner import fake

    fake.install(setattr=monkeypatch.setattr)


@pytest.fixture(scope="module")
def fake_cli_for_module():
    """:func:`fake_cli` for a module-scoped fixture. Every test of that module then runs with
    the fake: use it only in a module whose tests all do."""
    from tuner import fake

    with pytest.MonkeyPatch.context() as patch:
        fake.install(setattr=patch.setattr)
        yield


@pytest.fixture
def postgres_study():
    """A study name no other test run uses on the PostgreSQL server of tests/support/postgres.py
    (skipped with its reason where there is none); the study is deleted afterwards."""
    import uuid

    import optuna

    from tests.support.postgres import REASON, URL
    from tuner.study.storage import make_storage

    if REASON is not None:
        pytest.skip(REASON)
    study = f"tuner-test-{uuid.uuid4().hex[:12]}"
    yield study
    try:
        optuna.delete_study(study_name=study, storage=make_storage(URL))
    except KeyError:
        pass
