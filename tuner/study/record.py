"""Where one trial's record lives in the Optuna storage, and what of it people see.

The full record (every field, the raw latency samples too: kilobytes) is the trial *system*
attribute ``tuner.result``: the tuner reads it back to write the Parquet files and to know which
configs are measured, on any host that reaches the storage. optuna-dashboard shows only *user*
attributes, and cuts each at 1,024 characters, so the record is kept out of them. What people
look at there (or in ``study.trials_dataframe()``) is :data:`SUMMARY_COLUMNS`: flat numbers and
booleans, named and computed as the Parquet columns of the same name, so both say the same.

Studies made before kept the record as the user attribute ``tuner.result``; the readers here
accept either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.data.rows import plain
from tuner.spec.records import TrialResult
from tuner.study.storage import RESULT_ATTR

# The trial's user attributes besides ``tuner.status``: one scalar each, left out where the
# trial did not measure it (a failure has no latency), so a numeric column stays sortable.
SUMMARY_COLUMNS = ("latency_ms_p50", "latency_ms_p99", "stream_ms_p50", "speedup_vs_eager",
                   "peak_memory_bytes", "compile_s_cold", "correct", "graph_breaks",
                   "recompiles")


def stored_result(trial: FrozenTrial) -> dict[str, Any] | None:
    """The trial's full record as stored, or None if it has none (not measured yet, died)."""
    if RESULT_ATTR in trial.system_attrs:
        return trial.system_attrs[RESULT_ATTR]
    return trial.user_attrs.get(RESULT_ATTR)  # a study made before the record moved


def is_measured(trial: FrozenTrial) -> bool:
    return RESULT_ATTR in trial.system_attrs or RESULT_ATTR in trial.user_attrs


def store_result(storage: optuna.storages.BaseStorage, trial_id: int,
                 result: TrialResult) -> None:
    """Keep the full record on the running trial; from here on it counts as measured.
    Raises ``UpdateFinishedTrialError`` if another worker failed the trial meanwhile."""
    storage.set_trial_system_attr(trial_id, RESULT_ATTR, result.to_dict())


def summary(row: Mapping[str, Any]) -> dict[str, float | int | bool]:
    """The :data:`SUMMARY_COLUMNS` of one Parquet row that hold a value, as plain Python."""
    values = {column: plain(row.get(column)) for column in SUMMARY_COLUMNS}
    return {column: value for column, value in values.items() if value is not None}
