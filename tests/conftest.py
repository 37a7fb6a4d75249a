from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Workers import `tests.models` by name: make the repo root importable in their processes too.
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="module")
def fake_cli():
    """The command line, in this process and the fleet workers it starts, with FakeRunner behind
    it (tests.fakes.install); TUNER_TEST_FAKE_DELAY_S sets each fake trial's seconds."""
    from tests import fakes

    with pytest.MonkeyPatch.context() as patch:
        fakes.install(setattr=patch.setattr)
        yield
