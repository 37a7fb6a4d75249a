"""Finalists: the Pareto set of each batch size, measured again in fresh processes.

One trial is one process, and a second process of the same config can differ by a few percent
(clocks, memory placement, whatever else the machine does). So after the search each finalist
is run ``repeats`` more times, each a whole trial in its own process:

1. on the trial's own compile cache (``studies/<name>/cache/<trial>/``, kept from the search):
   the first call is a WARM compile, ``compile_s_warm``. The process also saves the config's
   compile artifacts to ``studies/<name>/artifacts/<config>.bin`` where torch can
   (:mod:`tuner.artifacts`);
2. on an empty cache, after loading those artifacts: what the first call costs a process that
   starts from them, as production does with :meth:`tuner.Recommendation.apply`
   (``compile_s_artifacts``: loading plus the first call);
3. any further repeats on the warm cache again.

If the trial's cache is gone (a study made before caches were kept, or measured on another
host), the first repeat compiles cold into it and the next is the warm one. Eager finalists
are plain repeats.

Each process gives one p50. Over the p50s of the trial and its repeats: the spread,
(max - min) / median, and a 95 % Student-t interval computed on their logarithms,
exp(m ± t(0.975, n-1)·s/√n) with m and s the mean and standard deviation of the log p50s.
Timing noise is multiplicative, and on the log scale the interval stays above zero however
noisy the processes were. With the default two repeats n is 3 and t is 4.30: the interval is
wide, which is what three processes can honestly say (a bootstrap over three values would claim
far more). Within each batch
size the finalists are ranked on these intervals: overlapping intervals, directly or through a
chain of overlapping ones, share a rank (``rank_within_noise``), so no two configs within noise
are ever ranked one above the other.

The re-measurements are kept in the Optuna storage as one list per trial, in the study's user
attribute ``tuner.repeats.<trial number>`` (Optuna allows no writes to a finished trial). They
are not trials: they never count towards ``--trials``, and the search never sees them.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import shutil
import statistics
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner import artifacts, results
from tuner.records import Status, TrialRequest, TrialResult
from tuner.space import TrialConfig

if TYPE_CHECKING:
    import optuna

    from tuner.runner import Runner
    from tuner.study import StudySpec

REPEATS_ATTR = "tuner.repeats."  # + trial number: a study user attribute, a list of records
DEFAULT_REPEATS = 2  # three processes per finalist: enough for a spread and an interval
CACHE_DIR = "cache"  # under the study folder: one folder per trial, named by its number
# What each re-measurement is: a first call on the trial's warm cache, one that filled an empty
# cache (the cache was gone), one that loaded the saved artifacts first, or an eager config.
WARM, COLD, ARTIFACTS, EAGER = "warm", "cold", "artifacts", "eager"

# t(0.975, df): the two-sided 95 % quantile of Student's t; between entries the smaller df's
# (larger, more cautious) value is used.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


# -- caches of the search's trials ----------------------------------------------------------------
def trial_cache(spec: StudySpec, number: int) -> Path:
    return spec.directory / CACHE_DIR / str(number)


def fresh_trial_cache(spec: StudySpec, config: TrialConfig, number: int) -> Path | None:
    """The empty cache folder a search trial compiles into, kept after it so that a finalist's
    re-measurement compiles warm. None (the runner's default) for eager, and with
    ``--warm-cache``, where all trials share one cache anyway."""
    if not config.compiled or spec.protocol.warm_cache:
        return None
    path = trial_cache(spec, number)
    shutil.rmtree(path, ignore_errors=True)  # a cold compile starts from nothing
    return path


def prune_caches(study: optuna.Study, spec: StudySpec, df: pd.DataFrame) -> int:
    """Delete the caches of finished trials that are not on the Pareto front; returns how many.

    A trial off the front never returns to it (what dominates it stays), so at most the front's
    caches are on disk at any time. Caches of trials still running (here or in another worker
    on this host) are left alone.
    """
    root = spec.directory / CACHE_DIR
    if not root.is_dir():
        return 0
    keep = set(results.pareto(df)["trial_number"].astype(int))
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


def confirm(study: optuna.Study, spec: StudySpec, runner: Runner, df: pd.DataFrame,
            repeats: int, *, redo: bool = False,
            on_message: Callable[[str], None] | None = None,
            stop: threading.Event | None = None,
            abort: threading.Event | None = None) -> ConfirmSummary:
    """Re-measure each finalist of ``df`` (the study's frame) until it has ``repeats``
    re-measurements; those done before count, unless ``redo`` forgets them.

    ``stop`` ends it before the next process, ``abort`` kills the one in flight (not recorded).
    """
    say = on_message or (lambda text: None)
    front = results.pareto(df)
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
            workdir = spec.directory / "trials" / str(number) / f"repeat-{len(records) + 1}"
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
        return EAGER, TrialRequest(config, spec.workload, spec.protocol), None
    saved = spec.directory / artifacts.relative_path(config.key)
    cache = spec.directory / CACHE_DIR
    if not spec.protocol.warm_cache:
        cache = cache / str(number)
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
    if kind != EAGER and result.compile_s_cold is not None:
        load = f" after {result.artifacts_load_s:.1f} s loading artifacts" \
            if result.artifacts_load_s is not None else ""
        text += f", first call {result.compile_s_cold:.1f} s{load}"
    if result.artifacts_note:
        text += f" ({result.artifacts_note})"
    return text


# -- columns ------------------------------------------------------------------------------------
def columns(result: TrialResult, records: list[dict[str, Any]], config_key: str,
            directory: Path | None = None) -> dict[str, Any]:
    """The finalist columns of one trial's row (see ``results.FINALIST_FIELDS``); all empty
    for a trial that was not re-measured, except the artifacts file if one exists."""
    out: dict[str, Any] = dict.fromkeys(name for name, _ in results.FINALIST_FIELDS)
    relative = artifacts.relative_path(config_key)
    if directory is not None and (Path(directory) / relative).exists():
        out["artifacts_file"] = relative
        makers = [r.get("torch") for r in records if r.get("artifacts_bytes")]
        out["artifacts_torch"] = makers[-1] if makers else None
    if not records:
        return out
    ok = [r for r in records if r["status"] == Status.OK.value
          and r.get("latency_ms_p50") is not None]
    p50s = [result.latency_ms_p50] if result.ok and result.latency_ms_p50 is not None else []
    p50s += [float(r["latency_ms_p50"]) for r in ok]
    out["latency_ms_p50_repeats"] = p50s
    out["repeats_failed"] = len(records) - len(ok)
    out["latency_spread_pct"] = spread_pct(p50s)
    out["latency_ms_p50_ci_low"], out["latency_ms_p50_ci_high"] = interval(p50s) or (None, None)
    # Warm only if the cache really served it: a miss means part of it compiled cold.
    warm = [r["compile_s"] for r in ok if r["kind"] == WARM and r.get("compile_s") is not None
            and not r.get("fxgraph_cache_misses")]
    out["compile_s_warm"] = statistics.median(warm) if warm else None
    # From artifacts only if they loaded; a failed load compiled cold.
    loaded = [r["compile_s"] + r["artifacts_load_s"] for r in ok if r["kind"] == ARTIFACTS
              and r.get("compile_s") is not None and r.get("artifacts_load_s") is not None]
    out["compile_s_artifacts"] = statistics.median(loaded) if loaded else None
    return out


def spread_pct(values: list[float]) -> float | None:
    """(max - min) / median, in percent; None for fewer than two values."""
    if len(values) < 2:
        return None
    median = statistics.median(values)
    return (max(values) - min(values)) / median * 100 if median > 0 else None


def interval(values: list[float]) -> tuple[float, float] | None:
    """95 % Student-t interval of the geometric mean of ``values`` (a t-interval on their
    logarithms); None for fewer than two values or any not above zero."""
    if len(values) < 2 or min(values) <= 0:
        return None
    logs = [math.log(v) for v in values]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t975(len(logs) - 1) * sd / math.sqrt(len(logs))
    return math.exp(mean - half), math.exp(mean + half)


def t975(dof: int) -> float:
    if dof < 1:
        raise ValueError("a t interval needs two values or more")
    if dof > max(_T975):
        return 1.960
    return _T975[max(d for d in _T975 if d <= dof)]


def with_ranks(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``rank_within_noise`` filled for the finalists that have an interval.

    Within each batch size: sorted by the interval's low end, a finalist whose interval starts
    past every interval before it opens a new rank; otherwise it overlaps one of them (directly
    or through a chain) and shares that rank. Rank 1 holds the fastest.
    """
    df = df.copy()
    ranks = pd.Series(pd.NA, index=df.index, dtype="Int64")
    if len(df):
        low = pd.to_numeric(df["latency_ms_p50_ci_low"], errors="coerce")
        high = pd.to_numeric(df["latency_ms_p50_ci_high"], errors="coerce")
        front = set(results.pareto(df)["trial_number"])
        ranked = df[df["trial_number"].isin(front) & low.notna() & high.notna()]
        for _, group in ranked.groupby("batch_size"):
            ranks[group.index] = rank_intervals(low[group.index].tolist(),
                                                high[group.index].tolist())
    df["rank_within_noise"] = ranks
    return df


def rank_intervals(lows: list[float], highs: list[float]) -> list[int]:
    """Dense ranks of intervals [low, high]: overlapping ones, directly or through a chain of
    overlapping ones, share a rank; rank 1 holds the lowest."""
    ranks = [0] * len(lows)
    rank, reach = 0, -math.inf
    for i in sorted(range(len(lows)), key=lambda i: lows[i]):
        if lows[i] > reach:
            rank += 1
        reach = max(reach, highs[i])
        ranks[i] = rank
    return ranks


def config_of(row: pd.Series) -> TrialConfig:
    """The config of a Parquet row."""
    mode = row.get("mode")
    dynamic = row.get("dynamic")
    return TrialConfig(backend=str(row["backend"]), batch_size=int(row["batch_size"]),
                       mode=None if mode is None or pd.isna(mode) else str(mode),
                       dynamic=None if dynamic is None or pd.isna(dynamic) else bool(dynamic))
