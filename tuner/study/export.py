"""The study's Parquet files, written from its Optuna storage."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from tuner.data import files
from tuner.data.equivalent import mode_options
from tuner.data.noise import repeat_columns
from tuner.data.rows import basis_of, frame, trial_row
from tuner.data.select import pareto, with_ranks
from tuner.domain.config import TrialConfig
from tuner.domain.layout import DB_FILE, StudyLayout
from tuner.domain.records import TrialResult
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.study.broken import breaks_batch
from tuner.study.fronts import Fronts, StoredTrial
from tuner.study.record import stored_result, was_run
from tuner.study.redact import redact
from tuner.study.remeasurements import misfiled, repeats_of
from tuner.study.spec import StudySpec
from tuner.study.storage import CONFIG_ATTR, OPTION_DEFAULTS_ATTR, STARTED_FROM_ATTR


@dataclasses.dataclass(frozen=True)
class Exported:
    trials: pd.DataFrame  # every measured trial
    pareto: pd.DataFrame  # the Pareto set of each batch size


EXPORT_SHARE = 0.05  # at most this share of a search's time goes to rewriting its files...
PACED_FROM_S = 0.2  # ...once a rewrite takes this long; a quicker one is made after every trial


class ExportPacer:
    """When a search rewrites its Parquet files after a trial. Each write is whole (both files,
    every row), so it costs more as the study grows: over a 600-trial run on the 2-core box,
    writing them was 21 % of the search's own time (benchmarks/study_growth.py measures it).
    A write that took under ``from_s`` is made after every trial, so that the files of a
    search killed outright miss at most the trial in flight. Once a write takes longer, the
    files are rewritten after a trial only when the time since the last write ended is at
    least ``1 / share`` times what that write took, so writing takes at most about ``share``
    of the run however large the study. With trials of seconds (any GPU trial) that is still
    after every trial until a write takes a twentieth of one. A run's last export always
    writes (:meth:`tuner.study.search.Search.export`); ``behind`` says the files miss a trial."""

    def __init__(self, share: float = EXPORT_SHARE, from_s: float = PACED_FROM_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.share, self.from_s, self._clock = share, from_s, clock
        self._last_end: float | None = None
        self._last_s = 0.0
        self.behind = False

    def due(self) -> bool:
        return self._last_end is None or self._last_s < self.from_s or (
            self._clock() - self._last_end >= self._last_s / self.share)

    def write(self, write: Callable[[], pd.DataFrame], instead: Callable[[], pd.DataFrame],
              force: bool = False) -> pd.DataFrame:
        """``write()`` (which writes the files and returns the front), timed as the last write,
        where ``force`` or :meth:`due`; else ``instead()`` (the front, written nowhere)."""
        if not (force or self.due()):
            self.behind = True
            return instead()
        started = self._clock()
        front = write()
        self._last_end = self._clock()
        self._last_s = self._last_end - started
        self.behind = False
        return front


class TrialRows:
    """Each finished trial's row, made once and kept between exports: a search writes the files
    after every trial, and remaking every row each time grew with the study
    (benchmarks/study_growth.py measures it). A kept row serves only while the trial's stored
    record is the same; the finalist columns are made afresh on every export (re-measurements
    and artifacts files come later)."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[tuple[Any, ...], TrialResult, dict[str, Any]]] = {}

    def row(self, name: str, number: int, config: TrialConfig, workload: Workload,
            stored: dict[str, Any]) -> tuple[TrialResult, dict[str, Any]]:
        """The record as a result and its row (the caller's to change: a copy)."""
        made = self._made.get(number)
        if made is None or made[0] != (name, config, workload, stored):
            result = TrialResult.from_dict(stored)
            made = ((name, config, workload, dict(stored)), result,
                    trial_row(name, number, config, workload, result))
            self._made[number] = made
        return made[1], dict(made[2])


def study_frame(fronts: Fronts, name: str, workload: Workload,
                layout: StudyLayout | None = None, rows: TrialRows | None = None) -> pd.DataFrame:
    """Every measured trial of every batch size as a Parquet row, in the order the trials were
    made; ``layout`` (the study folder on this host) is where finalists' artifacts files are
    looked for; ``rows``, the rows an earlier export made, to reuse."""
    rows = rows or TrialRows()
    repeats = repeats_of(fronts.main, fronts.storage)
    out = []
    records = [(t, stored, TrialConfig.from_dict(t.frozen.user_attrs[CONFIG_ATTR]))
               for t in sorted(fronts.trials(), key=lambda t: t.number)
               if (stored := stored_result(t.frozen)) is not None]
    if (wrong := misfiled(repeats, {t.number: config.key for t, stored, config in records
                                    if was_run(stored)})) is not None:
        number, of, config_key = wrong
        raise UserError(
            f"study {name!r}: the re-measurements stored for trial {number} are of {of}, but "
            f"trial {number} is {config_key or 'no measured config'}: the storage's trials "
            "were renumbered (optuna.copy_study gives every trial a new id, and the tuner "
            "numbers trials by it), so each finalist's repeats would count for another config. "
            "Copy a SQLite study's study.db as a file instead, or forget them here and measure "
            "the finalists again: `tuner confirm` with --redo")
    for t, stored, config in _latest(records):
        result, row = rows.row(name, t.number, config, workload, stored)
        row["started_from"] = t.frozen.user_attrs.get(STARTED_FROM_ATTR)  # --start-from
        row.update(repeat_columns(result, repeats.get(t.number, []), config.key,
                                  None if layout is None else layout.directory))
        out.append(row)
    basis = basis_of({"workload": workload.to_dict(),
                      "option_defaults": fronts.main.user_attrs.get(OPTION_DEFAULTS_ATTR)})
    return with_ranks(frame(out, basis))


