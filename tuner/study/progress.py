"""What a search reports: of each trial (:class:`~tuner.domain.records.TrialEvent`), the configs
the study holds measured, of how many, the best at each batch size and the ETA
(:mod:`tuner.study.eta`); at its end, :class:`SearchSummary`."""

from __future__ import annotations

import collections
import dataclasses
import statistics
import time
from pathlib import Path

import pandas as pd

from tuner.data.rows import NAME, config_of
from tuner.data.select import LATENCY, eligible
from tuner.data.select import not_run as not_run_rows
from tuner.domain.config import TrialConfig
from tuner.domain.naming import PLAIN, NameBasis, config_name
from tuner.domain.records import Status, TrialEvent, TrialResult
from tuner.study.broken import Breakage
from tuner.study.claims import StudyState
from tuner.study.eta import eta, shown_eta


@dataclasses.dataclass(frozen=True)
class SearchSummary:
    directory: Path
    measured: int
    new: int
    stop_reason: str
    trials: pd.DataFrame
    pareto: pd.DataFrame
    stopped: bool = False  # by the user (Ctrl-C, SIGTERM, stop_after_trial or abort)
    skipped: int = 0  # rows of configs skipped without a trial (not in ``measured``)


@dataclasses.dataclass
class Progress:
    """What one run of a search keeps, from one trial to the next, to report each."""

    deadline: float | None  # when the --budget is spent (time.monotonic)
    n_trials: int | None  # the --trials
    # This run's trials and their seconds.
    history: list[tuple[TrialConfig, float]] = dataclasses.field(default_factory=list)
    ended: float | None = None  # when this run's last trial ended (time.monotonic)
    # The other workers measuring the study at each of the last states read (one between
    # two trials included: StudyState.workers): those sharing what is left, for the ETA.
    others: collections.deque[int] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=3))
    # This process's own seconds between trials (files, sampler): the median, as the first
    # holds one-off imports.
    overheads: list[float] = dataclasses.field(default_factory=list)
    # The re-measurements each finalist gets once the search ends (--confirm: the number, or
    # auto's fewest); 0 where the search confirms none.
    confirm_each: int = 0
    names: NameBasis = PLAIN  # what the study's config names are relative to


    def timed(self, config: TrialConfig, t0: float, result: TrialResult) -> None:
        """Keep the seconds of ``config``'s trial, started at ``t0`` (time.monotonic), and this
        process's own before it, which ``result`` records too."""
        # This process's own time since the run's previous trial ended (files, sampler).
        result.tuner_overhead_s = None if self.ended is None else t0 - self.ended
        self.ended = time.monotonic()
        self.history.append((config, time.monotonic() - t0))
        if result.tuner_overhead_s is not None:
            self.overheads.append(result.tuner_overhead_s)

    def event(self, state: StudyState, configs: list[TrialConfig], broken: dict[int, Breakage],
              number: int, config: TrialConfig, result: TrialResult,
              trials: pd.DataFrame, front: pd.DataFrame) -> TrialEvent:
        """Trial ``number``'s event, the study's rows (``trials``) and its Pareto ``front`` read
        after it, ``state`` before; ``configs``: the space's, ``broken``: the batch sizes
        skipped. The finalists to measure again: the front's as it stands, and of the configs
        left, as large a share as the front holds of those measured."""
        measured = measured_now(state, config, trials)
        then = [config_of(row) for _, row in front.iterrows()] * self.confirm_each
        joins = self.confirm_each * len(front) / max(1, len(eligible(trials)))
        left = [c for c in configs if c.key != config.key and c.key not in state.measured
                and c.key not in state.running and c.batch_size not in broken]
        eta_s, eta_at_least = shown_eta(
            eta(self.history, left, measured, self.n_trials, workers=1 + max(self.others),
                overhead_s=statistics.median(self.overheads) if self.overheads else 0.0,
                then=then, joins=joins),
            self.deadline,
            at_least=any(c.compiled for c in left) and not any(c.compiled for c, _ in self.history))
        return TrialEvent(
            number=measured, target=target(self.n_trials, configs, trials),
            trial_number=number,
            config=config, result=result,
            best=best_by_batch(trials),
            eta_s=eta_s, eta_at_least=eta_at_least, name=config_name(config, self.names),
            budget_left_s=None if self.deadline is None else
            max(0.0, self.deadline - time.monotonic()))


def measured_now(state: StudyState, config: TrialConfig, trials: pd.DataFrame) -> int:
    """How many configs the study holds measured once ``config``'s trial is recorded: those of
    ``state`` (read before the trial), this one, and those whose rows other workers wrote while
    it ran (``trials``, read after it). Without these a fleet's workers each counted only their
    own: with 8, each said 1 of N for its first trial. A config skipped as not run is no trial:
    --trials 40 stopped after 4 results where a compile past --compile-timeout skipped 31."""
    rows = trials[(trials["status"] != Status.INTERRUPTED.value) & ~not_run_rows(trials)]
    since = set(rows["config_key"]) - state.recorded
    return len(state.ran | {config.key} | since)


def counted(trials: pd.DataFrame) -> tuple[int, int]:
    """(trials measured, configs skipped without a trial) among a study's rows; an
    interrupted trial's row is neither."""
    skipped = not_run_rows(trials)
    kept = trials["status"].ne(Status.INTERRUPTED.value)
    return int((kept & ~skipped).sum()), int(skipped.sum())


def target(n_trials: int | None, configs: list[TrialConfig], trials: pd.DataFrame) -> int:
    """The trials the progress counts up to: ``--trials``, at most the configs of the space
    that are still to be run or ran (a skipped config leaves the count)."""
    skipped = set(trials.loc[not_run_rows(trials), "config_key"])
    runnable = sum(c.key not in skipped for c in configs)
    return runnable if n_trials is None else min(n_trials, runnable)


def any_ok(df: pd.DataFrame) -> bool:
    return bool((df["status"] == Status.OK.value).any())


def best_by_batch(df: pd.DataFrame) -> dict[int, tuple[str, float]]:
    best = {}
    for bs, group in eligible(df).groupby("batch_size"):
        row = group.loc[pd.to_numeric(group[LATENCY]).idxmin()]  # as show ranks them
        best[int(bs)] = (str(row[NAME]), float(row[LATENCY]))
    return best
