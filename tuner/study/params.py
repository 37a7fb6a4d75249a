"""A config as Optuna's parameters, and back: the space's conditional structure (a mode only
for inductor, ``dynamic`` only when compiled) keeps impossible combinations out."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.spec.config import EAGER, INDUCTOR, TrialConfig
from tuner.spec.space import SearchSpace


def suggest(trial: optuna.Trial, space: SearchSpace) -> TrialConfig:
    """Ask Optuna for one config; the conditional structure keeps impossible combos out."""
    batch_size = trial.suggest_categorical("batch_size", list(space.batch_sizes))
    backend = trial.suggest_categorical("backend", list(space.backends))
    mode = trial.suggest_categorical("mode", list(space.modes)) if backend == INDUCTOR else None
    dynamic = (trial.suggest_categorical("dynamic", list(space.dynamic))
               if backend != EAGER else None)
    return TrialConfig(backend=backend, batch_size=batch_size, mode=mode, dynamic=dynamic)


def params_of(config: TrialConfig) -> dict[str, Any]:
    params: dict[str, Any] = {"batch_size": config.batch_size, "backend": config.backend}
    if config.backend == INDUCTOR:
        params["mode"] = config.mode
    if config.compiled:
        params["dynamic"] = config.dynamic
    return params
