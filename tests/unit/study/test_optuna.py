"""The tuner reaches Optuna through public names only; what it relies on of them is pinned here,
so an Optuna release that changes it fails these tests first (pyproject names the versions they
ran against)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

import tuner
from tuner.study.sampler import CONSTRAINTS_ATTR
from tuner.study.storage import HEARTBEAT_INTERVAL_S, make_storage

# `study._storage`, `trial._trial_id`, ... on anything but the tuner's own objects, and any
# private Optuna module (`optuna.storages._rdb`).
PRIVATE = re.compile(r"\b(?P<owner>\w+)\._(storage|trial_id|study_id|cached_frozen_trial)\b"
                     r"|\boptuna(\.\w+)*\._\w+")


def test_the_package_uses_no_private_optuna_name():
    found = [f"{path.name}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
             for path in Path(tuner.__file__).parent.rglob("*.py")
             for text in [path.read_text()]
             for m in PRIVATE.finditer(text) if m.group("owner") != "self"]
    assert found == []


@pytest.fixture
def study(tmp_path) -> tuple[optuna.storages.BaseStorage, optuna.Study]:
    storage = make_storage(f"sqlite:///{tmp_path / 'study.db'}")
    return storage, optuna.create_study(study_name="s", storage=storage)


def ask(study: optuna.Study) -> optuna.Trial:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # heartbeat storage outside optimize()
        return study.ask()


def trial_id(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> int:
    """How tuner.study.claims names a trial to the storage."""
    study_id = storage.get_study_id_from_name(study.study_name)
    return storage.get_trial_id_from_study_id_trial_number(study_id, number)


def test_a_trial_system_attribute_is_read_back_and_is_no_user_attribute(study, tmp_path):
    storage, s = study
    trial = ask(s)
    storage.set_trial_system_attr(trial_id(storage, s, trial.number), "tuner.result", {"a": [1]})
    loaded = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    frozen = loaded.trials[trial.number]
    assert frozen.system_attrs["tuner.result"] == {"a": [1]}
    assert "tuner.result" not in frozen.user_attrs


def test_writing_to_a_finished_trial_raises_what_the_search_catches(study):
    """A result that comes back for a trial another worker failed is dropped on this error."""
    storage, s = study
    trial = ask(s)
    s.tell(trial, state=TrialState.FAIL)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        storage.set_trial_system_attr(trial_id(storage, s, trial.number), "tuner.result", {})


def test_the_storage_beats_at_the_interval_the_tuner_sets(study):
    storage, s = study
    assert storage.get_heartbeat_interval() == HEARTBEAT_INTERVAL_S
    storage.record_heartbeat(trial_id(storage, s, ask(s).number))


def test_best_trials_skip_a_trial_whose_constraints_attribute_is_above_zero(study):
    """tuner.study.sampler stores each trial's constraints in the system attribute that Optuna's
    samplers, Study.best_trials and optuna-dashboard read; a constrained study's best trials are
    its feasible front."""
    storage, _ = study
    s = optuna.create_study(study_name="fronts", storage=storage,
                            directions=["minimize", "minimize"])
    for values, constraints in (([1.0, 1.0], [1.0, 0.0]), ([2.0, 2.0], [0.0, -0.5])):
        trial = ask(s)
        storage.set_trial_system_attr(trial_id(storage, s, trial.number), CONSTRAINTS_ATTR,
                                      constraints)
        s.tell(trial, values)
    assert [t.values for t in s.best_trials] == [[2.0, 2.0]]  # [1, 1] dominates it, infeasible
