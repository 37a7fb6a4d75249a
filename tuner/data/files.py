"""The study's files: ``trials.parquet`` (every trial) and ``pareto.parquet`` (the best
trade-offs), written atomically with the tuner's metadata, read back from any schema version.

The fingerprint is on every row and in the file metadata, so studies from different machines
compare from their files alone. Files are written to a temporary name and renamed: a reader
never sees half a file.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tuner.data.derive import FROM_MEDIAN, derive
from tuner.data.schema import (
    COLUMNS,
    REQUIRED_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    is_option_column,
    kind_of,
)
from tuner.data.select import pareto, with_ranks
from tuner.errors import UserError
from tuner.files import NOT_UTF8, not_utf8, readable_mode
from tuner.domain.config import TrialConfig
from tuner.domain.layout import DB_FILE, PARETO_FILE, STUDIES_DIR, TRIALS_FILE, StudyLayout
from tuner.domain.records import FINGERPRINT_FIELDS


def to_table(df: pd.DataFrame) -> pa.Table:
    """The schema's columns, then the inductor options' columns the frame holds (typed as
    their values are; see :mod:`tuner.data.schema`)."""
    options = sorted(c for c in df.columns if is_option_column(c))
    df = df[COLUMNS + options].copy()
    schema = SCHEMA
    for name in options:
        schema = schema.append(pa.field(name, _option_type(df[name])))
    for field in schema:
        # Arrow reads NaN as null in text and in a column of lists, but a column no row filled
        # comes back as NaN floats, which Arrow cannot make lists of: None there. The options'
        # columns are typed by their values, so theirs are cleaned too. (Cleaning every text
        # column as well took more than half of a write's time:
        # benchmarks/study-growth-cpu-profile-300.md.)
        if field.name in options or (pa.types.is_list(field.type)
                                      and df[field.name].dtype != object):
            column = df[field.name].astype(object)
            df[field.name] = column.where(column.map(_filled), None)
            if field.name in options and pa.types.is_string(field.type):
                df[field.name] = df[field.name].map(lambda v: v if v is None else str(v))
        # Whole numbers with gaps are floats in pandas: stored as pandas' nullable Int64, so
        # that pd.read_parquet gives them back as integers (it reads pandas' dtype from the
        # file) rather than as 3.0.
        elif pa.types.is_integer(field.type) and df[field.name].dtype.kind in "fO":
            df[field.name] = df[field.name].astype("Int64")
    return pa.Table.from_pandas(df, schema=schema, preserve_index=False)


def _integers(column: pd.Series) -> pd.Series:
    """``column`` as pandas' nullable Int64, where every value it holds is a whole number."""
    try:
        return column.astype("Int64")
    except (TypeError, ValueError):  # a fraction or text: left as the file has it
        return column


def _option_type(column: pd.Series) -> pa.DataType:
    """An option column's Arrow type, from its values (bool, int, float or str); text where
    they mix kinds or none is filled."""
    values = [v for v in column.astype(object) if _filled(v)]
    try:
        inferred = pa.array(values).type if values else pa.string()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # an int beyond 64 bits
        return pa.string()
    return inferred if (pa.types.is_boolean(inferred) or pa.types.is_integer(inferred)
                        or pa.types.is_floating(inferred)) else pa.string()


