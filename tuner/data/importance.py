"""Which knobs matter: how much each searched parameter decided each objective, per batch size,
computed by Optuna's own parameter-importance code (PED-ANOVA,
:class:`optuna.importance.PedAnovaImportanceEvaluator`, through
:func:`optuna.importance.get_param_importances`; it needs nothing beyond Optuna, where fANOVA
needs scikit-learn). A parameter's importance for an objective is how differently its values
are spread among the best rows (:func:`top_fraction`) than among all rows of the batch size;
the importances of one objective sum to 1.

The trials come from the Parquet rows, not from the Optuna storage:

* one batch size at a time: latency at batch size 1 and at 32 are not comparable, and the
  storage may hold every batch size in one Optuna study;
* the rows :func:`tuner.data.select.eligible` admits (finished, matched eager, ran compiled),
  the rows ``show`` and ``recommend`` judge; a failed trial has no latency to explain;
* the parameters are the Parquet's columns (``backend``, ``mode``, ``dynamic``, ``dtype``,
  ``channels_last``, ``cudnn_benchmark``, ``compile_scope``, one ``opt_*`` per inductor option),
  the names every other view uses;
* it works on a ``trials.parquet`` alone: a committed study, files copied from another host.

A parameter that applies to some rows only (``mode`` and the options: inductor's; ``dynamic``
and ``compile_scope``: the compiled rows') is judged among those rows alone, in an Optuna study
of its own with the other parameters of the same rows: judged across every row, its value ``-``
on the eager rows would stand in for "compiled or not", and an option that changes nothing
would score as much as ``backend`` whenever eager wins or loses. The shares of the groups are
then normalised together. A parameter is left out where it took one value at that batch size,
among the rows it applies to; where it applies to fewer than :data:`MIN_ROWS` rows it is not
judged, and :attr:`BatchImportance.unjudged` says so.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.data.rows import plain
from tuner.data.schema import is_option_column
from tuner.data.select import PARETO_OBJECTIVES, eligible
from tuner.domain.config import EAGER, INDUCTOR
from tuner.words import plural

EVALUATOR = "PED-ANOVA (optuna.importance.PedAnovaImportanceEvaluator)"
# The objectives the search minimises, by their tuner names, as each trial measured them (a
# finalist's latency too: its search trial's own p50, what Optuna was told).
IMPORTANCE_OBJECTIVES: dict[str, str] = dict(zip(("latency", "memory", "warmup"),
                                                 PARETO_OBJECTIVES, strict=True))
# The tuner's own dimensions, as Parquet columns; the inductor options' opt_* columns follow.
PARAMETERS = ("backend", "mode", "dynamic", "dtype", "channels_last", "cudnn_benchmark",
              "compile_scope")
NOT_APPLICABLE = "-"
# Fewer rows, or fewer parameters that vary, and an importance says nothing.
MIN_ROWS = 4
MIN_PARAMETERS = 2
# PED-ANOVA compares the best rows with all of them: Optuna's default is the best 10 %, and its
# documentation prefers 5 rows or more there; a batch size of a study holds tens of rows, not
# hundreds, so at least 5 are taken (at most half the rows).
TOP_FRACTION, TOP_ROWS, TOP_MAX_FRACTION = 0.1, 5, 0.5


def top_fraction(rows: int) -> float:
    """The share of rows PED-ANOVA treats as the best (its ``target_quantile``)."""
    return min(TOP_MAX_FRACTION, max(TOP_FRACTION, TOP_ROWS / rows))


def top_rows(rows: int) -> int:
    """How many rows that share is (ties with the last one count too)."""
    return math.ceil(top_fraction(rows) * rows)


@dataclasses.dataclass(frozen=True)
class BatchImportance:
    """The importances at one batch size.

    ``importances`` maps an objective of :data:`IMPORTANCE_OBJECTIVES` to each parameter's
    share (they sum to 1), highest first; ``skipped`` says why an objective has none. ``note``
    says why the batch size has no importances at all (too few rows or varying parameters).
    """

    batch_size: int
    rows: int  # eligible rows at this batch size
    parameters: tuple[str, ...]  # the parameters that varied there
    importances: Mapping[str, Mapping[str, float]]
    skipped: Mapping[str, str]
    note: str | None = None
    # parameters that vary but apply to too few rows to be judged, and why
    unjudged: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # parameters judged among fewer rows than all (those they apply to), and how many
    judged_among: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def best_rows(self) -> int:
        """How many of the rows count as the best (see :func:`top_rows`)."""
        return top_rows(self.rows) if self.rows else 0

    def to_dict(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "rows": self.rows, "best_rows": self.best_rows,
                "parameters": list(self.parameters),
                "importances": {o: dict(v) for o, v in self.importances.items()},
                "skipped": dict(self.skipped), "note": self.note,
                "unjudged": dict(self.unjudged), "judged_among": dict(self.judged_among)}


def parameters_of(trials: pd.DataFrame) -> list[str]:
    """The parameter columns a frame holds: the tuner's dimensions, then the inductor options."""
    return [p for p in PARAMETERS if p in trials] + sorted(
        c for c in trials.columns if is_option_column(c))


