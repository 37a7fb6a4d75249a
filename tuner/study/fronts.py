"""One Optuna study per batch size: one Pareto front each, for the sampler and for Optuna's API.

Latency at batch size 1 and at batch size 32 are not comparable. In one multi-objective study a
batch-size-1 trial dominates the batch-size-32 front, and TPE splits good from bad over both.
So the trials of batch size N live in the Optuna study ``<name>:bs<N>``, which has a sampler of
its own; its ``best_trials`` is the tuner's Pareto set of that batch size (``pareto.parquet``)
until the finalists are measured again: the tuner's front is then on their medians
(:data:`tuner.data.select.LATENCY`), Optuna's on each trial's own p50, as it was told.
The study ``<name>`` holds what defines the study (workload, space, protocol, sampler, limits)
and the finalists' re-measurements, and no trial.

A study made by tuner 0.1.0 before 2026-11-30 (79eef4c) holds every trial in ``<name>``: it is
read and resumed as that one study, as before (its Optuna front mixes batch sizes; ``tuner show``
gives one per batch size).

The tuner names a trial by a number unique in the study (the Parquet's ``trial_number``, the
trial folders, the finalists' records): the trial's id in the storage, which optuna-dashboard
shows as ``trial_id``; in a study made by tuner 0.1.0 before 2026-11-30 (79eef4c), the trial's
number there.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Container, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.data.select import PARETO_OBJECTIVES, Constraints
from tuner.domain.config import TrialConfig
from tuner.domain.space import SearchSpace
from tuner.study.sampler import DEFAULT_SAMPLER

# user attribute of <name>; a study of tuner 0.1.0 before 2026-11-30 (79eef4c) has none
LAYOUT_ATTR = "tuner.layout"
PER_BATCH_SIZE = "per_batch_size"


def front_name(name: str, batch_size: int) -> str:
    """The Optuna study of ``batch_size``'s trials. A tuner study's name holds no ``:``
    (:func:`tuner.domain.layout.check_name`), so this never names another tuner study."""
    return f"{name}:bs{batch_size}"


@dataclasses.dataclass(frozen=True)
class StoredTrial:
    """One trial of the study: the Optuna study it lives in, Optuna's record of it, and the
    tuner's number for it."""

    study: optuna.Study
    frozen: FrozenTrial
    number: int


