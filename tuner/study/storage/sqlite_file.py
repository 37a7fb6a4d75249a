"""What a SQLite storage URL names on disk: the file, whether it is there yet, whether it is a
SQLite database, and refusing one that belongs to another application."""

from __future__ import annotations

import contextlib
from pathlib import Path

from tuner.errors import UserError
from tuner.study.redact import redact

# Optuna's tables (those of its RDB storage, and alembic's): a file holding any of them is a
# study's storage, or one being made by another process at this moment.
OPTUNA_TABLES = frozenset({
    "studies", "version_info", "study_directions", "study_user_attributes",
    "study_system_attributes", "trials", "trial_user_attributes", "trial_system_attributes",
    "trial_params", "trial_values", "trial_intermediate_values", "trial_heartbeats",
    "alembic_version"})


def refuse_another_apps_sqlite(url: str) -> None:
    """A --storage that names an existing SQLite file holding tables, none of them Optuna's (an
    application's database, a mistyped path): opening it would add Optuna's 13 tables to that
    file, so refuse before anything is written."""
    file = sqlite_file(url)
    if file is None or not file.is_file() or not sqlite_header(file):
        return  # a new file, or not a database at all: opening it says so
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro",
                                                uri=True)) as db:
            tables = sorted(row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite%'"))
    except sqlite3.Error:
        return  # damaged, locked: opening it says why
    if tables and not OPTUNA_TABLES.intersection(tables):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise UserError(f"--storage {redact(url)} is a SQLite database of something else "
                        f"(tables {shown}), with no Optuna study in it: tuner would add its "
                        "tables to it; name a new file (sqlite:///path/to/study.db) or a "
                        "study's own")


def new_sqlite_file(url: str) -> bool:
    """Whether ``url`` names a SQLite file that does not exist yet (opening it would make it)."""
    path = sqlite_file(url)
    return path is not None and not path.exists()


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite ``url`` names; None for another database, or one in memory."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - opening it says what is wrong with it
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return Path(database)


def sqlite_header(file: Path) -> bool:
    """Whether ``file`` begins as every SQLite 3 database does (its damage is past the header)."""
    return starts_with(file, b"SQLite format 3\x00")


def starts_with(file: Path, magic: bytes) -> bool:
    try:
        with file.open("rb") as handle:
            return handle.read(len(magic)) == magic
    except OSError:
        return False
