"""The search: an Optuna study that asks for configs, runs them as trials, and tells results.

Baselines first (eager, and inductor in each mode, at every batch size; a max-autotune mode's
once a probe fits the compile budget: :mod:`tuner.study.probe`), then, at the batch size with
the fewest trials, what that batch size's sampler proposes (:mod:`tuner.study.fronts`); no config
is measured twice (:mod:`tuner.study.claims` keeps workers apart). The Parquet files are written
again after every trial, so an interrupted search loses nothing.

Beside it: configs skipped without a trial (:mod:`tuner.study.skips`), telling Optuna
(:mod:`tuner.study.tell`), what it reports (:mod:`tuner.study.progress`, :mod:`tuner.study.eta`),
the finalists' rounds (:mod:`tuner.study.finalist_rounds`) and what else shares the host
(:mod:`tuner.study.host_warnings`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Callable

import optuna
import pandas as pd

from tuner.data.select import pareto
from tuner.domain.config import TrialConfig
from tuner.domain.naming import config_name
from tuner.domain.records import Status, TrialEvent, TrialRequest, TrialResult
from tuner.launch.runner import Runner
from tuner.study import finalists, skips
from tuner.study.abandoned import abandon, remove_abandoned
from tuner.study.broken import breaks_batch, not_run_result, refusal
from tuner.study.claims import Claims, StudyState
from tuner.study.export import Exported, ExportPacer, TrialRows, export_study, study_frame
from tuner.study.finalist_rounds import combined, confirm_rounds
from tuner.study.fronts import StoredTrial
from tuner.study.host_warnings import host_warnings
from tuner.study.long_trial import StillRunning
from tuner.study.params import nearest, suggest
from tuner.study.probing import Probing
from tuner.study.progress import Progress, SearchSummary, any_ok, counted
from tuner.study.record import store_result
from tuner.study.remeasurements import forget
from tuner.study.spec import StudySpec
from tuner.study.start_from import queue_first
from tuner.study.storage import open_study, resumed_spec
from tuner.study.tell import tell
from tuner.words import plural

STOPPED = "stopped by the user"  # the stop reason where the user stopped the run (stopped=True)
WAIT_POLL_S = 1.0  # how often a search with nothing to start looks at trials running elsewhere


@dataclasses.dataclass
class _Run:
    """What one :meth:`Search.run` keeps from one trial to the next."""

    configs: list[TrialConfig]  # the space's, made once: asked for after every trial
    rng: random.Random
    progress: Progress
    probing: Probing  # which max-autotune configs wait for their mode's probe
    skipped: skips.Skipped = dataclasses.field(default_factory=skips.Skipped)
    new: int = 0  # trials this run measured
    stop_reason: str = ""
    user_stopped: bool = False
    said_waiting: bool = False


class Search:
    """Runs a study to its target. ``stop_after_trial`` and ``abort`` let a caller stop it:
    the first after the trial in flight, the second by killing that trial. ``runner`` may be
    None for a process that only prepares or exports the study."""

    def __init__(self, spec: StudySpec, runner: Runner | None = None,
                 on_trial: Callable[[TrialEvent], None] | None = None,
                 on_message: Callable[[str], None] | None = None,
                 on_start: Callable[[int, TrialConfig, str], None] | None = None) -> None:
        self.spec, self.runner = spec, runner
        self.on_trial = on_trial or (lambda event: None)
        self.on_message = on_message or (lambda text: None)
        # called as a trial starts, with its number, config and the config's name
        self.on_start = on_start or (lambda number, config, name: None)
        self.stop_after_trial = threading.Event()
        self.abort = threading.Event()
        # Why a run stopped with stop_after_trial or abort, as its stop reason: the user, unless
        # this returns another cause at the moment (a fleet's worker whose search died).
        self.stop_cause: Callable[[], str | None] = lambda: None
        # What a Ctrl-C now stops after (tuner.launch.signals.stop_handlers): a trial, or while
        # confirming the finalists, a re-measurement.
        self.in_flight = "trial"
        # The storage tells this process of the trials it fails for want of heartbeats.
        self.fronts = open_study(spec, lambda study, trial: self.claims.on_stale(study, trial))
        self.spec = spec = resumed_spec(self.fronts.main, spec)
        # The study that defines it all (and holds the finalists' re-measurements); its trials
        # live in each batch size's study (self.fronts), unless it was made by tuner 0.1.0 before
        # 2026-11-30 (79eef4c).
        self.study = self.fronts.main
        self.claims = Claims(self.fronts, spec.space, self.on_message, finish=self._finish,
                             retry_held=spec.retry_failed)
        # A fleet's worker pins its trials to one GPU through its runner's environment.
        pinned = (getattr(runner, "env", None) or {}).get("CUDA_VISIBLE_DEVICES")
        self.claims.gpus = pinned or self.claims.gpus
        self._rows = TrialRows()  # each trial's row, kept between the exports after each trial
        self._pacer = ExportPacer()  # how often those exports write the files
        self._retrying: set[int] = set()  # held broken batch sizes this run tries again

    def run(self) -> SearchSummary:
        if self.runner is None:
            raise ValueError("Search.run needs a runner")
        try:
            return self._run()
        finally:
            self.claims.stop_heartbeat()
            self.runner.close()  # a pre-started trial process is not left waiting
            if self._pacer.behind:  # a run that raised: the files get every trial stored
                with contextlib.suppress(Exception):  # the error that ended the run is the one to see
                    self.export()

    def prepare(self) -> None:
        """What :meth:`run` does first: fail the trials of dead search processes on this host
        (their configs are queued again), queue the baselines, then what it starts from. A
        process that starts several workers calls it once, so they do not all queue them."""
        self.claims.reap_dead()
        remove_abandoned(self.fronts, self.spec.layout)
        queue_first(self.claims, self.spec, self.fronts.start_from, self.on_message)

    def _run(self) -> SearchSummary:
        self.prepare()
        self._warn_of_neighbours()
        spec = self.spec
        deadline = time.monotonic() + spec.budget_s if spec.budget_s else None
        run = _Run(spec.space.configs(), random.Random(spec.seed),
                   Progress(deadline, spec.n_trials,
                            confirm_each=finalists.Repeats.parse(spec.confirm_repeats).each,
                            names=spec.names),
                   Probing(spec, self.claims, self.fronts.start_from, self.on_message))
        while True:
            state = self._between_trials(run)
            remaining = [c for c in run.configs if not state.taken(c.key) and
                         c.batch_size not in run.skipped.broken and not run.probing.held(c)]
            # Other workers measure the last configs: wait for them rather than stop, since the
            # trial of one that dies goes stale and its config comes back to the queue.
            nothing_to_start = (not remaining and not state.waiting) or (
                spec.n_trials is not None and len(state.ran) + state.beating >= spec.n_trials)
            if self._stops(run, state, nothing_to_start):
                break
            if nothing_to_start:
                self._wait(run, state)
                continue
            claimed = self._claim(run, state, remaining)
            if claimed is not None and not self._trial(run, state, *claimed):
                break
        return self._summary(run)

    def _between_trials(self, run: _Run) -> StudyState:
        """The study's state as the next trial starts, once the last trial's heartbeat has ended,
        dead workers' trials are failed, what the study holds broken or past --compile-timeout
        is skipped, and what max-autotune probes found is acted on (:mod:`tuner.study.probing`)."""
        claims = self.claims
        claims.stop_heartbeat()  # the trial of the last round is told
        claims.reap_dead()  # a worker killed beside this one on this host: found at once
        claims.fail_stale()  # one on another host: found after the grace period
        state = claims.state()
        run.progress.others.append(len(state.workers))
        skips.held_broken(state, run.skipped.broken, self._retrying, self.spec.retry_failed,
                    self.on_message)
        told = skips.timed_out_elsewhere(state, run.configs, run.skipped)
        rows = sum(self._skip_mode(c, n, run.skipped.not_run) for n, c in told)
        return claims.state() if run.probing.between_trials(state, run.skipped) or rows else state

    def _stops(self, run: _Run, state: StudyState, nothing_to_start: bool) -> bool:
        """Whether the run ends here, its stop reason set: the --trials reached, every config
        measured, the --budget spent, or the user's stop."""
        spec = self.spec
        if spec.n_trials is not None and len(state.ran) >= spec.n_trials:
            run.stop_reason = f"reached {plural(spec.n_trials, 'trial')}"
        elif nothing_to_start and not state.beating:
            run.stop_reason = "every config in the search space is measured"
        elif run.progress.deadline is not None and time.monotonic() >= run.progress.deadline:
            run.stop_reason = "the time budget is spent"
        elif self.stop_after_trial.is_set() or self.abort.is_set():
            run.stop_reason, run.user_stopped = self.stop_cause() or STOPPED, True
        else:
            return False
        return True

    def _wait(self, run: _Run, state: StudyState) -> None:
        """Wait a while for the trials other workers are running, saying so once."""
        if not run.said_waiting:
            self.on_message(f"waiting for {plural(state.beating, 'trial')} other "
                            "workers are running (a dead worker's trial comes back here)")
            run.said_waiting = True
        self.stop_after_trial.wait(WAIT_POLL_S)

    def _claim(self, run: _Run, state: StudyState, remaining: list[TrialConfig]
               ) -> tuple[optuna.Trial, int, TrialConfig] | None:
        """Ask for the next config and claim it: (the trial, its tuner number, the config), or
        None where the proposal is no trial to run (a not-run row, a config taken already)."""
        spec, claims, broken, not_run = self.spec, self.claims, run.skipped.broken, \
            run.skipped.not_run
        # Baselines and queued configs first; then the batch size with the fewest trials,
        # whose own study's sampler proposes the rest of the config.
        front = self.fronts.next_front(spec.space, state.taken, state.queued, broken,
                                       run.configs)
        assert front is not None, "a config is left, so a front has one"
        trial, number = claims.ask(front[0])
        config = suggest(trial, spec.space, front[1])
        # The state read above serves these checks (claim reads afresh before it holds).
        # A config that has a row already (an earlier run's not-run row, a failure) keeps it.
        if config.batch_size in broken and config.key not in not_run and \
                config.key not in state.recorded and not \
                state.taken_by_another(config.key, number) and claims.claim(trial, number, config):
            self.record(trial, number, not_run_result(config.batch_size,
                                                      broken[config.batch_size]))  # says why
            not_run.add(config.key)
            return None
        if state.taken_by_another(config.key, number) or config.batch_size in broken or \
                run.probing.held(config):  # a max-autotune config waits for its mode's probe
            claims.step_back(trial, config)
            if remaining and not state.waiting:
                # The sampler proposed a measured config: hand it the unmeasured one nearest
                # to it, of its own batch size where one is left (each proposal asked costs
                # the study's time, more as it grows: benchmarks/study_growth.py measures it).
                claims.enqueue(nearest(config, [c for c in remaining if c.batch_size ==
                                                config.batch_size] or remaining, run.rng))
            return None
        if not claims.claim(trial, number, config):
            # Another worker claimed this config at the same moment: at most one goes on.
            claims.step_back(trial, config)
            return None
        return trial, number, config

    def _trial(self, run: _Run, state: StudyState, trial: optuna.Trial, number: int,
               config: TrialConfig) -> bool:
        """Run the claimed trial, record it (:meth:`record`), report it, and skip what its
        failure says to skip; False where it was abandoned, which ends the run."""
        result = self._measure(run, number, config)
        refused = refusal(result)
        if result.status is Status.INTERRUPTED or refused is not None:
            abandon(trial, self.spec.layout, number)
            if refused is not None:
                raise refused  # bad input: the same at every batch size
            run.stop_reason = f"{self.stop_cause() or STOPPED} (the trial in flight was abandoned)"
            run.user_stopped = True
            return False
        try:
            exported = self.record(trial, number, result)
        except optuna.exceptions.UpdateFinishedTrialError:
            self.on_message(f"trial {number} ({config.key}) was failed by another worker "
                            "while it ran here (no heartbeat within the grace period); its "
                            "result is dropped and the config is measured again")
            return True
        run.new += 1
        skipped = run.skipped
        self.on_trial(run.progress.event(state, run.configs, skipped.broken, number, config,
                                         result, exported.trials, exported.pareto))
        if breaks_batch(config, result.status) and config.batch_size not in skipped.broken:
            skips.skip_batch(self.claims, self.spec.space, run.configs, config, number, result,
                       skipped, self.on_message)
        elif result.status is Status.COMPILE_TIMEOUT:
            self._skip_mode(config, number, skipped.not_run)
            skipped.modes.add(number)
        return True

    def _measure(self, run: _Run, number: int, config: TrialConfig) -> TrialResult:
        """Run the trial of ``config`` in its own process; keep its seconds for the ETA."""
        spec = self.spec
        self.on_start(number, config, config_name(config, spec.names))
        t0 = time.monotonic()
        # The first trial of a run also times the device's peak matmul rate (fraction_of_peak).
        request = TrialRequest(config, spec.workload,
                               dataclasses.replace(spec.protocol, measure_peak=run.new == 0),
                               references=str(spec.layout.references_dir))
        assert self.runner is not None  # run() checked it before calling _run()
        workdir = spec.layout.trial_dir(number)
        with StillRunning(config, workdir, self.on_message,
                          name=config_name(config, spec.names)):
            result = self.runner.run(request, workdir, self.abort,
                                     cache_dir=finalists.fresh_trial_cache(spec, config, number))
        run.progress.timed(config, t0, result)
        return result

    def _summary(self, run: _Run) -> SearchSummary:
        """After the loop: refuse a model that runs at no batch size, confirm the finalists
        (unless stopped), and write the files once more."""
        spec, broken, stop_reason = self.spec, run.skipped.broken, run.stop_reason
        if broken and not any_ok(self.export().trials):
            raise skips.cannot_run_anywhere(broken)
        if broken:
            stop_reason += " (skipped batch sizes where the model fails: " + ", ".join(
                str(bs) for bs in sorted(broken)) + ")"

        repeats = finalists.Repeats.parse(spec.confirm_repeats)
        stopped = self.stop_after_trial.is_set() or self.abort.is_set()
        if repeats.any and not stopped:
            if self.confirm(repeats).stopped:
                stop_reason += "; confirming the finalists was stopped (the same command resumes it)"
        exported = self.export()
        df = exported.trials
        ran, skipped = counted(df)
        user_stopped = run.user_stopped
        if repeats.any and stopped:
            # Stopped during the last trial too: the loop ended as the space did, but the
            # finalists were not measured, and the same command measures them.
            user_stopped = True
            if ran:
                stop_reason += "; the finalists are not measured again yet"
        return SearchSummary(spec.directory, ran, run.new, stop_reason, df, exported.pareto,
                             stopped=user_stopped, skipped=skipped)

    def _skip_mode(self, config: TrialConfig, number: int, not_run: set[str]) -> int:
        """How many configs :func:`tuner.study.skips.skip_mode` skips: its mode's, there."""
        return skips.skip_mode(self.claims, self.spec.space, config, number, not_run,
                               self.on_message, self.spec.names)

    def forget_repeats(self) -> None:
        """Forget every trial's re-measurements (``--redo``), saying how many had some."""
        if forgotten := forget(self.study, self.claims.storage):
            self.on_message(f"--redo: the re-measurements of {plural(forgotten, 'trial')} are "
                            "forgotten; a stop from here on resumes without --redo")

    def confirm(self, repeats: int | str | finalists.Repeats, redo: bool = False,
                resumes: str = finalists.RESUMES
                ) -> finalists.ConfirmSummary:
        """Re-measure the finalists (see :mod:`tuner.study.finalists`); ``stop_after_trial``
        stops it before the next process, ``abort`` kills the one in flight. ``resumes``: what
        the progress says resumes it."""
        if self.runner is None:
            raise ValueError("Search.confirm needs a runner")
        self.in_flight = "re-measurement"
        plan = repeats if isinstance(repeats, finalists.Repeats) else \
            finalists.Repeats.parse(repeats)
        if redo:
            self.forget_repeats()
        try:
            rounds = confirm_rounds(self.export, self.study, self.claims.storage, self.spec,
                                    self.runner, plan, on_message=self.on_message,
                                    stop=self.stop_after_trial, abort=self.abort,
                                    resumes=resumes)
        finally:
            self.runner.close()
            self.in_flight = "trial"
        if rounds[-1].measured:  # stopped after measuring; else the round's export holds it all
            self.export()
        return combined(rounds)

    def record(self, trial: optuna.Trial, number: int, result: TrialResult) -> Exported:
        """Store the record on the tuner's trial ``number`` (:mod:`tuner.study.record`), tell
        Optuna (:func:`tuner.study.tell.tell`), then write the Parquet files; returns what was
        written.

        Told before the files are written: a search killed while it writes them (a large
        study's write takes a while) leaves the trial complete in the storage, and the next
        run writes the files. Told after, such a trial was left running with its result, and
        the resume failed it (:meth:`_finish` tells one that a search still left so)."""
        trial_id = self.claims.trial_id(number)
        store_result(self.claims.storage, trial_id, result)
        # One frame for all: the summary, objectives and constraints are the trial's Parquet
        # row, so the dashboard, the sampler and the files have the same numbers.
        df = self._frame()
        tell(self.claims.storage, trial.study, trial.number, trial_id, number, df,
             self.fronts.limits)
        return self.export(after_trial=True, trials=df)

    def _finish(self, stored: StoredTrial) -> None:
        """Tell Optuna of a trial that a search process stored the result of and died before
        telling (:meth:`tuner.study.claims.Claims.reap_dead`, ``fail_stale``): it is measured,
        and failing it would leave the sampler without its objectives."""
        tell(self.claims.storage, stored.study, stored.frozen.number,
             self.fronts.trial_id(stored.study, stored.frozen.number), stored.number,
             self._frame(), self.fronts.limits)

    def _frame(self) -> pd.DataFrame:
        return study_frame(self.fronts, self.spec.name, self.spec.workload, self.spec.layout,
                           self._rows)

    def _warn_of_neighbours(self) -> None:
        """Say what else shares this host's CPU or GPUs (:mod:`tuner.study.host_warnings`)."""
        for text in host_warnings(self.fronts, self.spec.workload.device, self.claims.gpus):
            self.on_message(text)

    def export(self, after_trial: bool = False, trials: pd.DataFrame | None = None) -> Exported:
        """Write the Parquet files, and delete the compile caches of trials off the front;
        ``after_trial``: the export after each trial, which writes only when the pacer says so
        (:class:`tuner.study.export.ExportPacer`); ``trials``: the study's frame, made already
        (:meth:`_frame`)."""
        exported = export_study(self.fronts, self.spec, self._rows, self._pacer, after_trial,
                                trials)
        finalists.prune_caches(self.fronts, self.spec, exported.pareto, exported.trials)
        return exported

    def current(self) -> Exported:
        """The trials and the Pareto set as the storage holds them now, written nowhere and
        deleting nothing: what a caller checks before it measures (``tuner confirm``)."""
        df = self._frame()
        return Exported(df, pareto(df))

