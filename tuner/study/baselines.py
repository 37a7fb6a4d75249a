"""The baselines, measured first and in their order (eager at every batch size, then inductor in
each mode: :meth:`tuner.domain.space.SearchSpace.baselines`; with a compile budget, a
max-autotune mode's at one batch size until its compile is known to fit it,
:meth:`tuner.study.probe.Probes.baselines`), on a resume too.

A run queues those no trial holds. The queue is Optuna's: each batch size's study hands out its
oldest waiting trial, and the search asks the study whose oldest is oldest
(:meth:`tuner.study.fronts.Fronts.next_front`). A baseline queued again after the others (its
trial abandoned by Ctrl-C twice or SIGTERM, or its search killed) would come last: inductor
measured before eager. So where one is queued anew, the baselines after it that still wait
give up their places (failed unrun, marked ``REQUEUED_ATTR``) and are queued again behind it.
"""

from __future__ import annotations

from collections.abc import Container

import optuna
from optuna.trial import TrialState

from tuner.domain.config import TrialConfig
from tuner.study.claims import Claims, StudyState
from tuner.study.fronts import StoredTrial
from tuner.study.storage import KEY_ATTR, REQUEUED_ATTR


def queue_baselines(claims: Claims, state: StudyState, baselines: list[TrialConfig],
                    held: Container[int]) -> bool:
    """Queue the ``baselines`` that no trial holds in ``state`` (the study's, read just
    before), in order (see the module's docstring), but not at the batch sizes ``held``
    (broken: the model fails there in eager). Whether any was queued: what is queued after the
    baselines (:mod:`tuner.study.start_from`) then queues again behind them."""
    waiting = waiting_trials(claims)
    behind = False  # a baseline before this one was queued anew
    for config in baselines:
        # Not at a batch size the study holds broken: the run would only prune them.
        if config.batch_size in held:
            continue
        queued = waiting.get(config.key, [])
        if behind and queued:
            if not all([give_up(claims, stored) for stored in queued]):
                continue  # another worker started it meanwhile
        elif state.taken(config.key):
            continue
        claims.enqueue(config)
        behind = True
    return behind


def waiting_trials(claims: Claims) -> dict[str, list[StoredTrial]]:
    """The queued trials not started yet, by their config's key."""
    found: dict[str, list[StoredTrial]] = {}
    for stored in claims.fronts.trials(states=(TrialState.WAITING,)):
        key = stored.frozen.user_attrs.get(KEY_ATTR)
        if key is not None:
            found.setdefault(key, []).append(stored)
    return found


def give_up(claims: Claims, stored: StoredTrial) -> bool:
    """Fail the queued trial ``stored`` unrun; False where another worker started it first.
    Started first (as ``ask`` starts it), so the failed trial has a start, as Optuna's records
    of finished trials must."""
    storage = claims.storage
    trial_id = claims.fronts.trial_id(stored.study, stored.frozen.number)
    try:
        if not storage.set_trial_state_values(trial_id, TrialState.RUNNING):
            return False
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    storage.set_trial_user_attr(trial_id, REQUEUED_ATTR, True)
    storage.set_trial_state_values(trial_id, TrialState.FAIL)
    return True