def _filled(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


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
# per trial, this write included, stayed under a second up to 1,500 trials:
# benchmarks/study-growth-cpu-large.md), and its mtime moves with every write. Minutes, not
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
    why = os.strerror(errno.ENOSPC) if full else (exc.strerror or _one_line(text))
    held = f"{storage or 'the study storage'} holds every trial"
    if full:
        return UserError(f"cannot write {path}: {why}; {held}, so once you free disk space the "
                         "same command writes the file again")
    return UserError(f"cannot write {path}: {why}; {held}: make {path.name} and its folder "
                     "writable (chmod u+w; chattr -i) and the same command writes the file "
                     "again")


_EMPTY = f"the study's path is empty: give a study folder or its {TRIALS_FILE}"


def read(path: Path | str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Load a tuner Parquet file (a study folder means its trials file) and its metadata.

    Files of every schema version load: missing columns come back empty and the derived ones
    are filled (:func:`tuner.data.derive.derive`). Anything unreadable is a one-line
    :class:`UserError`.
    """
    if not str(path).strip():  # Path("") is the working folder
        raise UserError(_EMPTY)
    path = check_path(Path(path))
    if path.is_dir():
        path = path / TRIALS_FILE
    if not path.exists():
        if path.name == TRIALS_FILE and (path.parent / DB_FILE).is_file():
            # A study whose search started (study.db is made first) but has not written its
            # files: the first write is after the first trial.
            raise UserError(f"study {path.parent} has no finished trial to read yet: a search "
                            f"writes its {TRIALS_FILE} once its first trial finishes (if trials "
                            f"finished and the file is gone, `tuner worker --study "
                            f"{path.parent.name} --studies-dir {path.parent.parent} "
                            f"--export-only` writes it again from {DB_FILE})")
        # A study's name, as the commands take it: from Python, a study is its path.
        named = STUDIES_DIR / path if len(path.parts) == 1 and path.suffix != ".parquet" \
            else None
        hint = f": did you mean {str(named)!r}?" if named is not None and named.is_dir() else ""
        raise UserError(f"{path}: no such file (give a study folder or a tuner Parquet "
                        f"file){hint}")
    if not path.is_file():  # /dev/null, a pipe: pyarrow says FileNotFoundError
        raise UserError(f"{path}: not a regular file (give a study folder or a tuner Parquet "
                        "file)")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - a damaged file: say so on one line, never a traceback
        raise UserError(_one_line(f"{path}: not a readable Parquet file "
                                  f"({type(exc).__name__}: {exc}){_rewrite(path)}")) from exc
    raw = table.schema.metadata or {}
    if b"tuner.schema_version" not in raw:
        raise UserError(f"{path}: not a tuner study file (no tuner metadata)")
    try:
        meta = {k.decode()[len("tuner."):]: json.loads(v) for k, v in raw.items()
                if k.startswith(b"tuner.")}
        version = int(meta["schema_version"])
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: damaged tuner metadata ({exc})") from exc
    if (wrong := _misshapen(meta)) is not None:
        raise UserError(f"{path}: damaged tuner metadata (tuner.{wrong}){_rewrite(path)}")
    if version > SCHEMA_VERSION:
        raise UserError(f"{path}: schema version {version} is newer than this tuner reads "
                        f"({SCHEMA_VERSION}); upgrade tuner")
    _check_columns(table.schema, path)
    df = table.to_pandas()
    for column in COLUMNS:
        if column not in df:
            df[column] = None
    for field in SCHEMA:  # whole numbers that an older file stored as floats where rows lack them
        if pa.types.is_integer(field.type) and df[field.name].dtype.kind in "fO":
            df[field.name] = _integers(df[field.name])
    # This version's order; the inductor options' columns (and any other extra) kept after.
    df = df[COLUMNS + [c for c in df.columns if c not in COLUMNS]]
    if version < 3:  # latency was timed back to back then: that is the stream figure
        for stat in ("p50", "p90", "p99", "iqr"):
            df[f"stream_ms_{stat}"] = df[f"latency_ms_{stat}"]
    missing = [c for c in ("status", "batch_size") if len(df) and df[c].isna().all()]
    if missing:
        raise UserError(f"{path}: not a tuner study file (no {', '.join(missing)} values)")
    if (damaged := _damaged_rows(df, meta)) is not None:
        raise UserError(f"{path}: damaged ({damaged}){_rewrite(path)}")
    before_median = "latency_ms_p50_median" not in table.schema.names
    df = derive(df, meta.get("fingerprints") or [], fill_only=True,
                recompute=FROM_MEDIAN if before_median else ())
    # Ranked afresh, so a file written under an earlier rule for "within noise" reads as the
    # verdicts that show, recommend and compare reach now (tuner.data.noise).
    return with_ranks(df), meta


def _damaged_rows(df: pd.DataFrame, meta: dict[str, Any]) -> str | None:
    """What in ``df``'s rows the readers could not use (each would be a traceback in show,
    recommend or compare), or None: a row without its trial number, a batch size that is not a
    whole number, a config that is not a config's JSON, a study that names its model neither in its metadata nor in every row."""
    if (unnumbered := int(df["trial_number"].isna().sum())):
        return f"{unnumbered} of {len(df)} rows have no trial_number"
    sizes = pd.to_numeric(df["batch_size"], errors="coerce").dropna()
    if (fraction := sizes[sizes != sizes.round()]).size:
        return f"batch_size {fraction.iloc[0]:g} is not a whole number"
    for number, text in zip(df["trial_number"], df["config_json"]):
        if text is None or (isinstance(text, float) and text != text):
            continue  # a row written before config_json: its config columns say it
        try:
            TrialConfig.from_dict(json.loads(text))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return f"trial {number}'s config_json is not a config ({type(exc).__name__})"
    workload = meta.get("workload")
    if workload is not None and not isinstance(workload.get("model"), str):
        return "its tuner.workload metadata names no model"
    if workload is None and df["model"].isna().any():
        return "no tuner.workload metadata, and rows without a model"
    return None


# The shape of each metadata value the readers use (what export writes): JSON of another kind
# (a list where an object belongs) would be a traceback in show, recommend or compare.
_META_SHAPES: dict[str, tuple[type, type | None]] = {
    "study": (str, None), "storage": (str, None), "workload": (dict, None),
    "space": (dict, None), "protocol": (dict, None), "mode_options": (dict, None),
    "fingerprints": (list, dict), "peak_tflops": (list, dict)}  # (the value, each item)
_JSON_KIND: dict[type, str] = {str: "a string", dict: "an object", list: "a list"}


def _misshapen(meta: dict[str, Any]) -> str | None:
    """The first metadata value not of its shape in :data:`_META_SHAPES`, said as ``key is a
    list, not an object``; None where all are (an absent or null value is allowed)."""
    def kind(value: Any) -> str:
        return next((said for t, said in _JSON_KIND.items() if isinstance(value, t)),
                    "a number" if isinstance(value, (int, float)) else "null")

    for key, (outer, item) in _META_SHAPES.items():
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, outer):
            return f"{key} is {kind(value)}, not {_JSON_KIND[outer]}"
        if item is None:
            continue
        bad = [v for v in cast(list[Any], value) if not isinstance(v, item)]
        if bad:  # a null among them too
            return f"{key} holds {kind(bad[0])} where each should be {_JSON_KIND[item]}"
    return None


