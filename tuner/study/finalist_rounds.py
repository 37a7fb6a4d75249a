"""The finalists' rounds: the Pareto front measured again (:func:`tuner.study.finalists.confirm`),
and again whichever trial joins it on the finalists' medians, until none does."""

from __future__ import annotations

import threading
from collections.abc import Callable

import optuna
import pandas as pd

from tuner.data.derive import listed
from tuner.data.noise import SLOW_CORE_RATIO
from tuner.data.select import pareto, throughput_picks_off_front
from tuner.launch.runner import Runner
from tuner.study import finalists
from tuner.study.export import Exported
from tuner.study.spec import StudySpec


def confirm_rounds(export: Callable[[], Exported], study: optuna.Study,
                   storage: optuna.storages.BaseStorage, spec: StudySpec, runner: Runner,
                   plan: finalists.Repeats, *, on_message: Callable[[str], None],
                   stop: threading.Event, abort: threading.Event,
                   resumes: str) -> list[finalists.ConfirmSummary]:
    """Each round's summary, the last one's where it stopped or measured nothing; ``export``
    writes the study's files and returns them, before each round."""
    rounds: list[finalists.ConfirmSummary] = []
    before: set[int] = set()
    # The front is on the finalists' medians: one measured slower may leave it, and a
    # trial that joins it in its place is measured again in turn, until none is left.
    while not rounds or (rounds[-1].measured and not rounds[-1].stopped):
        exported = export()
        front = exported.pareto
        now = set(front["trial_number"].astype(int))
        if rounds and now - before:
            on_message(_front_moved(before, now))
        before = now
        slow = slow_core_contenders(exported.trials, front)
        if len(slow):
            on_message(_slow_contenders(slow))
        # What recommend --objective throughput picks off the front: measured again
        # too, so that its recommendation is a median over fresh processes as well.
        picks = throughput_picks_off_front(exported.trials, front)
        picks = picks[~picks["trial_number"].isin(slow["trial_number"])]
        if len(picks):
            on_message(_throughput_picks(picks))
        rounds.append(finalists.confirm(
            study, storage, spec, runner, front, plan,
            also=pd.concat([slow, picks]) if len(picks) else slow,
            on_message=on_message, stop=stop, abort=abort, resumes=resumes))
    return rounds


def slow_core_contenders(trials: pd.DataFrame, front: pd.DataFrame) -> pd.DataFrame:
    """Trials off the Pareto ``front`` (:func:`tuner.data.select.pareto` of ``trials``), measured on a slow host core (``host_core_slowdown`` at
    least :data:`tuner.data.noise.SLOW_CORE_RATIO`) and not measured again yet, that would be on
    the front had their p50 been as much faster as their core was slow. A launch-bound config
    reads slow on such a core, so without this it could miss the front for the core's sake;
    measured again in fresh processes like a finalist, it is judged on its median."""
    if trials.empty or "host_core_slowdown" not in trials:
        return trials.iloc[:0]
    slowdown = pd.to_numeric(trials["host_core_slowdown"], errors="coerce")
    unconfirmed = trials["latency_ms_p50_repeats"].map(lambda v: listed(v) == 0)
    flagged = (slowdown >= SLOW_CORE_RATIO) & unconfirmed
    if not flagged.any():
        return trials.iloc[:0]
    p50 = pd.to_numeric(trials["latency_ms_p50"], errors="coerce")
    hopeful = trials.assign(latency_ms_p50=p50.where(~flagged, p50 / slowdown))
    could = set(pareto(hopeful)["trial_number"]) - set(front["trial_number"])
    return trials[flagged & trials["trial_number"].isin(could)]


def combined(rounds: list[finalists.ConfirmSummary]) -> finalists.ConfirmSummary:
    """The rounds as one summary: the last one's finalists and whether it stopped, every
    round's re-measurements."""
    return finalists.ConfirmSummary(
        rounds[-1].finalists, sum(r.measured for r in rounds), sum(r.failed for r in rounds),
        rounds[-1].stopped, tuple(n for r in rounds for n in r.noisy))


def _front_moved(before: set[int], now: set[int]) -> str:
    """What re-measuring did to the front, in words, before its newcomers are measured again."""
    def trials(numbers: set[int]) -> str:
        return f"trial{'s' if len(numbers) > 1 else ''} {', '.join(map(str, sorted(numbers)))}"

    left = f"; {trials(before - now)} left it" if before - now else ""
    return (f"on the finalists' medians the Pareto front changed: {trials(now - before)} joined "
            f"it{left}")


def _slow_contenders(slow: pd.DataFrame) -> str:
    numbers = ", ".join(str(int(n)) for n in sorted(slow["trial_number"]))
    return (f"also measured again: trial{'s' if len(slow) > 1 else ''} {numbers}, off the front "
            "but measured on a slow host core, where a launch-bound config reads slow: had its "
            "p50 been as much faster as its core was slow, it would be on the front")


def _throughput_picks(picks: pd.DataFrame) -> str:
    each = ", ".join(f"{int(r['trial_number'])} at batch size {int(r['batch_size'])}"
                     for _, r in picks.sort_values("trial_number").iterrows())
    return (f"also measured again: trial{'s' if len(picks) > 1 else ''} {each}, off the front "
            "(which ranks what one request waits) but the most items/s back to back, what "
            "`tuner recommend --objective throughput` picks")
