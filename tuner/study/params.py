"""A config as Optuna's parameters, and back: the space's conditional structure (a mode and
inductor options only for inductor, ``dynamic`` only when compiled) keeps impossible
combinations out. Dimensions the space does not search are not asked, so the parameters of a
study made by tuner 0.1.0 before 2026-11-30 (a87c065), before precision, memory format,
cudnn.benchmark and inductor options could be searched, stay what they were."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, cast

import optuna

from tuner.domain.config import EAGER, INDUCTOR, TrialConfig
from tuner.domain.space import SearchSpace

# Optuna's name for an inductor option's parameter: the prefix keeps option names apart from
# the tuner's own dimensions.
OPTION_PARAM = "inductor."


def suggest(trial: optuna.trial.BaseTrial, space: SearchSpace, batch_size: int | None = None
            ) -> TrialConfig:
    """Ask Optuna for one config; the conditional structure keeps impossible combos out.
    ``batch_size``: the one batch size of the trial's study (:mod:`tuner.study.fronts`); None:
    any of the space's (a study of tuner 0.1.0 before 2026-11-30, 79eef4c, holds them all)."""
    batch_size = trial.suggest_categorical(
        "batch_size", list(space.batch_sizes) if batch_size is None else [batch_size])
    backend = trial.suggest_categorical("backend", list(space.backends))
    mode = trial.suggest_categorical("mode", list(space.modes)) if backend == INDUCTOR else None
    # the space's choices of dynamic are bool or None
    dynamic = (cast("bool | None", trial.suggest_categorical("dynamic", list(space.dynamic)))
               if backend != EAGER else None)
    dtype = trial.suggest_categorical("dtype", list(space.dtypes)) if space.dtypes else None
    channels_last = (trial.suggest_categorical("channels_last", list(space.channels_last))
                     if space.channels_last else None)
    cudnn_benchmark = (trial.suggest_categorical("cudnn_benchmark", list(space.cudnn_benchmark))
                       if space.cudnn_benchmark else None)
    options = ({name: trial.suggest_categorical(OPTION_PARAM + name, list(values))
                for name, values in space.options} if backend == INDUCTOR else {})
    scope = (trial.suggest_categorical("compile_scope", list(space.compile_scopes))
             if space.compile_scopes and backend != EAGER else None)
    return TrialConfig(backend=backend, batch_size=batch_size, mode=mode, dynamic=dynamic,
                       dtype=dtype, channels_last=channels_last,
                       cudnn_benchmark=cudnn_benchmark, options=tuple(options.items()),
                       compile_scope=scope)


def params_of(config: TrialConfig) -> dict[str, Any]:
    """The parameters :func:`suggest` gives ``config`` (to enqueue it)."""
    params: dict[str, Any] = {"batch_size": config.batch_size, "backend": config.backend}
    if config.backend == INDUCTOR:
        params["mode"] = config.mode
    if config.compiled:
        params["dynamic"] = config.dynamic
    for name in ("dtype", "channels_last", "cudnn_benchmark"):
        if getattr(config, name) is not None:
            params[name] = getattr(config, name)
    params.update({OPTION_PARAM + name: value for name, value in config.options})
    if config.compile_scope is not None:
        params["compile_scope"] = config.compile_scope
    return params


def nearest(config: TrialConfig, candidates: Sequence[TrialConfig],
            rng: random.Random) -> TrialConfig:
    """The candidate whose parameters differ from ``config``'s in the fewest places (one a
    parameter only one of them has counts too), ties broken by ``rng``: what the search hands
    the sampler when it proposes a config already measured, as near as is left to where it
    was looking."""
    mine = params_of(config)

    def distance(other: TrialConfig) -> int:
        theirs = params_of(other)
        return sum(mine.get(k) != theirs.get(k) for k in mine.keys() | theirs.keys())

    distances = [distance(c) for c in candidates]
    least = min(distances)
    return rng.choice([c for c, d in zip(candidates, distances, strict=True) if d == least])