def _check_columns(schema: pa.Schema, path: Path) -> None:
    """Refuse a file whose columns no tuner wrote: one of :data:`REQUIRED_COLUMNS` missing, or
    a column of :data:`SCHEMA` holding another kind of value (text where numbers belong, say).
    Such a file would otherwise read as a study with nothing measured."""
    problem = next((f"has no {name} column" for name in REQUIRED_COLUMNS
                    if name not in schema.names), None)
    for field in (f for f in schema if problem is None and f.name in COLUMNS):
        holds, wanted = kind_of(field.type), kind_of(SCHEMA.field(field.name).type)
        if holds is not None and holds != wanted:
            problem = f"has {holds} in its {field.name} column, not {wanted}"
    if problem is None:
        return
    raise UserError(f"{path} {problem}: it was not written by tuner, or is damaged"
                    f"{_rewrite(path)}")


def _rewrite(path: Path) -> str:
    """How a study's own damaged file is written again (from where every trial is kept), as
    the end of an error; "" for any other file."""
    if path.name not in (TRIALS_FILE, PARETO_FILE):
        return ""
    if not (path.parent / DB_FILE).exists():
        return "; rerun `tuner search` with the same options to rewrite it from the study storage"
    return (f"; rerun `tuner search` with the same options to rewrite it from {DB_FILE} (or "
            f"`tuner worker --study {path.parent.name} --studies-dir {path.parent.parent} "
            "--export-only`)")


def refuse_front_only(path: Path) -> None:
    """Refuse a study's pareto.parquet where a whole study is read: it holds the front alone,
    without the eager rows every "vs eager", every "why eager" and the fronts themselves are
    chosen against."""
    if path.name == PARETO_FILE and path.is_file():
        raise UserError(f"{path} holds only a study's Pareto-optimal trials; give the study "
                        f"folder ({path.parent}) or its {TRIALS_FILE}")


def load(study: Path | str) -> tuple[pd.DataFrame, dict[str, Any], Path]:
    """A whole study (its folder or trials file; not :data:`PARETO_FILE`, see
    :func:`refuse_front_only`): its rows, metadata and the file they came from."""
    if not isinstance(study, (str, os.PathLike)):  # Path(None) would be a TypeError's traceback
        raise UserError(f"a study is a folder or its {TRIALS_FILE} (a str or Path), not "
                        f"{study!r}: give its path")
    if not str(study).strip():
        raise UserError(_EMPTY)
    path = check_path(Path(study))
    if path.is_dir():
        path = path / TRIALS_FILE
    refuse_front_only(path)
    df, meta = read(path)
    return df, meta, path


def fingerprints(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The distinct fingerprints in a study (one, unless several machines shared it)."""
    cols = [f"fp_{k}" for k in FINGERPRINT_FIELDS]
    distinct = df[cols].dropna(how="all").drop_duplicates()
    return [{c[3:]: (None if pd.isna(v) else v) for c, v in row.items()}
            for row in distinct.to_dict("records")]


def peaks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The best matmul rate measured on each machine of a study (host, GPU name, TFLOP/s)."""
    measured = df[pd.to_numeric(df["peak_tflops_measured"], errors="coerce").notna()]
    best = measured.groupby([measured["fp_host"].fillna(""), measured["fp_gpu_name"].fillna("")])[
        "peak_tflops_measured"].max()
    return [{"host": host or None, "gpu_name": gpu or None, "peak_tflops_measured": float(v)}
            for (host, gpu), v in best.items()]


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


def check_path(path: Path) -> Path:
    """``path``, where asking whether it exists raises nothing but that it does not: a name
    too long, a folder that may not be searched, a file used as a folder are one-line errors
    (``Path.is_dir`` raises some of them, with the whole name), and so is a name that is not
    UTF-8."""
    if not_utf8(str(path)):
        raise UserError(f"{str(path)!r} {NOT_UTF8}")
    try:
        path.stat()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UserError(_one_line(f"{_shown(path)}: cannot read it ({exc.strerror})")) from exc
    return path


def _shown(path: Path) -> str:
    """``path`` for an error, cut where it is too long to read."""
    text = str(path)
    return text if len(text) <= 80 else f"{text[:40]}...{text[-20:]}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
