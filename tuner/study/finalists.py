"""Finalists: the Pareto set of each batch size, measured again in fresh processes.

One trial is one process, and a second process of the same config can differ by a few percent
(clocks, memory placement, whatever else the machine does). So after the search each finalist
is run ``repeats`` more times, each a whole trial in its own process:

1. on the trial's own compile cache (kept from the search): the first call is a WARM compile,
   ``compile_s_warm``. The process also saves the config's compile artifacts where torch can
   (:mod:`tuner.runtime.artifacts`);
2. on an empty cache, after loading those artifacts: what the first call costs a process that
   starts from them, as production does with :meth:`tuner.Recommendation.apply`
   (``compile_s_artifacts``: loading plus the first call);
3. any further repeats on the warm cache again.

If the trial's cache is gone (measured on another host, say), the first repeat compiles cold
into it and the next is the warm one. Eager finalists are plain repeats. The p50s of all
processes give a spread and an interval (:mod:`tuner.data.noise`).

The re-measurements are kept in the Optuna storage (:mod:`tuner.study.remeasurements`). They
are not trials: they never count towards ``--trials``, and the search never sees them."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from tuner.data.noise import (
    ARTIFACTS,
    COLD,
    EAGER_REPEAT,
    INTERFERENCE_CORES,
    WARM,
    interval,
)
from tuner.data.rows import config_of
from tuner.domain.config import TrialConfig
from tuner.domain.naming import config_name
from tuner.domain.records import Status, TrialRequest, TrialResult
from tuner.study.confirm_eta import confirm_eta, due
from tuner.study.remeasurements import add_repeat, repeat_record, repeats_of
from tuner.study.repeats import Repeats, narrow
from tuner.words import fmt_s, plural

if TYPE_CHECKING:
    import optuna

    from tuner.launch.runner import Runner
    from tuner.study.fronts import Fronts
    from tuner.study.spec import StudySpec


# What resumes a confirm stopped part way (the opening line says it; after --redo, not this).
RESUMES = "`tuner confirm` or the same command"


DEFAULT_REPEATS = Repeats()  # auto


def fresh_trial_cache(spec: StudySpec, config: TrialConfig, number: int) -> Path | None:
    """The empty cache folder a search trial compiles into, kept after it so that a finalist's
    re-measurement compiles warm. None (the runner's default) for eager, and with
    ``--warm-cache``, where all trials share one cache anyway."""
    if not config.compiled or spec.protocol.warm_cache:
        return None
    path = spec.layout.trial_cache(number)
    shutil.rmtree(path, ignore_errors=True)  # a cold compile starts from nothing
    return path


def prune_caches(fronts: Fronts, spec: StudySpec, front: pd.DataFrame,
                 trials: pd.DataFrame) -> int:
    """Delete the caches of finished trials that are not on the Pareto ``front``, chosen from
    ``trials``; returns how many. Only trials of that frame: one another worker finished since
    it was made may be on the front now, and is left for the next export to judge.

    During the search a trial off the front never returns to it (what dominates it stays), so at
    most the front's caches are on disk at any time. Once finalists are measured again, one
    whose median is slower can leave the front and let another back on: that one's first
    re-measurement compiles cold (:func:`_next`). Caches of trials still running (here or in
    another worker on this host) are left alone.
    """
    root = spec.layout.cache_root
    if not root.is_dir():
        return 0
    keep = set(front["trial_number"].astype(int))
    judged = set(trials["trial_number"].astype(int))
    finished = {t.number for t in fronts.trials()
                if t.frozen.state.is_finished() and t.number in judged}
    removed = 0
    for path in root.iterdir():
        if path.name.isdigit() and int(path.name) in finished and int(path.name) not in keep:
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


# -- re-measuring ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ConfirmSummary:
    finalists: int  # on the Pareto fronts now
    measured: int  # re-measurements run now
    failed: int  # of those, how many did not finish ok
    stopped: bool  # stopped by the user before all were run
    # finalists whose interval stayed wider than asked (auto), each with a sentence on why
    noisy: tuple[str, ...] = ()


def confirm(study: optuna.Study, storage: optuna.storages.BaseStorage, spec: StudySpec,
            runner: Runner, front: pd.DataFrame, repeats: int | Repeats, *,
            also: pd.DataFrame | None = None,
            on_message: Callable[[str], None] | None = None,
            stop: threading.Event | None = None,
            abort: threading.Event | None = None,
            resumes: str = RESUMES) -> ConfirmSummary:
    """Re-measure each finalist (each row of ``front``, the study's Pareto set), and each row of
    ``also`` (trials off it measured again like finalists:
    :func:`tuner.study.finalist_rounds.slow_core_contenders`), as
    ``repeats`` says (a number, or :class:`Repeats`); re-measurements made before count
    (:func:`tuner.study.remeasurements.forget` forgets them).

    ``stop`` ends it before the next process, ``abort`` kills the one in flight (not recorded).
    ``resumes``: what the opening line says resumes it (after --redo, not the same command).
    """
    plan_of = repeats if isinstance(repeats, Repeats) else Repeats(fixed=repeats)
    say = on_message or (lambda text: None)
    others = set() if also is None else set(also["trial_number"].astype(int))
    finalists = _wanting(repeats_of(study, storage),
                         front if not others else pd.concat([front, also]), plan_of)
    if not finalists:
        return ConfirmSummary(len(front), 0, 0, False)
    confirming = _Confirming(study, storage, spec, runner, plan_of, say, finalists)
    say(confirming.opening(others, resumes))
    for index in range(len(finalists)):
        if confirming.finalist(index, stop, abort):
            return confirming.summary(len(front), stopped=True)
    for sentence in confirming.noisy:
        say(sentence)
    return confirming.summary(len(front), stopped=False)


class _Finalist(NamedTuple):
    number: int
    config: TrialConfig
    records: list[dict[str, Any]]  # its re-measurements, read again before and after each
    own: list[float]  # its trial's p50, where it finished ok
    trial_s: float | None  # its trial's seconds (wall_s): the ETA's price before any is timed


def _wanting(stored: dict[int, list[dict[str, Any]]], rows: pd.DataFrame,
             plan_of: Repeats) -> list[_Finalist]:
    """The ``rows`` whose re-measurements (``stored``, by trial number) ``plan_of`` wants
    more of."""
    finalists = []
    for _, row in rows.iterrows():
        number = int(row["trial_number"])
        records = stored.get(number, [])
        own = [float(row["latency_ms_p50"])] if row["status"] == Status.OK.value else []
        if plan_of.more(own + _p50s(records), len(records)):
            wall_s = pd.to_numeric(pd.Series([row.get("wall_s")]), errors="coerce").iloc[0]
            finalists.append(_Finalist(number, config_of(row), records, own,
                                       None if pd.isna(wall_s) else float(wall_s)))
    return finalists


class _Confirming:
    """One :func:`confirm`: its finalists measured again in turn, and what it counted."""

    def __init__(self, study: optuna.Study, storage: optuna.storages.BaseStorage,
                 spec: StudySpec, runner: Runner, plan_of: Repeats,
                 say: Callable[[str], None], finalists: list[_Finalist]) -> None:
        self.study, self.storage, self.spec, self.runner = study, storage, spec, runner
        self.plan_of, self.say, self.finalists = plan_of, say, finalists
        self.total = None if plan_of.fixed is None else \
            sum(plan_of.fixed - len(records) for _, _, records, _, _ in finalists)
        self.measured = self.failed = 0
        self.noisy: list[str] = []
        # each re-measurement here and its seconds: what the ETA is made of
        self.spent: list[tuple[TrialConfig, float]] = []

    def opening(self, others: set[int], resumes: str) -> str:
        """The line that says what is measured again: of the finalists, how many are
        ``others`` (off the front), and what ``resumes`` a stop."""
        plan_of, finalists, total = self.plan_of, self.finalists, self.total
        what = plural(total, "re-measurement") if total is not None else \
            f"{plan_of.describe()}: re-measurements"
        off = sum(number in others for number, *_ in finalists)
        whom = plural(len(finalists) - off, "finalist") + (
            f" and {plural(off, 'trial')} off the front" if off else "")
        return (f"confirming {whom}: {what}, each in a fresh process (Ctrl-C stops; "
                f"{resumes} resumes)")

    def finalist(self, index: int, stop: threading.Event | None,
                 abort: threading.Event | None) -> bool:
        """Measure finalist ``index`` again until the plan is met, another process measured it
        enough, or it failed; True where ``stop`` or ``abort`` ended it."""
        plan_of = self.plan_of
        number, config, records, own, _ = self.finalists[index]
        while plan_of.more(own + _p50s(records), len(records)):
            if (stop is not None and stop.is_set()) or (abort is not None and abort.is_set()):
                return True
            # Read again: another process's count.
            records[:] = repeats_of(self.study, self.storage).get(number, [])
            if any(r["status"] != Status.OK.value for r in records) or \
                    not plan_of.more(own + _p50s(records), len(records)):
                return False  # another process measured it enough, or saw it fail
            kind, result = self._once(number, config, records, abort)
            if result.status is Status.INTERRUPTED:
                return True
            self._told(index, kind, result)
            if not result.ok:
                # One fresh process that crashes or computes wrong is enough: such a config is
                # no longer eligible (tuner.data.select), so more repeats would decide nothing.
                self.say(f"{config_name(config, self.spec.names)} bs={config.batch_size} "
                         f"(trial {number}) failed in a "
                         f"fresh process ({result.status.value}): it is left out of the front "
                         "and of recommendations")
                return False
        p50s = own + _p50s(records)
        if plan_of.fixed is None and not narrow(p50s, plan_of.width):
            self.noisy.append(_still_noisy(config_name(config, self.spec.names), config, p50s,
                                           records, plan_of))
        return False

    def _once(self, number: int, config: TrialConfig, records: list[dict[str, Any]],
              abort: threading.Event | None) -> tuple[str, TrialResult]:
        """One re-measurement in a fresh process: its kind and result, stored (and
        ``records`` read again) unless it was interrupted."""
        kind, request, cache = _next(self.spec, number, config, records)
        workdir = self.spec.layout.repeat_dir(number, len(records) + 1)
        empty = Path(tempfile.mkdtemp(prefix="tuner-cache-")) if cache is None else None
        started = time.monotonic()
        try:
            result = self.runner.run(request, workdir, abort, cache_dir=cache or empty)
        finally:
            if empty is not None:
                shutil.rmtree(empty, ignore_errors=True)
        if result.status is not Status.INTERRUPTED:
            add_repeat(self.study, self.storage, number, repeat_record(kind, result, config.key))
            records[:] = repeats_of(self.study, self.storage).get(number, [])
            self.measured += 1
            self.failed += not result.ok
            self.spent.append((config, time.monotonic() - started))
        return kind, result

    def _told(self, index: int, kind: str, result: TrialResult) -> None:
        """Say how finalist ``index``'s re-measurement went, with the count and the ETA
        (:mod:`tuner.study.confirm_eta`)."""
        total = self.total
        number, config, records, _, _ = self.finalists[index]
        done = f"{self.measured}/{total}" if total is not None else f"{self.measured}"
        left = confirm_eta([due(self.plan_of, f.config, f.own + _p50s(f.records),
                                len(f.records), f.trial_s)
                            for f in self.finalists[index:]], self.spent)
        eta = "" if left is None or not result.ok else \
            f" | ETA {'at least ' if left[1] else ''}{fmt_s(left[0])}"
        self.say(f"[confirm {done}] {config_name(config, self.spec.names)} bs={config.batch_size} "
                 f"(trial {number}, {kind}): {_outcome(kind, result)}{eta}")

    def summary(self, finalists: int, stopped: bool) -> ConfirmSummary:
        return ConfirmSummary(finalists, self.measured, self.failed, stopped, tuple(self.noisy))


def _p50s(records: list[dict[str, Any]]) -> list[float]:
    return [float(r["latency_ms_p50"]) for r in records
            if r["status"] == Status.OK.value and r.get("latency_ms_p50") is not None]


def _still_noisy(name: str, config: TrialConfig, p50s: list[float],
                 records: list[dict[str, Any]], plan: Repeats) -> str:
    """Why a finalist's interval stayed wide after the most repeats: the spread of its
    processes, and whether other processes used the host's CPU while they measured; ``name``:
    its config's."""
    bounds = interval(p50s)
    width = "no interval" if bounds is None else \
        f"95% interval {bounds[0]:.3f}-{bounds[1]:.3f} ms"
    busy: list[float] = [r["host_other_cpu_cores"] for r in records
                         if r.get("host_other_cpu_cores") is not None]
    if busy and max(busy) >= INTERFERENCE_CORES:
        why = (f"other processes used up to {max(busy):.1f} CPU cores while it measured: "
               "the host interfered")
    elif busy:
        why = "no other process used the host's CPU meanwhile: the config itself varies"
    else:
        why = "host interference was not measured"
    return (f"{name} bs={config.batch_size} stayed noisy after {len(records)} repeats "
            f"({width}, wider than {plan.width:.0%} of the p50); {why}")


def _next(spec: StudySpec, number: int, config: TrialConfig,
          records: list[dict[str, Any]]) -> tuple[str, TrialRequest, Path | None]:
    """The next re-measurement of a finalist: (kind, request, cache folder; None = empty). It
    loads the eager references the search kept, as the search's trials do."""
    references = str(spec.layout.references_dir)
    if not config.compiled:
        return EAGER_REPEAT, TrialRequest(config, spec.workload, spec.protocol,
                                          references=references), None
    saved = spec.layout.artifacts_file(config.key)
    cache = spec.layout.cache_root
    if not spec.protocol.warm_cache:
        cache = spec.layout.trial_cache(number)
    warm = any(r["kind"] == WARM and r["status"] == Status.OK.value for r in records)
    if warm and saved.exists() and not any(r["kind"] == ARTIFACTS for r in records):
        return (ARTIFACTS, TrialRequest(config, spec.workload, spec.protocol,
                                        load_artifacts=str(saved.resolve()),
                                        references=references), None)
    # Warm on the trial's cache; if it is gone, a cold compile fills it for the next one.
    kind = WARM if cache.is_dir() and any(cache.iterdir()) else COLD
    return kind, TrialRequest(config, spec.workload, spec.protocol,
                              save_artifacts=str(saved.resolve()), references=references), cache


def _outcome(kind: str, result: TrialResult) -> str:
    if not result.ok:
        return f"{result.status.value}: {result.message[:120]}"
    text = f"p50 {result.latency_ms_p50:.3f} ms"
    if result.latency_ms_p99 is not None:
        text += f", p99 {result.latency_ms_p99:.3f} ms"
    if kind != EAGER_REPEAT and result.compile_s_cold is not None:
        load = f" after {result.artifacts_load_s:.1f} s loading artifacts" \
            if result.artifacts_load_s is not None else ""
        text += f", first call {result.compile_s_cold:.1f} s{load}"
    if result.artifacts_note:
        text += f" ({result.artifacts_note})"
    return text
