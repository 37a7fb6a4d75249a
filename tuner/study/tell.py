"""Telling Optuna how a trial went: its summary as user attributes, where the dashboard shows
it, and its objectives and constraints (:mod:`tuner.study.sampler`)."""

from __future__ import annotations

import optuna
import pandas as pd
from optuna.trial import TrialState

from tuner.data.select import Constraints, comparable
from tuner.domain.records import Status
from tuner.study.record import failure_message, summary
from tuner.study.sampler import CONSTRAINTS_ATTR, constraint_values, objective_values
from tuner.study.storage import MESSAGE_ATTR, STATUS_ATTR


def tell(storage: optuna.storages.BaseStorage, study: optuna.Study, optuna_number: int,
         trial_id: int, number: int, df: pd.DataFrame, limits: Constraints) -> None:
    """Set the summary of the tuner's trial ``number`` (``optuna_number`` in ``study``),
    stored, from its row in ``df`` as its user attributes, and tell Optuna its objectives
    and constraints (under the study's ``limits``): a failed config is an infeasible point,
    not a gap. A model that fails in eager says nothing of the config: that trial is told
    failed, as is one whose row gave way to an older one of its config
    (:func:`tuner.study.export.study_frame`)."""
    rows = df[df["trial_number"] == number]
    if rows.empty:
        study.tell(optuna_number, state=TrialState.FAIL)
        return
    row = rows.iloc[0]
    for name, value in summary(row).items():
        storage.set_trial_user_attr(trial_id, name, value)
    storage.set_trial_user_attr(trial_id, STATUS_ATTR, str(row["status"]))
    if row["status"] != Status.OK.value:  # why, where plain Optuna and the dashboard see it
        storage.set_trial_user_attr(trial_id, MESSAGE_ATTR, failure_message(row["message"]))
    if row["status"] == Status.WORKLOAD_ERROR.value:
        study.tell(optuna_number, state=TrialState.FAIL)
        return
    verified = number in set(comparable(df)["trial_number"])
    storage.set_trial_system_attr(
        trial_id, CONSTRAINTS_ATTR, constraint_values(row, verified, limits))
    study.tell(optuna_number, objective_values(row, verified))
