"""The sampler, made in one place, and what it is told of each trial.

Each batch size's Optuna study has a sampler of the kind the study was made with
(``tuner search --sampler``, stored with the study). It is told each trial's objectives and
constraints, both read from the trial's Parquet row as the trial ends, so the sampler,
``study.best_trials`` and ``pareto.parquet`` see the same numbers (until the finalists are
measured again: :mod:`tuner.data.select`):

* objectives: :data:`tuner.data.select.PARETO_OBJECTIVES`, each ``inf`` for a trial the tuner
  never compares (it failed, its output did not match eager, it ran no compiled code): such a
  trial is told, not dropped, and is never on a front;
* constraints, in Optuna's sense (at most 0: feasible), in the order of :data:`CONSTRAINTS`:
  ``unverified`` is 1 for such a trial, else 0; ``max_vram_gb`` and ``max_compile_s`` are
  ``value / limit - 1`` (negative: headroom) under the study's limits, 0 without a limit.

So an out-of-memory or timed-out config is an infeasible point the sampler learns to avoid.
``study.best_trials`` of a batch size (which skips infeasible trials) is the tuner's Pareto set
there, less any config over a limit; optuna-dashboard's front, which reads no constraints, is
the tuner's Pareto set.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from tuner.data.rows import num
from tuner.data.select import PARETO_OBJECTIVES, Constraints
from tuner.errors import UserError

if TYPE_CHECKING:
    import optuna
    import pandas as pd
    from optuna.trial import FrozenTrial

# tpe: multivariate TPE over the conditional space, constant liar for concurrent workers.
# nsga2, nsga3: Optuna's NSGA-II and NSGA-III, constrained domination. gp: Optuna's Gaussian
# process sampler (needs scipy). random: the control.
SAMPLERS = ("tpe", "nsga2", "nsga3", "gp", "random")
DEFAULT_SAMPLER = "tpe"
CONSTRAINTS = ("unverified", "max_vram_gb", "max_compile_s")
# The trial system attribute Optuna's samplers, Study.best_trials and optuna-dashboard read the
# constraints from (a list, in the order of CONSTRAINTS).
CONSTRAINTS_ATTR = "constraints"


def check_sampler(kind: str) -> str:
    """``kind`` if it names a sampler; else a one-line error listing them."""
    if kind not in SAMPLERS:
        raise UserError(f"unknown sampler {kind!r}: choose {', '.join(SAMPLERS)} "
                        f"(e.g. --sampler {DEFAULT_SAMPLER})")
    return kind


def make_sampler(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    """The sampler ``kind`` (one of :data:`SAMPLERS`), seeded, reading each trial's constraints."""
    import optuna

    check_sampler(kind)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # Optuna 5 samplers read every trial's constraints from the storage by themselves (and
    # deprecate constraints_func); those of 4.x only when given a constraints_func.
    told: dict[str, Any] = {} if _reads_constraints_itself(version("optuna")) else {
        "constraints_func": stored_constraints}
    with warnings.catch_warnings():  # group, and constraints_func in 4.x, are "experimental"
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if kind == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed, **told)
        if kind == "nsga3":
            return optuna.samplers.NSGAIIISampler(seed=seed, **told)
        if kind == "gp":
            _needs("scipy", "--sampler gp")
            # The conditional options (inductor only) are outside GP's joint space: sampled
            # at random, as Optuna says at every trial unless told not to.
            return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False, **told)
        return optuna.samplers.TPESampler(multivariate=True, group=True, constant_liar=True,
                                          seed=seed, **told)


def _needs(module: str, what: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UserError(f"{what} needs {module}: pip install {module}")


def stored_constraints(trial: FrozenTrial) -> Sequence[float]:
    """The constraints the search stored on ``trial`` before telling it; none (a duplicate the
    search pruned) counts as feasible."""
    return list(trial.system_attrs.get(CONSTRAINTS_ATTR) or [0.0] * len(CONSTRAINTS))


def _reads_constraints_itself(optuna_version: str) -> bool:
    return int(optuna_version.split(".")[0]) >= 5


def objective_values(row: Mapping[str, Any], verified: bool) -> list[float]:
    """What the sampler is told to minimise, from the trial's Parquet row; ``inf`` for a trial
    the tuner does not compare (``verified`` False)."""
    values = [num(row.get(column)) if verified else None for column in PARETO_OBJECTIVES]
    return [math.inf if v is None else float(v) for v in values]


def constraint_values(row: pd.Series, verified: bool, limits: Constraints) -> list[float]:
    """The trial's constraints (see the module's docstring); ``verified``: the row is one the
    tuner compares (:func:`tuner.data.select.comparable`)."""
    excess = limits.excess(row)
    return [0.0 if verified else 1.0] + [excess.get(name) or 0.0 for name in CONSTRAINTS[1:]]
