"""The Python API as a type checker and an editor see it: mypy knows ``tuner.recommend``'s
and ``tuner.compare``'s signatures through the lazy ``import tuner``, and tab completion offers
the public names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tuner
from tests.support import ROOT

USER_SCRIPT = """\
import torch

import tuner

rec = tuner.recommend("studies/x", batch_size={batch_size})
model = rec.apply(torch.nn.Linear(4, 4))
print(rec.config.label, tuner.UserError, tuner.Constraints, tuner.MismatchWarning)
print(tuner.compare(["studies/x", "studies/y"]).batch_sizes)
"""
# The tuner package is read (its own errors silenced: the check is of the user's script); the
# big libraries under it are not, which keeps a cold run at seconds instead of a minute.
MYPY_CONFIG = """\
[mypy]
follow_imports = silent

[mypy-torch.*,torchvision.*,numpy.*,pandas.*,pyarrow.*,optuna.*,matplotlib.*,sqlalchemy.*,click.*]
follow_imports = skip
ignore_missing_imports = True
"""


def mypy(tmp_path: Path, batch_size: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "serve.py"
    script.write_text(USER_SCRIPT.format(batch_size=batch_size))
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
         "--cache-dir", str(tmp_path / "cache"), str(script)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_mypy_accepts_a_script_that_calls_the_public_api(tmp_path):
    checked = mypy(tmp_path, "32")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_mypy_rejects_a_wrong_argument_type(tmp_path):
    checked = mypy(tmp_path, '"32"')
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert 'Argument "batch_size" to "recommend" has incompatible type "str"' in checked.stdout


def test_the_public_names_are_listed_and_importable():
    assert {"recommend", "Recommendation", "Constraints", "MismatchWarning", "UserError",
            "compare"} <= set(dir(tuner))
    from tuner import Constraints, MismatchWarning, UserError, compare, recommend  # noqa: F401
