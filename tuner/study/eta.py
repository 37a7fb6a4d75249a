"""The search's ETA: the configs left, each estimated from this run's trials of the same label or
kind (a compile costs far more than an eager trial), shared among the workers, and the
finalists' re-measurements that follow the search (each a fresh process, as a trial is)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Hashable, Iterable, Sequence

from tuner.domain.config import TrialConfig


def eta(history: list[tuple[TrialConfig, float]], left: list[TrialConfig], measured: int,
        target: int | None, workers: int = 1, overhead_s: float = 0.0,
        then: Sequence[TrialConfig] = (), joins: float = 0.0) -> float | None:
    """Seconds until the search ends, or None where that cannot be told: each config ``left``
    (the queued baselines included) estimated from this run's trials (``history``) of the same
    label, else of the same kind; a compile costs far more than an eager trial, so one mean over
    both would be wrong whichever kind is left. ``workers``: those measuring the study now,
    this one included, which share what is left (a fleet's each said the whole of it).
    ``overhead_s``: this process's own time a trial, between trials (on a busy box, as much
    as a fake trial). ``then``: the re-measurements of the finalists on the front now, once
    the search ends (a config once for each), by this run's seconds of a trial like them;
    ``joins``: those each config left is expected to bring as it joins the front. A make demo on
    a loaded box said "at least 3 min" with two compiles and 8 re-measurements, 15 minutes, to
    go."""
    if not history:
        return None
    seconds = _TrialSeconds(history)
    estimates = [seconds.estimate(config) + overhead_s for config in left]
    count = len(estimates) if target is None else min(len(estimates), target - measured)
    if count <= 0:
        return None
    # Which configs a --trials target leaves unmeasured is the sampler's choice: the mean of all.
    # The search process re-measures the finalists alone, after its workers.
    mean_s = sum(estimates) / len(estimates)
    return count * mean_s / max(1, workers) + sum(seconds.estimate(c) for c in then) + \
        count * joins * (mean_s - overhead_s)


def shown_eta(eta: float | None, deadline: float | None,
              at_least: bool) -> tuple[float | None, bool]:
    """The event's ``eta_s`` and ``eta_at_least``: an ETA past the --budget's end is the
    budget's end, when the search stops, and not a floor however little has been timed."""
    if eta is not None and deadline is not None:
        budget_left = max(0.0, deadline - time.monotonic())
        if eta >= budget_left:
            return budget_left, False
    return eta, at_least


class _TrialSeconds:
    """A trial's seconds, from this run's trials (``history``, not empty) of the same label (the
    same backend and mode compile alike at any batch size), else of the same kind (compiled or
    eager), else any. The means are taken once: the estimate is asked for every config left,
    after every trial."""

    def __init__(self, history: list[tuple[TrialConfig, float]]) -> None:
        self.by_label = _means((config.label, s) for config, s in history)
        self.by_kind = _means((config.compiled, s) for config, s in history)
        self.every = statistics.fmean(s for _, s in history)

    def estimate(self, config: TrialConfig) -> float:
        label = self.by_label.get(config.label)
        if label is not None:
            return label
        return self.by_kind.get(config.compiled, self.every)


def _means(pairs: Iterable[tuple[Hashable, float]]) -> dict[Hashable, float]:
    groups: dict[Hashable, list[float]] = {}
    for key, seconds in pairs:
        groups.setdefault(key, []).append(seconds)
    return {key: statistics.fmean(values) for key, values in groups.items()}
