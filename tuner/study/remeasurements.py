"""The finalists' re-measurements as the Optuna storage keeps them: read, added, forgotten, and
checked against the trials they are filed under.

They are kept in the study's system attributes, one per record, ``tuner.repeat.<trial
number>.<when and which>`` (Optuna allows no writes to a finished trial). They are not trials:
they never count towards ``--trials``, and the search never sees them. Each record names its
config, so that a storage whose trials were renumbered under them (``optuna.copy_study``) is
told (:func:`misfiled`)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tuner.domain.records import TrialResult

if TYPE_CHECKING:
    import optuna

# + trial number + "." + when and which: a study system attribute, one re-measurement of that
# finalist (None once forgotten). One key per record, so two processes confirming one study
# never overwrite each other's (each is a single upsert, no read-modify-write).
REPEAT_ATTR = "tuner.repeat."
# + trial number: the list of that finalist's records, as studies made by tuner 0.1.0 before
# 2026-12-04 (507a78b) kept them (as study user attributes before 2026-11-30, a87c065, which
# optuna-dashboard shows cut at 1,024 characters); all are read.
REPEATS_ATTR = "tuner.repeats."


def repeats_of(study: optuna.Study, storage: optuna.storages.BaseStorage
               ) -> dict[int, list[dict[str, Any]]]:
    """Every trial's re-measurements, by trial number, oldest first."""
    system = storage.get_study_system_attrs(storage.get_study_id_from_name(study.study_name))
    out = {number: list(records) for number, records in _legacy(study, system).items()}
    for (number, _), record in sorted(
            ((int(number), when), value) for key, value in system.items()
            if key.startswith(REPEAT_ATTR)
            for number, _, when in [key[len(REPEAT_ATTR):].partition(".")]
            if number.isdigit()):
        records = out.setdefault(number, [])
        if record is not None:
            records.append(record)
    return out


def _legacy(study: optuna.Study, system: Mapping[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """The lists of records that studies made by tuner 0.1.0 before 2026-12-04 (507a78b) kept, by
    trial number: a system attribute's over a user attribute's (forgetting empties the system
    one)."""
    return {int(k[len(REPEATS_ATTR):]): v for attrs in (study.user_attrs, system)
            for k, v in attrs.items()
            if k.startswith(REPEATS_ATTR) and k[len(REPEATS_ATTR):].isdigit()}


def misfiled(repeats: Mapping[int, list[dict[str, Any]]], keys: Mapping[int, str]
             ) -> tuple[int, str, str | None] | None:
    """A trial whose stored re-measurements are of another config, as (its number, the config
    they are of, the trial's config, None for no measured trial), or None if none is. Then the
    trials were renumbered under their re-measurements: ``optuna.copy_study`` gives each trial a
    new id, and a tuner number is that id (:mod:`tuner.study.fronts`). ``keys``: each measured
    trial's config key, by number. Records made by tuner 0.1.0 before 2026-12-03 (c90d5a9), which
    name no config, are not checked."""
    for number, records in sorted(repeats.items()):
        of = next((r["config_key"] for r in records if r.get("config_key")), None)
        if of is not None and of != keys.get(number):
            return number, of, keys.get(number)
    return None


def add_repeat(study: optuna.Study, storage: optuna.storages.BaseStorage, number: int,
               record: dict[str, Any]) -> None:
    """Store one re-measurement of trial ``number``, under a key of its own: ordered by when it
    was made (nanoseconds since the epoch), told apart by its ``id``."""
    storage.set_study_system_attr(
        storage.get_study_id_from_name(study.study_name),
        f"{REPEAT_ATTR}{number}.{time.time_ns():020d}-{record['id']}", record)


def forget(study: optuna.Study, storage: optuna.storages.BaseStorage) -> int:
    """Forget every trial's re-measurements (``tuner confirm --redo``), before the front is
    chosen: one that failed had left its finalist off the front, and one on it may not be
    there without them. Returns how many trials had some."""
    study_id = storage.get_study_id_from_name(study.study_name)
    system = storage.get_study_system_attrs(study_id)
    forgotten = set()
    for number, records in _legacy(study, system).items():
        if records:
            storage.set_study_system_attr(study_id, REPEATS_ATTR + str(number), [])
            forgotten.add(number)
    for key, value in system.items():
        if key.startswith(REPEAT_ATTR) and value is not None:
            storage.set_study_system_attr(study_id, key, None)
            forgotten.add(int(key[len(REPEAT_ATTR):].partition(".")[0]))
    return len(forgotten)


def repeat_record(kind: str, result: TrialResult, key: str) -> dict[str, Any]:
    """What a re-measurement of the config ``key`` keeps in the storage: its numbers, not its
    samples."""
    fp = result.fingerprint or {}
    return {
        "config_key": key,  # whose it is: a trial's number can change (renumbered)
        "kind": kind, "status": result.status.value, "message": result.message[:300],
        "latency_ms_p50": result.latency_ms_p50, "latency_ms_p90": result.latency_ms_p90,
        "latency_ms_p99": result.latency_ms_p99, "latency_ms_iqr": result.latency_ms_iqr,
        "stream_ms_p50": result.stream_ms_p50, "noisy": result.noisy,
        "correct": result.correct, "ran_compiled": getattr(result, "ran_compiled", None),
        "compile_s": result.compile_s_cold, "cache_start": result.cache_start,
        "warmup_s": result.warmup_s,
        "artifacts_load_s": result.artifacts_load_s, "artifacts_bytes": result.artifacts_bytes,
        "artifacts_note": result.artifacts_note, "fxgraph_cache_hits": result.fxgraph_cache_hits,
        "fxgraph_cache_misses": result.fxgraph_cache_misses, "wall_s": result.wall_s,
        "host_other_cpu_cores": getattr(result, "host_other_cpu_cores", None),
        "torch": fp.get("torch"), "host": fp.get("host"),
        "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "id": uuid.uuid4().hex,  # tells it from another process's made in the same ns
    }
