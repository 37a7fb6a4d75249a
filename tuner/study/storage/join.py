"""Joining an existing study (a worker, ``tuner confirm``): its spec read from the storage, and
why a storage holds no such study (a mistyped name or URL, a renamed folder)."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import optuna

from tuner.domain.layout import STUDIES_DIR, StudyLayout
from tuner.domain.naming import OptionDefaults
from tuner.domain.records import TrialProtocol
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.study.redact import redact
from tuner.study.spec import StudySpec
from tuner.study.storage.attrs import (
    OPTION_DEFAULTS_ATTR,
    PROTOCOL_ATTR,
    SPACE_ATTR,
    WORKLOAD_ATTR,
)
from tuner.study.storage.engine import make_storage, with_driver
from tuner.study.storage.errors import cannot_open
from tuner.study.storage.sqlite_file import sqlite_file


def join_spec(name: str, storage: str | None, root: Path = STUDIES_DIR,
              argument: str = "--study", **run: Any) -> StudySpec:
    """The spec of an existing study, read from its storage, for a worker that joins it from
    this host or another; ``run`` holds this run's own fields (n_trials, budget_s, seed).
    ``argument``: how the command was given the study's name, for the errors."""
    from sqlalchemy.exc import SQLAlchemyError

    layout = StudyLayout.of(root, name)
    url = storage or layout.sqlite_url
    if storage is None and not layout.db.exists():
        if found := layout.results():  # a study folder copied without its study.db, say
            raise UserError(f"{layout.directory} holds a study's results ({', '.join(found)}) "
                            f"but no {layout.db.name}, the Optuna storage this command needs: "
                            "copy it along, or pass --storage with the URL the study lives in")
        raise UserError(f"no study {name!r} under {root}: start it with `tuner search`, or pass "
                        "--storage with the URL of the storage it lives in")
    if storage is not None and (named := sqlite_file(storage)) is not None \
            and not named.exists() and named.parent.is_dir():
        # Opening it would make an empty database file, left behind by a mistyped name (in a
        # folder that is not there, opening it fails and says so).
        raise UserError(f"no study {name!r}: --storage {redact(storage)} names a SQLite file "
                        "that does not exist; check the path")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            if not _has_schema(url):
                raise _no_schema(name, storage, layout)
            opened = make_storage(url, given=storage is not None)
            study = optuna.load_study(study_name=name, storage=opened)
            attrs = _defining_attrs(study)
    except KeyError:
        raise _no_such_study(name, storage, layout, opened, argument) from None
    except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
        raise cannot_open(url, exc, storage is not None) from None
    if attrs is None:
        raise UserError(f"study {name!r} in {redact(url)} was not made by tuner (no workload, "
                        "search space or trial protocol stored with it)")
    return StudySpec(name=name, workload=Workload.from_dict(attrs[WORKLOAD_ATTR]),
                     space=SearchSpace.from_dict(attrs[SPACE_ATTR]),
                     protocol=TrialProtocol.from_dict(attrs[PROTOCOL_ATTR]),
                     option_defaults=_option_defaults(attrs.get(OPTION_DEFAULTS_ATTR)),
                     root=root, storage=storage, **run)


def _option_defaults(stored: Any) -> OptionDefaults | None:
    """The study's stored option defaults (a study made before tuner 0.3.0 has none)."""
    return OptionDefaults.from_dict(stored) if isinstance(stored, dict) else None


def _has_schema(url: str) -> bool:
    """Whether the database ``url`` names holds Optuna's tables. Opening a storage creates
    them, so a worker joining a mistyped database would leave 13 tables in it; this looks on a
    short-lived engine of its own and writes nothing."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(with_driver(url))
    try:
        inspector = sqlalchemy.inspect(engine)
        return inspector.has_table("studies") or inspector.has_table("alembic_version")
    finally:
        engine.dispose()


def _no_schema(name: str, storage: str | None, layout: StudyLayout) -> UserError:
    """A database with no Optuna tables: a mistyped --storage, most likely."""
    if storage is None:
        return UserError(f"no study {name!r}: {layout.db} holds no tuner study at all; start "
                         f"it with `tuner search --name {name}`")
    return UserError(f"no study {name!r}: --storage {redact(storage)} holds no tuner study at "
                     "all (no Optuna tables); check the database name in the URL")


# A search creates its study, then stores the attributes that define it one write at a time; a
# worker that finds some missing waits up to JOIN_WAIT_S for the rest, reading again every
# JOIN_POLL_S, before it says the study was not made by tuner.
JOIN_WAIT_S = 5.0
JOIN_POLL_S = 0.1


def _defining_attrs(study: optuna.Study) -> dict[str, Any] | None:
    """The study's user attributes once its workload, space and protocol are all stored; None
    where they are not after JOIN_WAIT_S. A spec built from some of them would be wrong (a
    default protocol for the one not stored yet) and refused later as another study's."""
    deadline = time.monotonic() + JOIN_WAIT_S
    while True:
        attrs = study.user_attrs
        if all(a in attrs for a in (WORKLOAD_ATTR, SPACE_ATTR, PROTOCOL_ATTR)):
            return attrs
        if time.monotonic() >= deadline:
            return None
        time.sleep(JOIN_POLL_S)


def _no_such_study(name: str, storage: str | None, layout: StudyLayout,
                   opened: optuna.storages.BaseStorage, argument: str) -> UserError:
    """Why the storage holds no study ``name``, naming ``argument``; a study folder renamed
    since (its study.db holds one study, of another name) gets the name to give it back."""
    if storage is None and (renamed := renamed_folder(layout, opened, name)):
        return renamed
    held = _held(opened)
    where = layout.db if storage is None else redact(storage)
    there = f" (it holds {', '.join(map(repr, held[:5]))})" if held else ""
    return UserError(f"no study {name!r} in {where}{there}: check {argument}, or start it with "
                     f"`tuner search --name {name}{' --storage ...' if storage else ''}`")


def _held(opened: optuna.storages.BaseStorage) -> list[str]:
    """The names of the tuner studies in a storage (not the per-batch-size studies,
    ``<name>:bs<N>``)."""
    return [s.study_name for s in opened.get_all_studies() if ":" not in s.study_name]


def renamed_folder(layout: StudyLayout, opened: optuna.storages.BaseStorage,
                   name: str) -> UserError | None:
    """A study folder renamed since its study was made: its study.db (``opened``) holds one
    study, of another name than ``name``, the folder's, and the folder's trials.parquet (if
    any) is of that study too, not of ``name`` (another study's study.db copied in). The error
    says which, and to rename the folder back; None otherwise."""
    held = _held(opened)
    if len(held) != 1 or held[0] == name or _files_study(layout) not in (None, held[0]):
        return None
    return UserError(f"{layout.directory} holds study {held[0]!r}, not {name!r}: a study is "
                     f"found by its folder's name, so rename the folder back to {held[0]}")


def _files_study(layout: StudyLayout) -> str | None:
    """The study named in the metadata of the folder's trials.parquet; None where there is no
    such file, or it cannot be read."""
    import json

    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(layout.trials_file).metadata or {}).get(b"tuner.study")
        return None if raw is None else str(json.loads(raw))
    except (OSError, ValueError):
        return None