def _applies(parameter: str, backend: str) -> bool:
    if parameter == "mode" or is_option_column(parameter):
        return backend == INDUCTOR
    if parameter in ("dynamic", "compile_scope"):
        return backend != EAGER
    return True


def _value(row: pd.Series, parameter: str) -> str:
    """A row's value of a parameter as an Optuna category: text, ``-`` where it does not apply."""
    if not _applies(parameter, str(row["backend"])):
        return NOT_APPLICABLE
    value = plain(row[parameter])
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


def encode(rows: pd.DataFrame) -> pd.DataFrame:
    """The parameter columns of ``rows`` as the categories Optuna sees."""
    return pd.DataFrame({p: [_value(r, p) for _, r in rows.iterrows()]
                         for p in parameters_of(rows)}, index=rows.index)


def varying(rows: pd.DataFrame) -> list[str]:
    """The parameters that took two values or more among the rows they apply to."""
    params = encode(rows)
    return [p for p in params
            if params[p][params[p] != NOT_APPLICABLE].nunique() >= 2]


def importances(trials: pd.DataFrame) -> list[BatchImportance]:
    """Per batch size of ``trials``, the importance of each parameter that varied there, for
    each of :data:`IMPORTANCE_OBJECTIVES`, from the eligible rows of that batch size alone."""
    ok = eligible(trials)
    return [_one_batch_size(int(bs), ok[ok["batch_size"] == bs])
            for bs in sorted(pd.to_numeric(trials["batch_size"]).dropna().unique())]


