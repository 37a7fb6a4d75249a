"""Where one trial's record lives in the Optuna storage, and what of it people see.

The full record (every field, the raw latency samples too: kilobytes) is the trial *system*
attribute ``tuner.result``: the tuner reads it back to write the Parquet files and to know which
configs are measured, on any host that reaches the storage. optuna-dashboard shows only *user*
attributes, and cuts each at 1,024 characters, so the record is kept out of them. What people
look at there (or in ``study.trials_dataframe()``) is :data:`SUMMARY_COLUMNS`: flat numbers and
booleans, named and computed as the Parquet columns of the same name, so both say the same.

Studies made by tuner 0.1.0 before 2026-11-30 (fd5945c) kept the record as the user attribute
``tuner.result``; the readers here accept either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
import pyarrow as pa
from optuna.trial import FrozenTrial, TrialState

from tuner.data.rows import plain
from tuner.data.schema import SCHEMA
from tuner.domain.config import TrialConfig
from tuner.domain.records import NOT_RUN, TrialResult
from tuner.domain.space import SearchSpace
from tuner.study.fronts import Fronts
from tuner.study.params import params_of, suggest
from tuner.study.storage import CONFIG_ATTR, KEY_ATTR, MESSAGE_ATTR, RESULT_ATTR, STATUS_ATTR

# The trial's user attributes besides ``tuner.status``: one scalar each, left out where the
# trial did not measure it (a failure has no latency), so a numeric column stays sortable.
SUMMARY_COLUMNS = ("latency_ms_p50", "latency_ms_p99", "stream_ms_p50", "speedup_vs_eager",
                   "peak_memory_bytes", "compile_s_cold", "correct", "graph_breaks",
                   "recompiles")


def was_run(record: Mapping[str, Any]) -> bool:
    """False for a stored record of a config that was never started (:func:`record_not_run`)."""
    return not str(record.get("message") or "").startswith(NOT_RUN)


def stored_result(trial: FrozenTrial) -> dict[str, Any] | None:
    """The trial's full record as stored, or None if it has none (not measured yet, died)."""
    if RESULT_ATTR in trial.system_attrs:
        return trial.system_attrs[RESULT_ATTR]
    return trial.user_attrs.get(RESULT_ATTR)  # a study of tuner 0.1.0 before 2026-11-30 (fd5945c)


def is_measured(trial: FrozenTrial) -> bool:
    return RESULT_ATTR in trial.system_attrs or RESULT_ATTR in trial.user_attrs


def store_result(storage: optuna.storages.BaseStorage, trial_id: int,
                 result: TrialResult) -> None:
    """Keep the full record on the running trial; from here on it counts as measured.
    Raises ``UpdateFinishedTrialError`` if another worker failed the trial meanwhile."""
    storage.set_trial_system_attr(trial_id, RESULT_ATTR, result.to_dict())


MESSAGE_CHARS = 1000  # optuna-dashboard cuts a user attribute at 1,024


def failure_message(message: Any) -> str:
    """A failed trial's message as its :data:`MESSAGE_ATTR` user attribute: one line, cut to
    :data:`MESSAGE_CHARS` (the whole message is in trials.parquet)."""
    text = " ".join(str(message or "").split())
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 3] + "..."


def summary(row: Mapping[str, Any]) -> dict[str, float | int | bool]:
    """The :data:`SUMMARY_COLUMNS` of one Parquet row that hold a value, as plain Python."""
    values = {column: plain(row.get(column)) for column in SUMMARY_COLUMNS}
    # A count or byte size in a column with gaps is a float in the frame; the file's is whole.
    return {column: int(value) if column in _WHOLE and isinstance(value, float)
            and value.is_integer() else value
            for column, value in values.items() if value is not None}


_WHOLE = {field.name for field in SCHEMA if pa.types.is_integer(field.type)}


def record_not_run(fronts: Fronts, space: SearchSpace, config: TrialConfig,
                   result: TrialResult) -> None:
    """Add a finished, failed trial for ``config`` that was never started, its record
    ``result`` saying why: a row in the files, like every config the search decided on.
    Its batch size's model fails in eager (``workload_error``: once the model is fixed, the
    same command measures the config), or its mode compiled past the budget there
    (``compile_timeout``)."""
    study = fronts.of(config.batch_size)
    recorder = _Distributions(params_of(config))
    suggest(recorder, space, fronts.batch_size_of(study))
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.FAIL, params=params_of(config), distributions=recorder.asked,
        user_attrs={KEY_ATTR: config.key, CONFIG_ATTR: config.to_dict(),
                    STATUS_ATTR: result.status.value,
                    MESSAGE_ATTR: failure_message(result.message)},
        system_attrs={RESULT_ATTR: result.to_dict()}))


class _Distributions(optuna.trial.FixedTrial):
    """A fixed trial that notes the distribution of each parameter it is asked for."""

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.asked: dict[str, optuna.distributions.BaseDistribution] = {}

    def suggest_categorical(self, name: str, choices: Any) -> Any:  # type: ignore[override]
        self.asked[name] = optuna.distributions.CategoricalDistribution(list(choices))
        return super().suggest_categorical(name, choices)
