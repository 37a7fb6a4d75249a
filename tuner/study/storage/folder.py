"""The study folder: made before its storage is opened (and removed again where opening fails),
and refused where a new study would overwrite the results of another one held there."""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from collections.abc import Iterator
from typing import cast

import optuna

from tuner.errors import UserError
from tuner.study.redact import redact
from tuner.study.spec import StudySpec
from tuner.study.storage.join import renamed_folder
from tuner.study.storage.sqlite_file import new_sqlite_file


@contextlib.contextmanager
def making_folder(spec: StudySpec) -> Iterator[None]:
    """Around opening the study's storage: first refuse a folder whose results the new study
    would overwrite, then make the folder; where opening fails, remove the folders this made
    (those still empty), so a storage that cannot be opened leaves nothing behind."""
    refuse_new_study_over_results(spec, None)
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


def refuse_new_study_over_results(spec: StudySpec,
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
    elif storage is None and not new_sqlite_file(cast(str, spec.storage)):
        return  # known once it is opened (a SQLite file not made yet holds no study)
    elif storage is not None and _holds(storage, spec.name):
        return
    elif spec.storage is None:
        if storage is not None and (renamed := renamed_folder(spec.layout, storage, spec.name)):
            raise renamed
        lacks, fix = f"its study.db has no study {spec.name!r}", f"restore study.db, {other}"
    else:
        lacks = f"--storage {redact(spec.storage)} has no study {spec.name!r}"
        fix = ("pass the --storage it lives in"
               + (" (or none: the folder has a study.db)" if db else "") + f", {other}")
    raise UserError(f"{spec.directory} holds a study's results ({', '.join(found)}) but {lacks}, "
                    f"so a new study would overwrite them: {fix}")


def _holds(storage: optuna.storages.BaseStorage, name: str) -> bool:
    try:
        storage.get_study_id_from_name(name)
        return True
    except KeyError:
        return False


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
