"""Every path under ``studies/<name>/``, in one place.

::

    studies/<name>/
      study.db                 the Optuna storage (unless --storage names another)
      trials.parquet           every trial, failures included
      pareto.parquet           the Pareto-optimal trials of each batch size
      trials/<n>/              trial n's request, record and log
      trials/<n>/repeat-<k>/   the k-th re-measurement of finalist n
      cache/<n>/               trial n's inductor and Triton caches (kept for finalists)
      cache/                   the one shared cache of a --warm-cache study
      artifacts/<config>.bin   a finalist's saved compile artifacts
      references/<key>.pt      eager FLOPs, time and float32 output of one batch size and
                               precision, kept for the next trials (tuner.trial.reference)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
from pathlib import Path

from tuner.errors import UserError

STUDIES_DIR = Path("studies")  # where studies are kept unless --studies-dir says
DB_FILE = "study.db"
TRIALS_FILE = "trials.parquet"
PARETO_FILE = "pareto.parquet"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def check_name(name: str) -> str:
    """A study name is one folder name: letters, digits, ``_``, ``.`` and ``-``."""
    if not name or not _NAME.fullmatch(name) or name in (".", ".."):
        raise UserError(f"study name {name!r} is not a folder name: use letters, digits, "
                        "'_', '.' and '-' (e.g. --name resnet50-h200)")
    if name.startswith("-"):  # `tuner show -x` would read it as an option
        raise UserError(f"study name {name!r} starts with '-', which the commands read as an "
                        "option: start it with a letter or digit (e.g. --name resnet50-h200)")
    return name


# A file name's bytes on Linux file systems are at most 255, and the artifacts are written through
# a temporary name with about 15 more: a longer key's name keeps its start and its hash.
_ARTIFACTS_NAME_MAX = 200


def artifacts_relative(config_key: str) -> str:
    """Where a study keeps a config's compile artifacts, relative to the study folder: the
    config's key with anything but ``[A-Za-z0-9_.-]`` made ``_``; a key too long for a file
    name (a config of many options) keeps its first characters and a hash of the whole key."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", config_key).strip("_")
    if len(name) + len(".bin") > _ARTIFACTS_NAME_MAX:
        digest = hashlib.sha256(config_key.encode()).hexdigest()[:16]
        name = f"{name[:_ARTIFACTS_NAME_MAX - len(digest) - len('-.bin')]}-{digest}"
    return f"artifacts/{name}.bin"


@dataclasses.dataclass(frozen=True)
class StudyLayout:
    """The folder of one study and the files in it."""

    directory: Path

    @classmethod
    def of(cls, root: Path | str, name: str) -> StudyLayout:
        return cls(Path(root) / check_name(name))

    @property
    def db(self) -> Path:
        return self.directory / DB_FILE

    @property
    def sqlite_url(self) -> str:
        """The embedded default storage of the study."""
        return f"sqlite:///{self.db.resolve()}"

    @property
    def trials_file(self) -> Path:
        return self.directory / TRIALS_FILE

    @property
    def pareto_file(self) -> Path:
        return self.directory / PARETO_FILE

    def results(self) -> list[str]:
        """What the folder holds of a study's results (its Parquet files, its trials' records):
        a new study started here would overwrite them."""
        found: list[str] = []
        with contextlib.suppress(OSError):  # unreadable: writing there fails first
            found = [p.name for p in (self.trials_file, self.pareto_file) if p.is_file()]
            trials = self.directory / "trials"
            if trials.is_dir() and any(trials.iterdir()):
                found.append("trials/")
        return found

    def trial_dir(self, number: int) -> Path:
        return self.directory / "trials" / str(number)

    def repeat_dir(self, number: int, repeat: int) -> Path:
        return self.trial_dir(number) / f"repeat-{repeat}"

    @property
    def cache_root(self) -> Path:
        return self.directory / "cache"

    def trial_cache(self, number: int) -> Path:
        return self.cache_root / str(number)

    def artifacts_file(self, config_key: str) -> Path:
        return self.directory / artifacts_relative(config_key)

    @property
    def references_dir(self) -> Path:
        """Where trials keep and find eager references (each file named by the trial:
        :func:`tuner.trial.reference.key`)."""
        return self.directory / "references"
