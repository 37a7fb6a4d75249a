"""A study file written atomically: staged under a temporary name, fsynced and renamed, with
the tuner's metadata; both files of a study renamed together; what killed writes left removed."""

from __future__ import annotations

import errno
import glob
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from tuner.data.files.arrow import to_table
from tuner.data.files.metadata import fingerprints, peaks
from tuner.data.schema import SCHEMA_VERSION
from tuner.data.select import pareto
from tuner.domain.layout import StudyLayout
from tuner.errors import UserError
from tuner.files import readable_mode


def write(df: pd.DataFrame, path: Path, metadata: dict[str, Any]) -> None:
    """Atomically write ``df`` with the tuner's metadata (JSON values under ``tuner.*`` keys);
    first remove what killed writes of ``path`` left (:func:`remove_stale_temps`). A file that
    cannot be written (a full disk, a read-only file) is a one-line :class:`UserError` naming
    it; ``metadata["storage"]``, where given, is named as what holds every trial."""
    _Staged(df, Path(path), metadata).commit()


class _Staged:
    """A file of :func:`write` on disk under a temporary name beside ``path``, fsynced, until
    :meth:`commit` renames it over ``path`` (or :meth:`discard` removes it): several files
    staged first and renamed together change within microseconds of each other, not one
    Parquet write apart."""

    def __init__(self, df: pd.DataFrame, path: Path, metadata: dict[str, Any]) -> None:
        table = to_table(df)
        meta = dict(table.schema.metadata or {})
        meta.update({f"tuner.{k}".encode(): json.dumps(v, default=_plain).encode()
                     for k, v in metadata.items()})
        meta[b"tuner.schema_version"] = str(SCHEMA_VERSION).encode()
        table = table.replace_schema_metadata(meta)
        self.path, self.storage = path, metadata.get("storage")
        remove_stale_temps(path)
        fd, self.tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, readable_mode())
            pq.write_table(table, self.tmp)
            # On disk before the rename, as tuner.files.write_bytes_atomic does: else a crash of
            # the machine soon after could leave the new name on an empty or partial file.
            os.fsync(fd)
        except OSError as exc:
            self.discard()
            raise _cannot_write(path, exc, self.storage) from exc
        except BaseException:
            self.discard()
            raise
        finally:
            os.close(fd)

    def commit(self) -> None:
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise _cannot_write(self.path, exc, self.storage) from exc
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        Path(self.tmp).unlink(missing_ok=True)


# A temporary file of write() older than this is a leftover of a process killed while writing
# it (SIGKILL, a lost machine: its cleanup never ran), never one being written: a writer makes
# it just before writing, writes it in one go and renames it at once (a search's whole time
# per trial, this write included, stayed under a second up to 1,500 trials, as
# benchmarks/study_growth.py measures it), and its mtime moves with every write. Minutes, not
# seconds, so that a writer stalled on a slow or shared disk, or a clock a little off between
# the hosts sharing a folder, keeps its file.
STALE_TEMP_S = 15 * 60


def remove_stale_temps(path: Path) -> None:
    """Remove what :func:`write` left of ``path`` in a process killed while writing it
    (``.<name>.<random>.tmp`` beside it), older than :data:`STALE_TEMP_S`. Best effort: a
    file another process removes first, or one this one may not remove, is left to it."""
    now = time.time()
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            if now - leftover.stat().st_mtime > STALE_TEMP_S:
                leftover.unlink()
        except OSError:
            pass


def _cannot_write(path: Path, exc: OSError, storage: str | None) -> UserError:
    """One line for a study file that could not be written: the file itself (not the temporary
    one, gone by now, that an error of the rename names), why, and what to do. pyarrow's own
    error names no file and hides errno in its text ("Error writing bytes to file. Detail:
    [errno 28] No space left on device")."""
    text = str(exc)
    full = exc.errno == errno.ENOSPC or f"[errno {errno.ENOSPC}]" in text.lower()
    why = os.strerror(errno.ENOSPC) if full else (exc.strerror or " ".join(text.split()))
    held = f"{storage or 'the study storage'} holds every trial"
    if full:
        return UserError(f"cannot write {path}: {why}; {held}, so once you free disk space the "
                         "same command writes the file again")
    return UserError(f"cannot write {path}: {why}; {held}: make {path.name} and its folder "
                     "writable (chmod u+w; chattr -i) and the same command writes the file "
                     "again")


def export(study: StudyLayout | Path, trials: pd.DataFrame,
           metadata: dict[str, Any]) -> pd.DataFrame:
    """Write both files of a study (its layout, or its folder): every trial, and the Pareto set
    of each batch size, which it returns."""
    layout = study if isinstance(study, StudyLayout) else StudyLayout(Path(study))
    front = pareto(trials)
    meta = {**metadata, "fingerprints": fingerprints(trials), "peak_tflops": peaks(trials)}
    # Both written before either is renamed: a search killed (or a disk filled) while writing
    # them leaves the two files of one moment, never trials ahead of the front.
    staged = [_Staged(trials, layout.trials_file, meta)]
    try:
        staged.append(_Staged(front, layout.pareto_file, meta))
        for file in staged:
            file.commit()
    finally:
        for file in staged:
            file.discard()  # nothing left where committed; a temporary file where not
    return front


def _plain(value: Any) -> Any:
    """JSON fallback for numpy scalars that pandas hands back."""
    return value.item() if hasattr(value, "item") else str(value)