def _latest(records: list[tuple[StoredTrial, dict[str, Any], TrialConfig]]
            ) -> list[tuple[StoredTrial, dict[str, Any], TrialConfig]]:
    """The ``records`` (in trial order) that are still the study's word on their config: one
    row a config. A config that ran supersedes its not-run rows, and a later run of it a
    failure that skipped its batch size, which a resume tries again (a model that raised,
    eager past --timeout, or with --retry-failed any eager failure: :mod:`tuner.study.broken`):
    a stale row beside the new one would say the config was never measured. Of two not-run
    rows (two workers that found the same reason at once) the first stays."""
    last_run = {config.key: t.number for t, stored, config in records if was_run(stored)}
    kept, not_run = [], set()
    for t, stored, config in records:
        if not was_run(stored):
            if config.key in last_run or config.key in not_run:
                continue
            not_run.add(config.key)
        elif breaks_batch(config, stored.get("status")) and last_run[config.key] != t.number:
            continue
        kept.append((t, stored, config))
    return kept


def _mode_options(spec: StudySpec) -> dict[str, Any]:
    """For a study that searches inductor options: what each of its modes sets, so ``tuner
    compare`` knows the value an option has where a config leaves it unset
    (:mod:`tuner.data.equivalent`) without importing torch."""
    if not spec.space.options:
        return {}
    return {"mode_options": mode_options(spec.space.modes)}


def _option_defaults(fronts: Fronts) -> dict[str, Any]:
    """What the study's configs are named against (:mod:`tuner.domain.naming`), where the
    study recorded it: show, recommend and compare read it from the files, without torch."""
    stored = fronts.main.user_attrs.get(OPTION_DEFAULTS_ATTR)
    return {"option_defaults": stored} if isinstance(stored, dict) else {}


def refuse_another_studys_folder(spec: StudySpec) -> None:
    """Joining a study (``tuner worker``, ``tuner confirm``) writes its Parquet files, caches
    and artifacts into this host's study folder: refuse a folder whose files are of another
    study of the same name, one in another storage (a study.db of its own, or another
    --storage), rather than overwrite them and mix the two studies' caches."""
    label = storage_label(spec)
    if spec.layout.trials_file.exists():
        import pyarrow.parquet as pq

        try:
            raw = (pq.read_schema(spec.layout.trials_file).metadata or {}).get(b"tuner.storage")
        except (OSError, ValueError):
            return  # a damaged file is rewritten, as a search does
        stored = None if raw is None else json.loads(raw)
        if stored is not None and stored != label:
            raise UserError(f"{spec.directory} holds the files of a study {spec.name!r} that "
                            f"lives in {stored}, not in {label}: give this host its own "
                            "--studies-dir, or the --storage those files came from")
    elif spec.storage is not None and spec.layout.db.exists():
        raise UserError(f"{spec.directory} holds a study.db of its own, and study "
                        f"{spec.name!r} lives in {label}: give this host its own "
                        "--studies-dir")


def storage_label(spec: StudySpec) -> str:
    """Where the study's storage is, as the files say it: the embedded default relative to the
    study folder (an absolute path would describe only the machine that wrote it), any other
    storage without its credentials."""
    return DB_FILE if spec.storage is None else redact(spec.storage)


def _limits(fronts: Fronts) -> dict[str, Any]:
    """The limits the search was told (--max-vram-gb, --max-compile-s), where it was told any:
    recommend says where its pick breaks one it was not given."""
    limits = fronts.limits.to_dict()
    return {"limits": limits} if any(v is not None for v in limits.values()) else {}


def export_study(fronts: Fronts, spec: StudySpec, rows: TrialRows | None = None,
                 pacer: ExportPacer | None = None, after_trial: bool = False,
                 trials: pd.DataFrame | None = None) -> Exported:
    """Write the study's Parquet files under this host's study folder, from the storage;
    ``rows``: those an earlier export of this study made (:class:`TrialRows`); ``pacer``: the
    search's, which times each write and, ``after_trial``, skips one that is not due
    (:class:`ExportPacer`; the frames are made either way); ``trials``: the frame of
    :func:`study_frame`, where the caller made it already."""
    df = study_frame(fronts, spec.name, spec.workload, spec.layout, rows) if trials is None \
        else trials

    def write() -> pd.DataFrame:
        return files.export(spec.layout, df, {
            "study": spec.name, "workload": spec.workload.to_dict(),
            "space": spec.space.to_dict(), "protocol": spec.protocol.to_dict(),
            "storage": storage_label(spec), **_mode_options(spec), **_option_defaults(fronts),
            **_limits(fronts)})

    if pacer is None:
        return Exported(df, write())
    return Exported(df, pacer.write(write, lambda: pareto(df), force=not after_trial))
