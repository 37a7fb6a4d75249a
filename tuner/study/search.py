"""The search: an Optuna study that asks for configs, runs them as trials, and tells results.

Baselines first (eager, and inductor in each mode, at every batch size), then, at the batch size
with the fewest trials, what that batch size's sampler proposes (:mod:`tuner.study.fronts`); no
config is measured twice (:mod:`tuner.study.claims` keeps workers apart). The Parquet files are
written again after every trial, so an interrupted search loses nothing.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import random
import socket
import statistics
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path

import optuna
import pandas as pd
from optuna.trial import TrialState

from tuner.data.select import LATENCY, comparable, eligible, pareto, throughput_picks_off_front
from tuner.data.select import not_run as not_run_rows  # "not_run" is a set of keys in Search.run
from tuner.errors import UserError
from tuner.launch.runner import Runner
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialEvent, TrialRequest, TrialResult
from tuner.study import finalists
from tuner.study.broken import Breakage, breakage, breaks_batch, not_run_result
from tuner.study.claims import Claims, StudyState
from tuner.study.export import Exported, ExportPacer, TrialRows, export_study, study_frame
from tuner.study.fronts import StoredTrial
from tuner.study.long_trial import StillRunning
from tuner.study.params import nearest, suggest
from tuner.study.record import NOT_RUN, failure_message, record_not_run, store_result, summary
from tuner.study.sampler import CONSTRAINTS_ATTR, constraint_values, objective_values
from tuner.study.spec import StudySpec
from tuner.study.storage import (
    DUPLICATE_ATTR,
    INTERRUPTED_ATTR,
    MESSAGE_ATTR,
    OWNER_ATTR,
    STATUS_ATTR,
    open_study,
    resumed_protocol,
    resumed_space,
)
from tuner.words import plural

STOPPED = "stopped by the user"  # the stop reason where the user stopped the run (stopped=True)
WAIT_POLL_S = 1.0  # how often a search with nothing to start looks at trials running elsewhere


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


class Search:
    """Runs a study to its target. ``stop_after_trial`` and ``abort`` let a caller stop it:
    the first after the trial in flight, the second by killing that trial. ``runner`` may be
    None for a process that only prepares or exports the study."""

    def __init__(self, spec: StudySpec, runner: Runner | None = None,
                 on_trial: Callable[[TrialEvent], None] | None = None,
                 on_message: Callable[[str], None] | None = None,
                 on_start: Callable[[int, TrialConfig], None] | None = None) -> None:
        self.spec = spec
        self.runner = runner
        self.on_trial = on_trial or (lambda event: None)
        self.on_message = on_message or (lambda text: None)
        self.on_start = on_start or (lambda number, config: None)
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
        # Fields an older study lacks keep their old meaning (no compile budget), as for a
        # worker that joins it.
        # Backends and modes listed in another order are searched in the study's order.
        self.spec = spec = dataclasses.replace(
            spec, protocol=resumed_protocol(self.fronts.main, spec.protocol),
            space=resumed_space(self.fronts.main, spec.space))
        # The study that defines it all (and holds the finalists' re-measurements); its trials
        # live in each batch size's study (self.fronts), unless it was made before.
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
        (their configs are queued again) and queue the baselines. A process that starts several
        workers calls it once before them, so they do not all queue the baselines at once."""
        self.claims.reap_dead()
        state = self.claims.state()
        held = {} if self.spec.retry_failed else state.broken
        for config in self.spec.space.baselines():
            # Not at a batch size the study holds broken: the run would only prune them.
            if not state.taken(config.key) and config.batch_size not in held:
                self.claims.enqueue(config)

    def _run(self) -> SearchSummary:
        spec, claims = self.spec, self.claims
        self.prepare()
        self._warn_of_neighbours()
        started = time.monotonic()
        deadline = started + spec.budget_s if spec.budget_s else None
        new, stop_reason, user_stopped = 0, "", False
        history: list[tuple[TrialConfig, float]] = []  # this run's trials and their seconds
        configs = spec.space.configs()  # made once: asked for after every trial
        ended: float | None = None  # when this run's last trial ended (time.monotonic)
        # Batch sizes where the model itself fails in eager (raise, crash, hang, out of memory):
        # their other configs would fail the same way, each up to --timeout, so they are skipped
        # (tuner.study.broken): those this run found, and those the study holds.
        broken: dict[int, Breakage] = {}
        not_run: set[str] = set()  # keys this run recorded as not run
        rng = random.Random(spec.seed)
        said_waiting = False
        # The other workers measuring the study at each of the last states read (one between
        # two trials included: StudyState.workers): those sharing what is left, for the ETA.
        others: collections.deque[int] = collections.deque(maxlen=3)
        # This process's own seconds between trials (files, sampler): the median, as the first
        # holds one-off imports.
        overheads: list[float] = []
        skipped_modes: set[int] = set()  # trials past --compile-timeout whose mode is skipped
        while True:
            claims.stop_heartbeat()  # the trial of the last round is told
            claims.reap_dead()  # a worker killed beside this one on this host: found at once
            claims.fail_stale()  # one on another host: found after the grace period
            state = claims.state()
            others.append(len(state.workers))
            self._held_broken(state, broken)
            # An earlier run's, or another worker's, compile past --compile-timeout skips its
            # mode there as this run's own does: a search killed before it recorded the skip
            # would otherwise spend the budget again on each of them.
            told = [(n, c) for n, c in state.compile_timeouts.items() if n not in skipped_modes]
            skipped_modes.update(n for n, _ in told)
            # Only where the state read here has a config left to skip: each skip reads it again.
            told = [(n, c) for n, c in told
                    if any(not state.taken(o.key) for o in _same_mode(c, configs))]
            if sum(self._skip_mode(config, number, not_run) for number, config in told):
                state = claims.state()
            if spec.n_trials is not None and len(state.ran) >= spec.n_trials:
                stop_reason = f"reached {plural(spec.n_trials, 'trial')}"
                break
            remaining = [c for c in configs
                         if not state.taken(c.key) and c.batch_size not in broken]
            # Other workers measure the last configs: wait for them rather than stop, since the
            # trial of one that dies goes stale and its config comes back to the queue.
            nothing_to_start = (not remaining and not state.waiting) or (
                spec.n_trials is not None and len(state.ran) + state.beating >= spec.n_trials)
            if nothing_to_start and not state.beating:
                stop_reason = "every config in the search space is measured"
                break
            if deadline is not None and time.monotonic() >= deadline:
                stop_reason = "the time budget is spent"
                break
            if self.stop_after_trial.is_set() or self.abort.is_set():
                stop_reason, user_stopped = self.stop_cause() or STOPPED, True
                break
            if nothing_to_start:
                if not said_waiting:
                    self.on_message(f"waiting for {plural(state.beating, 'trial')} other "
                                    "workers are running (a dead worker's trial comes back here)")
                    said_waiting = True
                self.stop_after_trial.wait(WAIT_POLL_S)
                continue

            # Baselines and queued configs first; then the batch size with the fewest trials,
            # whose own study's sampler proposes the rest of the config.
            front = self.fronts.next_front(spec.space, state.taken, state.queued, broken,
                                           configs)
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
                continue
            if state.taken_by_another(config.key, number) or config.batch_size in broken:
                trial.set_user_attr(DUPLICATE_ATTR, config.key)
                trial.study.tell(trial, state=TrialState.PRUNED)
                if remaining and not state.waiting:
                    # The sampler proposed a measured config: hand it the unmeasured one nearest
                    # to it, of its own batch size where one is left (each proposal asked costs
                    # the study's time, more as it grows: benchmarks/README.md, study_growth.py).
                    claims.enqueue(nearest(config, [c for c in remaining if c.batch_size ==
                                                    config.batch_size] or remaining, rng))
                continue
            if not claims.claim(trial, number, config):
                # Another worker claimed this config at the same moment: at most one goes on.
                trial.set_user_attr(DUPLICATE_ATTR, config.key)
                trial.study.tell(trial, state=TrialState.PRUNED)
                continue

            self.on_start(number, config)
            t0 = time.monotonic()
            # The first trial of a run also times the device's peak matmul rate (fraction_of_peak).
            request = TrialRequest(config, spec.workload,
                                   dataclasses.replace(spec.protocol, measure_peak=new == 0),
                                   references=str(spec.layout.references_dir))
            assert self.runner is not None  # run() checked it before calling _run()
            workdir = spec.layout.trial_dir(number)
            with StillRunning(config, workdir, self.on_message):
                result = self.runner.run(request, workdir, self.abort,
                                         cache_dir=finalists.fresh_trial_cache(spec, config, number))
            # This process's own time since the run's previous trial ended (files, sampler).
            result.tuner_overhead_s = None if ended is None else t0 - ended
            ended = time.monotonic()
            history.append((config, time.monotonic() - t0))
            if result.tuner_overhead_s is not None:
                overheads.append(result.tuner_overhead_s)
            if result.status is Status.INTERRUPTED:
                with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                    trial.set_user_attr(INTERRUPTED_ATTR, True)
                    trial.study.tell(trial, state=TrialState.FAIL)
                stop_reason = f"{self.stop_cause() or STOPPED} (the trial in flight was abandoned)"
                user_stopped = True
                break
            try:
                exported = self.record(trial, number, result)
            except optuna.exceptions.UpdateFinishedTrialError:
                self.on_message(f"trial {number} ({config.key}) was failed by another worker "
                                "while it ran here (no heartbeat within the grace period); its "
                                "result is dropped and the config is measured again")
                continue
            new += 1
            measured = _measured_now(state, config, exported.trials)
            left = [c for c in configs if c.key != config.key and c.key not in state.measured
                    and c.key not in state.running and c.batch_size not in broken]
            eta_s, eta_at_least = _shown_eta(
                _eta(history, left, measured, spec.n_trials, workers=1 + max(others),
                     overhead_s=statistics.median(overheads) if overheads else 0.0),
                deadline,
                at_least=any(c.compiled for c in left) and not any(c.compiled for c, _ in history))
            self.on_trial(TrialEvent(
                number=measured, target=_target(spec.n_trials, configs, exported.trials),
                trial_number=number,
                config=config, result=result,
                best=_best_by_batch(exported.trials),
                eta_s=eta_s, eta_at_least=eta_at_least))
            if breaks_batch(config, result.status) and config.batch_size not in broken:
                why = broken[config.batch_size] = breakage(number, config, result)
                self.on_message(f"batch size {config.batch_size} is skipped from here on: the "
                                f"model fails there without compiling ({why}); the other batch "
                                "sizes go on")
                not_run.add(config.key)  # its own row says why
                taken = claims.state()
                for other in configs:
                    # A config with a row (an earlier run's not-run row) keeps it: one row each.
                    if other.batch_size == config.batch_size and other.key != config.key \
                            and not taken.taken(other.key) and other.key not in taken.recorded:
                        record_not_run(self.fronts, spec.space, other,
                                       not_run_result(config.batch_size, why))
                        not_run.add(other.key)
            elif result.status is Status.COMPILE_TIMEOUT:
                self._skip_mode(config, number, not_run)
                skipped_modes.add(number)
        if broken and not _any_ok(self.export().trials):
            failures = "; ".join(f"batch size {bs}: {reason}"
                                 for bs, reason in sorted(broken.items()))
            if all(reason.status is Status.TIMEOUT for reason in broken.values()):
                # A --timeout too short for any trial looks like a model that hangs: say which.
                raise UserError(f"no trial finished within --timeout at any batch size "
                                f"({failures}): raise --timeout, unless the model hangs in eager")
            raise UserError(f"the model cannot run at any batch size: {failures}")
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
        if repeats.any and stopped:
            # Stopped during the last trial too: the loop ended as the space did, but the
            # finalists were not measured, and the same command measures them.
            user_stopped = True
            if ran:
                stop_reason += "; the finalists are not measured again yet"
        return SearchSummary(spec.directory, ran, new, stop_reason, df, exported.pareto,
                             stopped=user_stopped, skipped=skipped)

    def _held_broken(self, state: StudyState, broken: dict[int, Breakage]) -> None:
        """Add to ``broken`` the batch sizes the study holds broken (an earlier run's, or
        another worker's, eager failure there: :mod:`tuner.study.broken`), saying so once each:
        a resume skips them again instead of running their not-run configs as trials."""
        for batch_size, why in sorted(state.broken.items()):
            if batch_size in broken or batch_size in self._retrying:
                continue
            if self.spec.retry_failed:
                self._retrying.add(batch_size)
                self.on_message(f"batch size {batch_size}: eager failed there before ({why}); "
                                "--retry-failed measures it again")
                continue
            broken[batch_size] = why
            self.on_message(
                f"batch size {batch_size} is skipped: the study holds that the model fails "
                f"there without compiling ({why}); rerun with --retry-failed to try it again")

    def _skip_mode(self, config: TrialConfig, number: int, not_run: set[str]) -> int:
        """After a compile past --compile-timeout, the other configs of that backend and mode at
        that batch size are rows that say so, not trials: each would likely spend the budget
        again (max-autotune of resnet18 ran past 380 s on the H200), and a night would go to
        failures. They are ``compile_timeout`` rows, failures to the sampler
        like the one that ran, and their message says ``not run``."""
        why = TrialResult.failure(
            Status.COMPILE_TIMEOUT, f"{NOT_RUN}trial {number}, {config.label}, compiled past "
            f"--compile-timeout at batch size {config.batch_size}; this mode's other configs "
            "there are skipped (a new study with a larger --compile-timeout measures them)")
        taken = self.claims.state()
        skipped = [other for other in _same_mode(config, self.spec.space.configs())
                   if not taken.taken(other.key)]
        for other in skipped:
            record_not_run(self.fronts, self.spec.space, other, why)
            not_run.add(other.key)
        if skipped:
            self.on_message(f"{config.label} compiled past --compile-timeout at batch size "
                            f"{config.batch_size} (trial {number}): its "
                            f"{plural(len(skipped), 'other config')} there "
                            f"{'is' if len(skipped) == 1 else 'are'} skipped")
        return len(skipped)

    def forget_repeats(self) -> None:
        """Forget every trial's re-measurements (``--redo``), saying how many had some."""
        if forgotten := finalists.forget(self.study, self.claims.storage):
            self.on_message(f"--redo: the re-measurements of {plural(forgotten, 'trial')} are "
                            "forgotten; a stop from here "
                            "on resumes without --redo")

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
        rounds: list[finalists.ConfirmSummary] = []
        before: set[int] = set()
        if redo:
            self.forget_repeats()
        try:
            # The front is on the finalists' medians: one measured slower may leave it, and a
            # trial that joins it in its place is measured again in turn, until none is left.
            while not rounds or (rounds[-1].measured and not rounds[-1].stopped):
                exported = self.export()
                front = exported.pareto
                now = set(front["trial_number"].astype(int))
                if rounds and now - before:
                    self.on_message(_front_moved(before, now))
                before = now
                slow = finalists.slow_core_contenders(exported.trials, front)
                if len(slow):
                    self.on_message(_slow_contenders(slow))
                # What recommend --objective throughput picks off the front: measured again
                # too, so that its recommendation is a median over fresh processes as well.
                picks = throughput_picks_off_front(exported.trials, front)
                picks = picks[~picks["trial_number"].isin(slow["trial_number"])]
                if len(picks):
                    self.on_message(_throughput_picks(picks))
                rounds.append(finalists.confirm(
                    self.study, self.claims.storage, self.spec, self.runner, front, plan,
                    also=pd.concat([slow, picks]) if len(picks) else slow,
                    on_message=self.on_message,
                    stop=self.stop_after_trial, abort=self.abort, resumes=resumes))
        finally:
            self.runner.close()
            self.in_flight = "trial"
        if rounds[-1].measured:  # stopped after measuring; else the round's export holds it all
            self.export()
        return finalists.ConfirmSummary(
            rounds[-1].finalists, sum(r.measured for r in rounds), sum(r.failed for r in rounds),
            rounds[-1].stopped, tuple(n for r in rounds for n in r.noisy))

    def record(self, trial: optuna.Trial, number: int, result: TrialResult) -> Exported:
        """Store the record on the tuner's trial ``number`` (:mod:`tuner.study.record`), tell
        Optuna (:meth:`_tell`), then write the Parquet files; returns what was written.

        Told before the files are written: a search killed while it writes them (a large
        study's write takes a while) leaves the trial complete in the storage, and the next
        run writes the files. Told after, such a trial was left running with its result, and
        the resume failed it (:meth:`_finish` tells one that a search still left so)."""
        trial_id = self.claims.trial_id(number)
        store_result(self.claims.storage, trial_id, result)
        # One frame for all: the summary, objectives and constraints are the trial's Parquet
        # row, so the dashboard, the sampler and the files have the same numbers.
        df = self._frame()
        self._tell(trial.study, trial.number, trial_id, number, df)
        return self.export(after_trial=True, trials=df)

    def _tell(self, study: optuna.Study, optuna_number: int, trial_id: int, number: int,
              df: pd.DataFrame) -> None:
        """Set the summary of the tuner's trial ``number`` (``optuna_number`` in ``study``),
        stored, from its row in ``df`` as its user attributes, and tell Optuna its objectives
        and constraints (:mod:`tuner.study.sampler`): a failed config is an infeasible point,
        not a gap. A model that fails in eager says nothing of the config: that trial is told
        failed, as is one whose row gave way to an older one of its config
        (:func:`tuner.study.export.study_frame`)."""
        storage = self.claims.storage
        rows = df[df["trial_number"] == number]
        if rows.empty:
            study.tell(optuna_number, state=TrialState.FAIL)
            return
        row = rows.iloc[0]
        for name, value in summary(row).items():
            storage.set_trial_user_attr(trial_id, name, value)
        storage.set_trial_user_attr(trial_id, STATUS_ATTR, str(row["status"]))
        if row["status"] != Status.OK.value:  # why, where plain Optuna and the dashboard see it
            storage.set_trial_user_attr(trial_id, MESSAGE_ATTR, failure_message(row["message"]))
        if row["status"] == Status.WORKLOAD_ERROR.value:
            study.tell(optuna_number, state=TrialState.FAIL)
            return
        verified = number in set(comparable(df)["trial_number"])
        storage.set_trial_system_attr(
            trial_id, CONSTRAINTS_ATTR, constraint_values(row, verified, self.fronts.limits))
        study.tell(optuna_number, objective_values(row, verified))

    def _finish(self, stored: StoredTrial) -> None:
        """Tell Optuna of a trial that a search process stored the result of and died before
        telling (:meth:`tuner.study.claims.Claims.reap_dead`, ``fail_stale``): it is measured,
        and failing it would leave the sampler without its objectives."""
        self._tell(stored.study, stored.frozen.number,
                   self.fronts.trial_id(stored.study, stored.frozen.number), stored.number,
                   self._frame())

    def _frame(self) -> pd.DataFrame:
        return study_frame(self.fronts, self.spec.name, self.spec.workload, self.spec.layout,
                           self._rows)

    def _warn_of_neighbours(self) -> None:
        """Say so when something else shares this host's CPU as the search starts: timings of
        launch-bound configs depend on it (every row records it too: host_other_cpu_cores)."""
        host = socket.gethostname()
        owners = [t.frozen.user_attrs.get(OWNER_ATTR) or {}
                  for t in self.fronts.trials(states=(TrialState.RUNNING,))]
        here = [o for o in owners if o.get("host") == host]
        if here and not self.spec.workload.device.startswith("cuda"):
            self.on_message(f"{plural(len(here), 'trial')} of this study "
                            f"{'runs' if len(here) == 1 else 'run'} in other processes "
                            "on this host: they share its CPU cores with this search's trials")
        # On CUDA a fleet's workers each see one other GPU; a search beside another on the same
        # GPUs (the same command started twice) times its trials against the other's.
        gpus = self.claims.gpus
        beside = [o for o in here if "gpus" in o and o["gpus"] == gpus]
        if beside and self.spec.workload.device.startswith("cuda"):
            same = f"same GPU{'s' if gpus is None or ',' in gpus else ''}"
            self.on_message(f"{plural(len(beside), 'trial')} of this study "
                            f"{'runs' if len(beside) == 1 else 'run'} in other "
                            f"processes on this host's {same} "
                            f"(CUDA_VISIBLE_DEVICES={gpus or 'unset'}): their timings and this "
                            "search's disturb each other")
        try:
            load = os.getloadavg()[0]
        except OSError:
            return
        if load >= 1.0:
            self.on_message(f"the host is busy (load average {load:.1f} on {os.cpu_count()} "
                            "cores): latency of launch-bound configs will be noisy; rows say "
                            "how much CPU other processes took while they measured")

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


