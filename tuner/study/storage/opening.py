"""Opening a study: create or load it and the study of each batch size in its storage, checked
against the spec it is asked with."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import cast

import optuna
from optuna.trial import FrozenTrial

from tuner.data.select import PARETO_OBJECTIVES
from tuner.study.fronts import Fronts
from tuner.study.sampler import make_sampler
from tuner.study.spec import StudySpec
from tuner.study.storage.engine import make_storage
from tuner.study.storage.errors import cannot_open
from tuner.study.storage.folder import making_folder, refuse_new_study_over_results
from tuner.study.storage.resume import check_resume, check_start_from
from tuner.study.storage.sqlite_file import refuse_another_apps_sqlite


def open_study(spec: StudySpec,
               on_stale: Callable[[optuna.Study, FrozenTrial], None] | None = None) -> Fronts:
    """Create or load the study and the study of each batch size (:mod:`tuner.study.fronts`);
    refuse to resume one made with another workload, space, sampler or limits.

    ``on_stale``: told of the trials the storage fails for want of heartbeats (a search
    process, :class:`tuner.study.search.Search`, hears of its own).
    """
    from sqlalchemy.exc import SQLAlchemyError

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # Search records heartbeats for its ask/tell trials itself (tuner.study.claims.Heartbeat).
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    given = spec.storage is not None
    if given:
        refuse_another_apps_sqlite(cast(str, spec.storage))
    with making_folder(spec):
        try:
            storage = make_storage(spec.storage_url, on_stale, given=given)
            refuse_new_study_over_results(spec, storage)
            fronts = _open_fronts(spec, storage)
        except (ValueError, ImportError, OSError, SQLAlchemyError) as exc:
            raise cannot_open(spec.storage_url, exc, given) from None
    return fronts


def _open_fronts(spec: StudySpec, storage: optuna.storages.BaseStorage) -> Fronts:
    """:func:`open_study` in an open storage."""
    study = optuna.create_study(
        study_name=spec.name, storage=storage,
        directions=["minimize"] * len(PARETO_OBJECTIVES), load_if_exists=True)
    kind, limits = check_resume(study, spec)
    # A study of tuner 0.1.0 before 2026-11-30 (79eef4c) samples its trials here; a newer one in
    # each batch size's study.
    study.sampler = make_sampler(kind, spec.seed)
    if study.metric_names is None:
        study.set_metric_names(list(PARETO_OBJECTIVES))
    fronts = Fronts.open(study, storage, spec.space.batch_sizes,
                         lambda: make_sampler(kind, spec.seed))
    fronts.sampler, fronts.limits = kind, limits
    fronts.start_from = check_start_from(
        study, None if spec.start_from is None else spec.start_from.to_dict(),
        made=lambda: bool(fronts.trials()))
    return fronts
