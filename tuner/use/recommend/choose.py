"""Choosing what a study recommends: the arguments checked, the rows of the batch size asked
for, the configs that meet the limits, the best of them for the objective, and the record of it.
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data import files
from tuner.data.measured import Measured
from tuner.data.noise import UNDECIDED, p50s_of, row_verdict, within_noise
from tuner.data.plain import gain_over_plain
from tuner.data.rows import NAME, config_of, plain
from tuner.data.select import OBJECTIVES, Constraints, best, eligible
from tuner.domain.records import FINGERPRINT_FIELDS
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.use.environment import MismatchWarning, environment_mismatch
from tuner.use.recommend.errors import BatchSizeNeeded, LimitsUnmet, sizes_text
from tuner.use.recommend.recommendation import Recommendation, check_flag
from tuner.use.recommend.why_eager import why_eager, why_none


def recommend(
    study: str | Path,
    batch_size: int | None = None,
    objective: str = "latency",
    max_vram_gb: float | None = None,
    max_compile_s: float | None = None,
    max_latency_ms: float | None = None,
    max_p99_ms: float | None = None,
    strict: bool = False,
) -> Recommendation:
    """The best config of a study for one objective, within the limits given.

    Args:
        study: a study folder or its trials.parquet (not pareto.parquet: it lacks the eager
            rows the choice is made against).
        batch_size: the batch size to serve. ``None``: the study's only batch size; when it
            measured several, only ``objective="throughput"`` may choose among them.
        objective: ``latency`` (median per call), ``throughput`` (items per second),
            ``memory`` (while serving), ``warmup`` (compile plus settling) or ``traffic``
            (the whole replay of the study's shape schedule, recompiles included).
        max_vram_gb, max_compile_s, max_latency_ms, max_p99_ms: limits, see
            :class:`Constraints`: memory, the first call, the p50 and the p99 per request.
        strict: refuse (raise :class:`UserError`) instead of warning when the study was made on
            another GPU, driver or torch than this process runs, or its machine is unknown.

    Ties on the objective go to the lower p90 latency (a finalist's median), then the cheaper warm-up, then the
    earlier trial.

    Raises:
        UserError: unreadable study (or one that is not a path), unknown objective or batch
            size, a limit that is not a positive number, ``strict`` not a bool, nothing meets
            the limits (the message names the closest config and the limit it breaks), or,
            with ``strict``, another environment.

    Example:
        >>> rec = recommend("studies/resnet18-cuda", batch_size=32, max_compile_s=60)  # doctest: +SKIP
        >>> model = rec.apply(model)                                                  # doctest: +SKIP
    """
    _check_arguments(objective, strict, batch_size)
    constraints = Constraints(max_vram_gb, max_compile_s, max_latency_ms, max_p99_ms)
    df, meta, path = files.load(study)
    name = str(meta.get("study") or path.parent.name)
    df, where = _at_batch_size(df, name, batch_size, objective)
    candidates, feasible = _feasible(df, where, constraints, objective)
    chosen = best(feasible, objective)

    by_latency = objective in ("latency", "throughput")
    undecided, processes = _undecided_of(chosen, feasible) if by_latency else ((), None)
    fingerprint = _row_fingerprint(chosen) or dict((meta.get("fingerprints") or [{}])[0])
    config = config_of(chosen)
    # What the chosen trial ran with: apply and the snippet set it up that way.
    workload = config.applied_to(_workload(meta, chosen))
    mismatch = tuple(environment_mismatch(fingerprint, workload.device))
    if mismatch:
        text = f"study {name!r}: " + "; ".join(mismatch)
        if strict:
            raise UserError(f"{text} (strict: refusing; rerun the search on this machine)")
        warnings.warn(text, MismatchWarning, stacklevel=2)
    return Recommendation(
        study=name, path=path, objective=objective, constraints=constraints,
        config=config, workload=workload, measured=Measured.from_row(chosen),
        trial_number=int(chosen["trial_number"]), candidates=len(feasible),
        fingerprint=fingerprint, mismatch=mismatch,
        row={k: plain(v) for k, v in chosen.items()},
        within_noise=_within_noise_of(chosen, feasible) if by_latency else (),
        undecided=undecided, processes_to_decide=processes,
        why_eager="" if config.compiled else why_eager(chosen, df, candidates, feasible,
                                                       constraints, objective,
                                                       _unmeasured_compiled(meta, df)),
        search_limits=_search_limits(meta, constraints),
        vs_plain=gain_over_plain(chosen, df, meta))


def _check_arguments(objective: str, strict: bool, batch_size: int | None) -> None:
    """Refuse an objective, ``strict`` or batch size of the wrong kind, before the study is read."""
    if not isinstance(objective, str) or objective not in OBJECTIVES:  # a list is unhashable
        raise UserError(f"unknown objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    check_flag("strict", strict)
    if batch_size is not None and (isinstance(batch_size, bool)
                                   or not isinstance(batch_size, numbers.Integral)):
        # "32" would be "not measured" beside a list that holds 32; True would be batch size 1
        raise UserError(f"batch_size must be an int such as 32, not {batch_size!r}")


def _at_batch_size(df: pd.DataFrame, name: str, batch_size: int | None,
                   objective: str) -> tuple[pd.DataFrame, str]:
    """The rows the choice is made among (those of ``batch_size``, or every batch size for
    throughput given none), and where that is in words (``study 'x' at batch size 8``)."""
    sizes = sorted(int(b) for b in df["batch_size"].dropna().unique())
    if batch_size is not None:
        if batch_size not in sizes:
            raise UserError(f"study {name!r} did not measure batch size {batch_size}; it measured "
                            f"{sizes_text(sizes) or 'none'}")
        df = df[df["batch_size"] == batch_size]
    elif len(sizes) > 1 and objective != "throughput":
        raise BatchSizeNeeded(name, sizes)

    where = f"study {name!r}"
    if batch_size is not None or len(sizes) == 1:
        where += f" at batch size {batch_size if batch_size is not None else sizes[0]}"
    return df, where


def _feasible(df: pd.DataFrame, where: str, constraints: Constraints,
              objective: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows that may be recommended, and those of them that meet the limits: refused where
    none may be, the objective was not measured, or none meets the limits."""
    candidates = eligible(df)
    if candidates.empty:
        raise UserError(f"no config of {where} both finished and passed the correctness check "
                        f"({why_none(df)}); nothing can be recommended")
    column = OBJECTIVES[objective].column
    if pd.to_numeric(candidates[column], errors="coerce").isna().all():
        raise UserError(f"{where} has no {column}: objective {objective} needs a study searched "
                        "with --shape-schedule")
    feasible = candidates[[not constraints.violations(r) for _, r in candidates.iterrows()]]
    if feasible.empty:
        raise LimitsUnmet(where, candidates, constraints, objective)
    return candidates, feasible


def _search_limits(meta: dict[str, Any], given: Constraints) -> Constraints:
    """The limits the study's search was given (its files' ``limits``) that ``given`` leaves
    unset; none where the files hold none (a search given no limits, or files of tuner 0.1.0
    before 2026-12-06, 923a299), or none that can be read."""
    stored = meta.get("limits")
    if not isinstance(stored, dict):
        return Constraints()
    unset = {k for k, v in given.to_dict().items() if v is None}
    try:
        return Constraints(**{k: v for k, v in stored.items() if k in unset and v is not None})
    except (UserError, TypeError):
        return Constraints()


def _unmeasured_compiled(meta: dict[str, Any], df: pd.DataFrame) -> int:
    """How many compiled configs of the study's space, at the batch sizes of ``df``, have no
    row yet (a search still going, or stopped early)."""
    try:
        space = SearchSpace.from_dict(meta["space"])
    except (KeyError, TypeError, ValueError):
        return 0
    sizes, have = set(df["batch_size"]), set(df["config_key"])
    return sum(c.compiled and c.batch_size in sizes and c.key not in have
               for c in space.configs())


def _within_noise_of(chosen: pd.Series, feasible: pd.DataFrame) -> tuple[str, ...]:
    """Names of the other feasible configs at the same batch size within noise of
    ``chosen`` (:func:`tuner.data.noise.within_noise`)."""
    same = feasible[(feasible["batch_size"] == chosen["batch_size"])
                    & (feasible["trial_number"] != chosen["trial_number"])]
    return tuple(str(r[NAME]) for _, r in same.iterrows() if within_noise(chosen, r))


def _undecided_of(chosen: pd.Series, feasible: pd.DataFrame
                  ) -> tuple[tuple[str, ...], int | None]:
    """Names of the other feasible configs at the same batch size that ``chosen`` is undecided
    against, both measured in two processes or more (:func:`tuner.data.noise.verdict`: neither
    faster beyond noise, and their processes do not overlap), and the processes each would need
    to decide them all (None where not known)."""
    if len(p50s_of(chosen)) < 2:
        return (), None
    same = feasible[(feasible["batch_size"] == chosen["batch_size"])
                    & (feasible["trial_number"] != chosen["trial_number"])]
    found = [(str(r[NAME]), v) for _, r in same.iterrows()
             if len(p50s_of(r)) >= 2 and (v := row_verdict(chosen, r)).outcome == UNDECIDED]
    needed = [v.processes for _, v in found]
    known = None if not needed or None in needed else max(n for n in needed if n is not None)
    return tuple(name for name, _ in found), known


def _workload(meta: dict[str, Any], row: pd.Series) -> Workload:
    if meta.get("workload"):
        return Workload.from_dict(meta["workload"])
    fields = {f.name for f in dataclasses.fields(Workload)}
    return Workload.from_dict({k: plain(row.get(k)) for k in fields
                               if plain(row.get(k)) is not None})


def _row_fingerprint(row: pd.Series) -> dict[str, Any]:
    fp = {k: plain(row.get(f"fp_{k}")) for k in FINGERPRINT_FIELDS}
    return fp if any(v is not None for v in fp.values()) else {}