def _one_batch_size(batch_size: int, rows: pd.DataFrame) -> BatchImportance:
    params = varying(rows) if len(rows) else []
    note = None
    if len(rows) < MIN_ROWS:
        note = f"{plural(len(rows), 'verified row')}, too few for importances (at least {MIN_ROWS})"
    elif len(params) < MIN_PARAMETERS:
        which = f" ({params[0]})" if params else ""
        note = (f"{len(params)} parameter{'' if len(params) == 1 else 's'} varied{which}, too "
                f"few for importances (at least {MIN_PARAMETERS}): search more dimensions")
    if note is not None:
        return BatchImportance(batch_size, len(rows), tuple(params), {}, {}, note)
    encoded = encode(rows)[params]
    groups = _groups(encoded)
    unjudged = {p: f"applies to {plural(len(index), 'row')}, too few to judge (at least {MIN_ROWS})"
                for index, group in groups for p in group if len(index) < MIN_ROWS}
    fewer = {p: len(index) for index, group in groups for p in group
             if MIN_ROWS <= len(index) < len(rows)}
    found: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    for objective in IMPORTANCE_OBJECTIVES:
        values = pd.to_numeric(rows[IMPORTANCE_OBJECTIVES[objective]], errors="coerce")
        known = values[values.map(lambda v: v is not None and math.isfinite(v))]
        if len(known) < MIN_ROWS:
            have = "has" if len(known) == 1 else "have"
            skipped[objective] = (f"{plural(len(known), 'row')} {have} a value, too few "
                                  f"(at least {MIN_ROWS})")
        elif known.nunique() < 2:
            skipped[objective] = "every row has the same value"
        else:
            raw: dict[str, float] = {}
            for index, group in groups:
                if len(index) < MIN_ROWS:
                    continue
                among = known[known.index.isin(index)]
                judged = [p for p in group if encoded.loc[among.index, p].nunique() >= 2]
                if len(among) < MIN_ROWS or among.nunique() < 2 or not judged:
                    raw.update(dict.fromkeys(judged, 0.0))  # nothing to tell apart there
                else:
                    raw.update(_evaluate(encoded.loc[among.index, judged], among))
            total = sum(raw.values())
            if not total > 0:
                skipped[objective] = "no parameter sets the best rows apart from the others"
            else:
                found[objective] = dict(sorted(((p, v / total) for p, v in raw.items()),
                                               key=lambda item: -item[1]))
    return BatchImportance(batch_size, len(rows), tuple(params), found, skipped,
                           unjudged=unjudged, judged_among=fewer)


def _groups(encoded: pd.DataFrame) -> list[tuple[pd.Index, list[str]]]:
    """The parameters by the rows they apply to (not :data:`NOT_APPLICABLE`): all rows for
    ``backend`` and the precision, the compiled rows for ``dynamic``, inductor's for ``mode``
    and the options."""
    by_rows: dict[tuple[Any, ...], list[str]] = {}
    for p in encoded:
        by_rows.setdefault(tuple(encoded.index[encoded[p] != NOT_APPLICABLE]), []).append(p)
    return [(pd.Index(index), group) for index, group in by_rows.items()]


def quantile_of(values: pd.Series) -> float:
    """The share of ``values`` taken as the best: :func:`top_fraction`, unless the rows tied
    with the last of those take in every row (a warm-up shared by every compiled config, say);
    then the rows strictly better than that tie, where there are any."""
    top = top_fraction(len(values))
    ordered = sorted(values)
    cutoff = ordered[math.ceil(top * len(ordered)) - 1]  # as Optuna's quantile filter
    below = sum(v < cutoff for v in ordered)
    if all(v <= cutoff for v in ordered) and below:
        return below / len(ordered)
    return top


def _evaluate(params: pd.DataFrame, values: pd.Series) -> dict[str, float]:
    """Optuna's importances of ``params`` (categories) for ``values`` (lower is better), not
    normalised: how differently each is spread among the best rows (:func:`quantile_of`) than
    among all. Every one is 0 where the best rows, ties included, are all the rows (normalised,
    Optuna would make that equal shares, which would mean nothing)."""
    import optuna
    from optuna.distributions import BaseDistribution, CategoricalDistribution
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    distributions: dict[str, BaseDistribution] = {
        p: CategoricalDistribution(sorted(set(params[p]))) for p in params}
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created" line
    try:
        with warnings.catch_warnings():
            # PED-ANOVA's advice about small studies; the minimums above are ours to say.
            warnings.simplefilter("ignore")
            study = optuna.create_study(direction="minimize")
            study.add_trials([
                optuna.trial.create_trial(params=dict(row), distributions=distributions,
                                          value=float(value))
                for (_, row), value in zip(params.iterrows(), values)])
            found = get_param_importances(
                study, evaluator=PedAnovaImportanceEvaluator(target_quantile=quantile_of(values)),
                params=list(params.columns), normalize=False)
    finally:
        optuna.logging.set_verbosity(verbosity)
    return {p: float(v) for p, v in found.items()}
