"""A storage that cannot be opened, or that fails while in use, as one line: where, why in a few
words, its password masked, and what to do where the file itself is the trouble."""

from __future__ import annotations

import optuna

from tuner.domain.layout import DB_FILE, TRIALS_FILE
from tuner.errors import UserError
from tuner.study.redact import redact, scrub
from tuner.study.storage.sqlite_file import sqlite_file, sqlite_header, starts_with

# The storage this process opened last, for :func:`storage_failure` to name: Optuna's error,
# raised deep inside it long after the storage was opened, names none. A command opens one
# study's storage, so the last one opened is the one that failed.
_last_opened: str | None = None


def note_opened(url: str) -> None:
    """Remember ``url`` as the storage this process opened last
    (:func:`tuner.study.storage.engine.make_storage` tells each one)."""
    global _last_opened
    _last_opened = url


def cannot_open(url: str, exc: Exception, given: bool = True) -> UserError:
    """One line, no secret: where (--storage, when the user gave the URL), the URL with its
    password masked, why in a few words rather than the driver's paragraph, and what to do
    where the file itself is the trouble (damaged, full, read-only)."""
    where = "--storage" if given else "storage"
    cause = scrub(_cause(url, exc), url)
    step = _next_step(url, cause)
    return UserError(f"cannot open {where} {redact(url)}: {cause}{f'; {step}' if step else ''}")


def storage_failure(exc: BaseException) -> UserError | None:
    """A storage that failed while in use, as one line; None where ``exc`` is not that. Optuna
    raises StorageInternalError "An exception is raised during the commit. This typically
    happens due to invalid data in the commit, e.g. exceeding max length." for whatever the
    database said (a damaged file, a full disk, a read-only file): the driver's own words are
    in the chain of causes, SQLAlchemy's error holding them as ``orig``. The line has those
    words, the storage (:data:`_last_opened`, its password masked) and what to do next."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    kinds = (optuna.exceptions.StorageInternalError, SQLAlchemyError, sqlite3.Error)
    if not any(isinstance(e, kinds) for e in chain):
        return None
    driver: BaseException = \
        next((e.orig for e in chain if isinstance(e, DBAPIError) and e.orig is not None), None) \
        or next((e for e in chain if isinstance(e, sqlite3.Error)), None) \
        or next((e for e in chain if isinstance(e, SQLAlchemyError)), exc)
    text = str(driver)
    reason = " ".join(next((line for line in text.splitlines() if line.strip()),
                           type(driver).__name__).split())
    url = _last_opened
    if url is None:
        return UserError(f"the study's storage failed ({reason}): once it works again, run "
                         "the same command again")
    reason = scrub(reason, url)
    file = sqlite_file(url)
    step = _next_step(url, reason) or "once it works again, run the same command again"
    return UserError(f"storage {file or redact(url)} failed ({reason}): {step}")


def _next_step(url: str, reason: str) -> str | None:
    """What to do about a storage whose database said ``reason``, where that is the file
    (damaged, full disk, read-only), else None. What the study measured is in its
    trials.parquet too, written after the trials, which ``tuner show`` reads without the
    storage; the storage holds every trial, so a resumed search or worker rewrites the file."""
    said = reason.lower()
    file = sqlite_file(url)
    kept = f"; {TRIALS_FILE} beside it keeps what was measured (tuner show reads it)" \
        if file is not None and (file.parent / TRIALS_FILE).is_file() else ""
    what = "it" if file is None else file.name
    # SQLite's own words (SQLITE_CORRUPT, SQLITE_NOTADB), never ours: "not a database URL".
    if file is not None and "file is not a database" in said and not sqlite_header(file) \
            and (file.name != DB_FILE or starts_with(file, b"PAR1")):
        # Not a damaged study.db but another file given as --storage (a trials.parquet, say):
        # never "restore" it from a copy.
        kind = "a Parquet file" if starts_with(file, b"PAR1") else "not an SQLite database"
        return (f"{file.name} is {kind}, not a study's storage: point --storage at the "
                f"study's {DB_FILE} (sqlite:///path/to/{DB_FILE}), or leave --storage out to "
                f"use the study folder's")
    if any(word in said for word in ("malformed", "file is not a database", "encrypted")):
        return f"the file is damaged: restore {what} from a copy and run the same command " \
               f"again{kept}"
    if any(word in said for word in ("disk is full", "no space left")):
        return f"free disk space and the same command resumes{kept}"
    if file is not None and "readonly" in said:
        return (f"make {what} and its folder writable (chmod u+w; chattr -i), or copy the study "
                "folder into a writable folder and pass that as --studies-dir; the same "
                f"command then resumes{kept}")
    return None


def _cause(url: str, exc: Exception) -> str:
    """Why ``url`` could not be opened, in a few words: what SQLAlchemy, optuna and the drivers
    say is a paragraph (a plugin path, "install appropriate one", a link)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    if isinstance(exc, NoSuchModuleError):
        return (f"unknown kind of database {url.partition(':')[0].partition('+')[0]!r} "
                "(e.g. postgresql://user@host/db or sqlite:///path/study.db)")
    if isinstance(exc, ArgumentError):
        return "not a database URL (e.g. postgresql://user@host/db or sqlite:///path/study.db)"
    if isinstance(exc, NoDriver):
        return ("no PostgreSQL driver is installed: pip install 'tuner[postgres]' (or "
                "psycopg2-binary)")
    if isinstance(exc, ImportError):  # optuna's, over the driver's own ModuleNotFoundError
        missing = getattr(exc.__cause__, "name", None) or getattr(exc, "name", None)
        return f"its driver{f' {missing!r}' if missing else ''} is not installed"
    if isinstance(exc, ValueError):
        try:
            make_url(url)
        except ValueError:  # int() of its port
            return "its port is not a number"
    text = str(getattr(exc, "orig", None) or exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return " ".join(first.split())


class NoDriver(ImportError):
    """Neither PostgreSQL driver SQLAlchemy reads a plain ``postgresql://`` URL with is
    installed."""
