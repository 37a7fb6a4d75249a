"""Finalists: the Pareto set of each batch size, measured again in fresh processes.

One trial is one process, and a second process of the same config can differ by a few percent
(clocks, memory placement, whatever else the machine does). So after the search each finalist
is run ``repeats`` more times, each a whole trial in its own process:

1. on the trial's own compile cache (kept from the search): the first call is a WARM compile,
   ``compile_s_warm``. The process also saves the config's compile artifacts where torch can
   (:mod:`tuner.trial.artifacts`);
2. on an empty cache, after loading those artifacts: what the first call costs a process that
   starts from them, as production does with :meth:`tuner.Recommendation.apply`
   (``compile_s_artifacts``: loading plus the first call);
3. any further repeats on the warm cache again.

If the trial's cache is gone (measured on another host, say), the first repeat compiles cold
into it and the next is the warm one. Eager finalists are plain repeats. The p50s of all
processes give a spread and an interval (:mod:`tuner.data.noise`).

The re-measurements are kept in the Optuna storage as one list per trial, in the study's user
attribute ``tuner.repeats.<trial number>`` (Optuna allows no writes to a finished trial). They
are not trials: they never count towards ``--trials``, and the search never sees them.
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner.data.noise import ARTIFACTS, COLD, EAGER_REPEAT, WARM
from tuner.data.rows import config_of
from tuner.spec.config import TrialConfig
from tuner.spec.records import Status, TrialRequest, TrialResult

if TYPE_CHECKING:
    import optuna

    from tuner.launch.runner import Runner
    from tuner.study.spec import StudySpec

REPEATS_ATTR = "tuner.repeats."  # + trial number: a study user attribute, a list of records
DEFAULT_REPEATS = 2  # three processes per finalist: enough for a spread and an interval


def fresh_trial_cache(spec: StudySpec, config: TrialConfig, number: int) -> Path | None:
    """The empty cache folder a search trial compiles into, kept after it so that a finalist's
    re-measurement compiles warm. None (the runner's default) for eager, and with
    ``--warm-cache``, where all trials share one cache anyway."""
    if not config.compiled or spec.protocol.warm_cache:
        return None
    path = spec.layout.trial_cache(number)
    shutil.rmtree(path, ignore_errors=True)  # a cold compile starts from nothing
    return path


def prune_caches(study: optuna.Study, spec: StudySpec, front: pd.DataFrame) -> int:
    """Delete the caches of finished trials that are not on the Pareto ``front``; returns how
    many.

    A trial off the front never returns to it (what dominates it stays), so at most the front's
    caches are on disk at any time. Caches of trials still running (here or in another worker
    on this host) are left alone.
    """
    root = spec.layout.cache_root
    if not root.is_dir():
        return 0
    keep = set(front["trial_number"].astype(int))
    finished = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
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


def repeats_of(study: optuna.Study) -> dict[int, list[dict[str, Any]]]:
    """Every trial's re-measurements, by trial number."""
    return {int(k[len(REPEATS_ATTR):]): list(v) for k, v in study.user_attrs.items()
            if k.startswith(REPEATS_ATTR) and k[len(REPEATS_ATTR):].isdigit()}


def confirm(study: optuna.Study, spec: StudySpec, runner: Runner, front: pd.DataFrame,
            repeats: int, *, redo: bool = False,
            on_message: Callable[[str], None] | None = None,
            stop: threading.Event | None = None,
            abort: threading.Event | None = None) -> ConfirmSummary:
    """Re-measure each finalist (each row of ``front``, the study's Pareto set) until it has
    ``repeats`` re-measurements; those done before count, unless ``redo`` forgets them.

    ``stop`` ends it before the next process, ``abort`` kills the one in flight (not recorded).
    """
    say = on_message or (lambda text: None)
    stored = repeats_of(study)
    plan = []
    for _, row in front.iterrows():
        number = int(row["trial_number"])
        records = [] if redo else stored.get(number, [])
        if repeats - len(records) > 0:
            plan.append((number, config_of(row), records, repeats - len(records)))
    total = sum(missing for *_, missing in plan)
    if not plan:
        return ConfirmSummary(len(front), 0, 0, False)
    say(f"confirming {len(plan)} finalists: {total} re-measurements, each in a fresh process "
        "(Ctrl-C stops; `tuner confirm` or the same command resumes)")
    for number, *_ in plan if redo else []:  # all at once: a stop half-way redoes the rest
        study.set_user_attr(REPEATS_ATTR + str(number), [])
    measured = failed = 0
    for number, config, records, missing in plan:
        for _ in range(missing):
            if (stop is not None and stop.is_set()) or (abort is not None and abort.is_set()):
                return ConfirmSummary(len(front), measured, failed, True)
            kind, request, cache = _next(spec, number, config, records)
            workdir = spec.layout.repeat_dir(number, len(records) + 1)
            empty = Path(tempfile.mkdtemp(prefix="tuner-cache-")) if cache is None else None
            try:
                result = runner.run(request, workdir, abort, cache_dir=cache or empty)
            finally:
                if empty is not None:
                    shutil.rmtree(empty, ignore_errors=True)
            if result.status is Status.INTERRUPTED:
                return ConfirmSummary(len(front), measured, failed, True)
            records.append(_record(kind, result))
            study.set_user_attr(REPEATS_ATTR + str(number), records)
            measured += 1
            failed += not result.ok
            say(f"[confirm {measured}/{total}] {config.label} bs={config.batch_size} "
                f"(trial {number}, {kind}): {_outcome(kind, result)}")
    return ConfirmSummary(len(front), measured, failed, False)


def _next(spec: StudySpec, number: int, config: TrialConfig,
          records: list[dict[str, Any]]) -> tuple[str, TrialRequest, Path | None]:
    """The next re-measurement of a finalist: (kind, request, cache folder; None = empty)."""
    if not config.compiled:
        return EAGER_REPEAT, TrialRequest(config, spec.workload, spec.protocol), None
    saved = spec.layout.artifacts_file(config.key)
    cache = spec.layout.cache_root
    if not spec.protocol.warm_cache:
        cache = spec.layout.trial_cache(number)
    warm = any(r["kind"] == WARM and r["status"] == Status.OK.value for r in records)
    if warm and saved.exists() and not any(r["kind"] == ARTIFACTS for r in records):
        return (ARTIFACTS, TrialRequest(config, spec.workload, spec.protocol,
                                        load_artifacts=str(saved.resolve())), None)
    # Warm on the trial's cache; if it is gone, a cold compile fills it for the next one.
    kind = WARM if cache.is_dir() and any(cache.iterdir()) else COLD
    return kind, TrialRequest(config, spec.workload, spec.protocol,
                              save_artifacts=str(saved.resolve())), cache


def _record(kind: str, result: TrialResult) -> dict[str, Any]:
    """What a re-measurement keeps in the storage: its numbers, not its samples."""
    fp = result.fingerprint or {}
    return {
        "kind": kind, "status": result.status.value, "message": result.message[:300],
        "latency_ms_p50": result.latency_ms_p50, "latency_ms_p90": result.latency_ms_p90,
        "latency_ms_iqr": result.latency_ms_iqr, "noisy": result.noisy,
        "correct": result.correct, "ran_compiled": getattr(result, "ran_compiled", None),
        "compile_s": result.compile_s_cold, "warmup_s": result.warmup_s,
        "artifacts_load_s": result.artifacts_load_s, "artifacts_bytes": result.artifacts_bytes,
        "artifacts_note": result.artifacts_note, "fxgraph_cache_hits": result.fxgraph_cache_hits,
        "fxgraph_cache_misses": result.fxgraph_cache_misses, "wall_s": result.wall_s,
        "torch": fp.get("torch"), "host": fp.get("host"),
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _outcome(kind: str, result: TrialResult) -> str:
    if not result.ok:
        return f"{result.status.value}: {result.message[:120]}"
    text = f"p50 {result.latency_ms_p50:.3f} ms"
    if kind != EAGER_REPEAT and result.compile_s_cold is not None:
        load = f" after {result.artifacts_load_s:.1f} s loading artifacts" \
            if result.artifacts_load_s is not None else ""
        text += f", first call {result.compile_s_cold:.1f} s{load}"
    if result.artifacts_note:
        text += f" ({result.artifacts_note})"
    return text