class Fronts:
    """The Optuna studies of one tuner study (see the module's docstring)."""

    def __init__(self, main: optuna.Study, storage: optuna.storages.BaseStorage,
                 studies: dict[int, optuna.Study]) -> None:
        self.main, self.storage = main, storage
        self._studies = dict(studies)  # batch size -> the study its trials live in
        # (study name, Optuna's number) -> the storage's trial id; ids never change.
        self._ids: dict[tuple[str, int], int] = {}
        self._study_ids: dict[str, int] = {}
        # How it samples; tuner.study.storage.open_study sets what the study stored.
        self.sampler: str = DEFAULT_SAMPLER
        self.limits = Constraints()
        # The studies it started from and the configs they gave
        # (tuner.study.start_plan.StartFrom, as a dict); None: none.
        self.start_from: dict[str, Any] | None = None

    @classmethod
    def open(cls, main: optuna.Study, storage: optuna.storages.BaseStorage,
             batch_sizes: Sequence[int], sampler: Callable[[], optuna.samplers.BaseSampler]
             ) -> Fronts:
        """The study of each batch size, created where missing (each with a new ``sampler()``);
        a study of tuner 0.1.0 before 2026-11-30, 79eef4c (trials in ``main``, no layout
        attribute), stays one study."""
        if main.user_attrs.get(LAYOUT_ATTR) != PER_BATCH_SIZE:
            if main.get_trials(deepcopy=False):
                return cls(main, storage, {bs: main for bs in batch_sizes})
            main.set_user_attr(LAYOUT_ATTR, PER_BATCH_SIZE)
        studies = {}
        for bs in batch_sizes:
            study = optuna.create_study(
                study_name=front_name(main.study_name, bs), storage=storage, sampler=sampler(),
                directions=["minimize"] * len(PARETO_OBJECTIVES), load_if_exists=True)
            if study.metric_names is None:
                study.set_metric_names(list(PARETO_OBJECTIVES))
            studies[bs] = study
        return cls(main, storage, studies)

    @property
    def per_batch_size(self) -> bool:
        """False for a study of tuner 0.1.0 before 2026-11-30 (79eef4c), whose trials all live in
        ``main``."""
        return any(study is not self.main for study in self._studies.values())

    def of(self, batch_size: int) -> optuna.Study:
        """The study that holds (and samples) the trials of ``batch_size``."""
        return self._studies[batch_size]

    def batch_size_of(self, study: optuna.Study) -> int | None:
        """The batch size whose trials ``study`` holds; None for ``main`` (all of them)."""
        if study.study_name == self.main.study_name:
            return None
        return next(bs for bs, s in self._studies.items() if s.study_name == study.study_name)

    def studies(self) -> list[optuna.Study]:
        """The studies that hold trials: one per batch size, or ``main`` alone."""
        return list({s.study_name: s for s in self._studies.values()}.values())

    def trials(self, states: Sequence[TrialState] | None = None) -> list[StoredTrial]:
        """Every trial of every batch size (in ``states``, if given)."""
        return [StoredTrial(study, t, self.number(study, t.number)) for study in self.studies()
                for t in study.get_trials(deepcopy=False, states=states)]

    def number(self, study: optuna.Study, optuna_number: int) -> int:
        """The tuner's number of the trial ``optuna_number`` of ``study``."""
        if study.study_name == self.main.study_name:
            return optuna_number
        return self.trial_id(study, optuna_number)

    def trial_id(self, study: optuna.Study, optuna_number: int) -> int:
        """The storage's id of the trial ``optuna_number`` of ``study``."""
        key = (study.study_name, optuna_number)
        if key not in self._ids:
            self._ids[key] = self.storage.get_trial_id_from_study_id_trial_number(
                self.study_id(study), optuna_number)
        return self._ids[key]

    def study_id(self, study: optuna.Study) -> int:
        """The storage's id of ``study``."""
        if study.study_name not in self._study_ids:
            self._study_ids[study.study_name] = self.storage.get_study_id_from_name(
                study.study_name)
        return self._study_ids[study.study_name]

    def id_of(self, number: int) -> int:
        """The storage's id of the tuner's trial ``number``."""
        return self.trial_id(self.main, number) if not self.per_batch_size else number

    def find(self, number: int) -> StoredTrial:
        """The tuner's trial ``number``."""
        found = next((t for t in self.trials() if t.number == number), None)
        if found is None:
            raise KeyError(f"no trial {number} in study {self.main.study_name!r}")
        return found

    def next_front(self, space: SearchSpace, taken: Callable[[str], bool],
                   queued: dict[str, int], skip: Container[int],
                   configs: Sequence[TrialConfig]) -> tuple[optuna.Study, int | None] | None:
        """Which study to ask for the next trial, and the batch size it samples (None: the
        sampler of a study of tuner 0.1.0 before 2026-11-30 (79eef4c) picks it).

        A queued trial first, the oldest of all (the baselines, in order, then configs queued
        again); ``queued`` maps a study's name to its oldest queued trial's number. Otherwise,
        of the batch sizes not in ``skip`` that still have a config nobody has ``taken``, the
        one with the fewest taken, so that trials spread over the batch sizes. None when
        nothing is left to ask for. ``configs``: the space's, made once by the caller (made
        here after every trial, they were 8 % of a large search's own time, as
        benchmarks/study_growth.py measures it)."""
        if queued:
            name = min(queued, key=queued.__getitem__)
            study = next(s for s in self.studies() if s.study_name == name)
            return study, self.batch_size_of(study)
        counts: collections.Counter[int] = collections.Counter()  # taken, by batch size
        left: set[int] = set()  # batch sizes with a config nobody has taken
        for config in configs:
            if taken(config.key):
                counts[config.batch_size] += 1
            else:
                left.add(config.batch_size)
        open_ = [bs for bs in space.batch_sizes if bs not in skip and bs in left]
        if not open_:
            return None
        if not self.per_batch_size:
            return self.main, None
        batch_size = min(open_, key=counts.__getitem__)  # ties: the first listed
        return self.of(batch_size), batch_size
