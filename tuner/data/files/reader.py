"""A study file read back, from any schema version: the path checked, the file refused in one
line where no tuner wrote it or it is damaged, missing columns filled and the derived ones
computed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tuner.data.derive import FROM_MEDIAN, derive
from tuner.data.files.arrow import integers
from tuner.data.files.metadata import misshapen
from tuner.data.rows import basis_of, named
from tuner.data.schema import COLUMNS, REQUIRED_COLUMNS, SCHEMA, SCHEMA_VERSION, kind_of
from tuner.data.select import with_ranks
from tuner.domain.config import TrialConfig
from tuner.domain.layout import DB_FILE, PARETO_FILE, STUDIES_DIR, TRIALS_FILE
from tuner.errors import UserError
from tuner.files import NOT_UTF8, not_utf8

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
        under = STUDIES_DIR / path if len(path.parts) == 1 and path.suffix != ".parquet" \
            else None
        hint = f": did you mean {str(under)!r}?" if under is not None and under.is_dir() else ""
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
    if (wrong := misshapen(meta)) is not None:
        raise UserError(f"{path}: damaged tuner metadata (tuner.{wrong}){_rewrite(path)}")
    if version > SCHEMA_VERSION:
        raise UserError(f"{path}: schema version {version} is newer than this tuner reads "
                        f"({SCHEMA_VERSION}); upgrade tuner")
    _check_columns(table.schema, path)
    df = table.to_pandas()
    for column in COLUMNS:
        if column not in df:
            df[column] = None
    # whole numbers that files of tuner 0.1.0 before 2026-12-05 (03f7649) stored as floats where
    # rows lack them
    for field in SCHEMA:
        if pa.types.is_integer(field.type) and df[field.name].dtype.kind in "fO":
            df[field.name] = integers(df[field.name])
    # This version's order; the inductor options' columns (and any other extra) kept after.
    df = df[COLUMNS + [c for c in df.columns if c not in COLUMNS]]
    # tuner 0.1.0 before 2026-11-30 (fd5945c) timed latency back to back: that is the stream figure
    if version < 3:
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
    # Ranked afresh, so a file written by tuner 0.1.0 before 2026-12-02 (f3a2df6), under the
    # overlapping-intervals rule for "within noise", reads as the verdicts that show, recommend
    # and compare reach now (tuner.data.noise).
    return named(with_ranks(df), basis_of(meta)), meta


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
            continue  # a row of tuner 0.1.0 before 2026-11-30 (a87c065): its config columns say it
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