def _same_mode(config: TrialConfig, configs: list[TrialConfig]) -> list[TrialConfig]:
    """The other configs of ``config``'s backend and mode at its batch size: what a compile past
    --compile-timeout skips (Search._skip_mode)."""
    return [o for o in configs if o.key != config.key and (o.batch_size, o.backend, o.mode) ==
            (config.batch_size, config.backend, config.mode)]


def _measured_now(state: StudyState, config: TrialConfig, trials: pd.DataFrame) -> int:
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


def _target(n_trials: int | None, configs: list[TrialConfig], trials: pd.DataFrame) -> int:
    """The trials the progress counts up to: ``--trials``, at most the configs of the space
    that are still to be run or ran (a skipped config leaves the count)."""
    skipped = set(trials.loc[not_run_rows(trials), "config_key"])
    runnable = sum(c.key not in skipped for c in configs)
    return runnable if n_trials is None else min(n_trials, runnable)


def _any_ok(df: pd.DataFrame) -> bool:
    return bool((df["status"] == Status.OK.value).any())


def _best_by_batch(df: pd.DataFrame) -> dict[int, tuple[str, float]]:
    best = {}
    for bs, group in eligible(df).groupby("batch_size"):
        row = group.loc[pd.to_numeric(group[LATENCY]).idxmin()]  # as show ranks them
        best[int(bs)] = (str(row["label"]), float(row[LATENCY]))
    return best


def _eta(history: list[tuple[TrialConfig, float]], left: list[TrialConfig], measured: int,
         target: int | None, workers: int = 1, overhead_s: float = 0.0) -> float | None:
    """Seconds until the search ends, or None where that cannot be told: each config ``left``
    (the queued baselines included) estimated from this run's trials (``history``) of the same
    label, else of the same kind; a compile costs far more than an eager trial, so one mean over
    both would be wrong whichever kind is left. ``workers``: those measuring the study now,
    this one included, which share what is left (a fleet's each said the whole of it).
    ``overhead_s``: this process's own time a trial, between trials (on a busy box, as much
    as a fake trial)."""
    if not history:
        return None
    seconds = _TrialSeconds(history)
    estimates = [seconds.estimate(config) + overhead_s for config in left]
    count = len(estimates) if target is None else min(len(estimates), target - measured)
    if count <= 0:
        return None
    # Which configs a --trials target leaves unmeasured is the sampler's choice: the mean of all.
    return count * sum(estimates) / len(estimates) / max(1, workers)


def _shown_eta(eta: float | None, deadline: float | None,
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
