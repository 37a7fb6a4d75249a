"""The folders of trials abandoned in flight (Ctrl-C twice, SIGTERM, a search killed): such a
trial has no record and no row, and its config is measured again under another number, so its
folder (``trials/N``: the request, the log so far) and its compile cache are removed, rather
than left beside the study's trials as if one of them."""

from __future__ import annotations

import contextlib
import shutil

import optuna
from optuna.trial import TrialState

from tuner.domain.layout import StudyLayout
from tuner.study.fronts import Fronts
from tuner.study.record import stored_result
from tuner.study.storage import INTERRUPTED_ATTR


def abandon(trial: optuna.Trial, layout: StudyLayout, number: int) -> None:
    """Fail the tuner's trial ``number`` (Optuna's ``trial``), abandoned in flight: it gets no
    row, the next run queues its config again; its folders are removed."""
    with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
        trial.set_user_attr(INTERRUPTED_ATTR, True)
        trial.study.tell(trial, state=TrialState.FAIL)
    remove_folders(layout, number)


def remove_folders(layout: StudyLayout, number: int) -> None:
    """Remove the folder and the compile cache of the tuner's trial ``number``."""
    for path in (layout.trial_dir(number), layout.trial_cache(number)):
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):  # trials/ itself, where it held that trial alone
            path.parent.rmdir()


def remove_abandoned(fronts: Fronts, layout: StudyLayout) -> None:
    """Remove the folders of the study's abandoned trials: those of a search killed before it
    could (a resume calls it once the dead searches' trials are failed)."""
    for stored in fronts.trials(states=(TrialState.FAIL,)):
        if stored.frozen.user_attrs.get(INTERRUPTED_ATTR) and stored_result(stored.frozen) is None:
            remove_folders(layout, stored.number)
