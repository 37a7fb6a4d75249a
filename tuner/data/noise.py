"""How sure a latency is: the finalists' repeats, their spread and 95 % interval, ranks within
noise, and the one rule for "within noise" that show, recommend and compare all apply.

Each process gives one p50. Over the p50s of the trial and its repeats: the spread,
``(max - min) / median``, and a 95 % interval for the typical p50, a Student-t interval on the
logarithms (the interval of the geometric mean): ``exp(mean(log p50) +- t(0.975, n-1) *
sd(log p50) / sqrt(n))``, with sd the sample standard deviation of the log p50s. Timing noise
is multiplicative, and on the log scale the interval stays above zero however noisy the
processes were. With the default two repeats n is 3 and t is 4.30: the interval is wide, which
is what three processes can honestly say (a bootstrap over three values would claim far more).

Configs are compared on ratios, by :func:`verdict`: over the logarithm of the p50 of each
process a config ran in (``latency_ms_p50_repeats``: the search trial's, then its
re-measurements'). The process is the unit. What changes from one fresh process to the next
(the host core it launches from, the compile, the allocator) is the noise a user meets in
production; the calls inside one process share all of it, so their per-call samples (kept for
the search trial's process only) say nothing of where the next process's p50 lands, and a
test on them would call a 1 % gap between two processes beyond noise. Of config A against B:

* **faster** (or slower) beyond noise, when a Welch t-test at 95 % on the log p50s separates
  them (the difference of the means is more than ``t(0.975, dof) * sqrt(var_a / n_a + var_b /
  n_b)``, Welch-Satterthwaite's degrees of freedom rounded down), or when every process of A
  was faster than every process of B by more than :data:`GAP_SPREADS` times the larger spread
  of the two (a config's spread: max - min of its log p50s). The second rule is for few
  processes: with two each, Welch's degrees of freedom are about 1 and t is 12.7, so the test
  separates almost nothing. resnet50 bf16 at batch size 16 on an H100: reduce-overhead 1.243
  and 1.217 ms, eager 7.649 and 4.469 ms, 3.6x slower in every process; the test did not
  separate them, and "not separated" had become "use eager". How often the rule calls one of
  two configs of equal typical p50 faster (``benchmarks/noise_rule.py --simulate``, normal log
  p50s): 2 % with two processes each of equal spread, 6 % where one is steady and the other
  noisy with two processes, at most 2.5 % (Welch's own, a side) with three each. With two
  processes of a noisy config nothing does much better (t(1) is what the arithmetic allows);
  the gap asked for is twice the larger spread, not once, to keep that case rare.
* **within noise**, when neither is faster and their processes overlap (a process of each is
  at least as fast as one of the other): the noise covers the difference. Two configs at 1.20
  and 1.25 ms against 1.22 and 1.24 ms are within noise.
* **undecided**, when neither is faster and their processes do not overlap (too close for
  their spread), or either config ran in fewer than two processes. It comes with the processes
  each config would need (:func:`processes_to_decide`), for ``tuner confirm STUDY --repeats
  N``. Undecided is not within noise: show, recommend and compare then go by the median and
  say it is undecided; only a compiled config *within noise* of eager loses to eager (its
  warm-up buys nothing measurable).

Within each batch size the finalists are ranked by it (``rank_within_noise``,
:func:`rank_within_noise`): rank 1 where no finalist is faster beyond noise, otherwise one below
the lowest-ranked finalist that is, and never above one that was faster on average. Equal ranks
are not faster than each other beyond noise (within noise or undecided); a noisy config within
noise of a fast and a slow one does not pull those two onto one rank. (The rule was the Welch
test alone from 2026-12-02, overlapping 95 % intervals before: benchmarks/noise_rule.py.)
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data.derive import listed
from tuner.data.schema import FINALIST_FIELDS
from tuner.domain.layout import artifacts_relative
from tuner.domain.records import Status, TrialResult

# What each re-measurement is: a first call on the trial's warm cache, one that filled an empty
# cache (the cache was gone), one that loaded the saved artifacts first, or an eager config.
WARM, COLD, ARTIFACTS, EAGER_REPEAT = "warm", "cold", "artifacts", "eager"
# CPU cores other processes kept busy while a trial measured, from which its figures are flagged
# as measured under interference: a launch-bound config needs a core of its own.
INTERFERENCE_CORES = 0.5
# How many times as long as on the machine's fast cores (its study's lower quartile) the fixed
# loop ran on a trial's launching core (``host_core_slowdown``) for its figures to be flagged as
# measured on a slow core. The H200's VM had cores 1.5-2.2x slower than its fast ones
# (benchmarks/slow_mode.py measures it).
SLOW_CORE_RATIO = 1.4
# Fewer steady-state calls than this, and a trial's p99 is no tail but about its slowest call
# (a slow config meets the protocol's minimum, --min-calls, and stops there).
P99_CALLS = 100


def p99_of_few_calls(calls: Any) -> bool:
    """Whether a trial's ``measure_calls`` are too few (:data:`P99_CALLS`) for its p99 to be a
    tail; False where it is not known."""
    return calls is not None and not pd.isna(calls) and 0 < calls < P99_CALLS

# t(0.975, df): the two-sided 95 % quantile of Student's t; between entries the smaller df's
# (larger, more cautious) value is used.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


# -- columns ------------------------------------------------------------------------------------
def repeat_columns(result: TrialResult, records: list[dict[str, Any]], config_key: str,
            directory: Path | None = None) -> dict[str, Any]:
    """The finalist columns of one trial's row (see ``FINALIST_FIELDS``); all empty
    for a trial that was not re-measured, except the artifacts file if one exists."""
    out: dict[str, Any] = dict.fromkeys(name for name, _ in FINALIST_FIELDS)
    relative = artifacts_relative(config_key)
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
    # Back to back and the tail per request, from the processes that kept them (records made
    # before keep no stream time and no p99).
    for column in ("stream_ms_p50", "latency_ms_p90", "latency_ms_p99"):
        own = getattr(result, column) if result.ok else None
        out[f"{column}_repeats"] = ([] if own is None else [own]) + [
            float(r[column]) for r in ok if r.get(column) is not None]
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


# How many times the larger of two configs' spreads (max - min of its log p50s) every process
# of one must beat every process of the other by, to be faster beyond noise without the test.
GAP_SPREADS = 2.0
# The difference (as a ratio) that processes_to_decide aims to resolve where the one measured is
# smaller, and the most processes a config it names.
RESOLVE_RATIO, MOST_PROCESSES = 1.05, 50
# What verdict says of config A against B.
FASTER, SLOWER, WITHIN, UNDECIDED = "faster", "slower", "within noise", "undecided"
# Where the two sides are one config (a pick that is the best plain mode, a transfer whose
# fastest is the other's best): nothing to compare.
SAME = "same config"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Config A against config B (the module's rule). ``ratio``: A's geometric mean p50 over
    B's (None where either has no process); ``processes``: where undecided, the processes each
    config would need to decide (None where either has fewer than two, or more than
    :data:`MOST_PROCESSES` would be needed)."""

    outcome: str  # FASTER, SLOWER, WITHIN or UNDECIDED
    ratio: float | None
    processes: int | None = None


def verdict(a: Sequence[float], b: Sequence[float]) -> Verdict:
    """The module's rule over the p50s ``a`` and ``b`` of two configs' processes; a config
    with a p50 not above zero has none."""
    la, lb = _logs(a), _logs(b)
    ratio = None if not la or not lb else math.exp(statistics.fmean(la) - statistics.fmean(lb))
    if len(la) < 2 or len(lb) < 2:
        return Verdict(UNDECIDED, ratio)
    if _separated(la, lb):
        return Verdict(FASTER, ratio)
    if _separated(lb, la):
        return Verdict(SLOWER, ratio)
    if max(la) >= min(lb) and max(lb) >= min(la):
        return Verdict(WITHIN, ratio)
    return Verdict(UNDECIDED, ratio, processes_to_decide(la, lb))


def _logs(values: Sequence[float]) -> list[float]:
    return [] if not values or min(values) <= 0 else [math.log(v) for v in values]


def _separated(fast: list[float], slow: list[float]) -> bool:
    """Whether the log p50s ``fast`` are below ``slow`` beyond noise: the gap rule or Welch's."""
    spread = max(max(fast) - min(fast), max(slow) - min(slow))
    if min(slow) - max(fast) > GAP_SPREADS * spread:
        return True
    (mean_a, var_a, n_a), (mean_b, var_b, n_b) = _stats(fast), _stats(slow)
    se2 = var_a + var_b
    if mean_a >= mean_b or se2 == 0:
        return False  # equal processes each: the gap rule has said all there is
    dof = se2 ** 2 / (var_a ** 2 / (n_a - 1) + var_b ** 2 / (n_b - 1))
    return mean_b - mean_a > t975(max(1, int(dof))) * math.sqrt(se2)


def processes_to_decide(la: Sequence[float], lb: Sequence[float]) -> int | None:
    """The processes each of two configs (their log p50s, two or more each) would need for the
    Welch test to separate them, if their means and spreads held: the fewest, above the most
    either has now, at which the 95 % interval of the difference is narrower than the
    difference, or than :data:`RESOLVE_RATIO` where that is smaller (then more processes show
    a difference under 5 % or none). None above :data:`MOST_PROCESSES`."""
    var_a, var_b = statistics.variance(la), statistics.variance(lb)
    target = max(abs(statistics.fmean(la) - statistics.fmean(lb)), math.log(RESOLVE_RATIO))
    for n in range(max(len(la), len(lb)) + 1, MOST_PROCESSES + 1):
        se2 = (var_a + var_b) / n
        if se2 == 0:
            return n
        dof = (var_a + var_b) ** 2 * (n - 1) / (var_a ** 2 + var_b ** 2)
        if t975(max(1, int(dof))) * math.sqrt(se2) < target:
            return n
    return None


def faster_beyond_noise(fast: Sequence[float], slow: Sequence[float]) -> bool:
    """Whether the config whose processes measured the p50s ``fast`` is faster than the one
    that measured ``slow`` beyond noise (:func:`verdict`); False with fewer than two values on
    either side, or any not above zero."""
    return verdict(fast, slow).outcome == FASTER


def _log_stats(values: Sequence[float]) -> tuple[float, float, int] | None:
    """Mean of the logarithms, the variance of that mean, and the count; None for fewer than
    two values or any not above zero."""
    logs = _logs(values)
    return _stats(logs) if len(logs) >= 2 else None


def _stats(logs: Sequence[float]) -> tuple[float, float, int]:
    return statistics.fmean(logs), statistics.variance(logs) / len(logs), len(logs)


def p50s_of(row: pd.Series | dict[str, Any]) -> list[float]:
    """The p50 of each process a row's config ran in (``latency_ms_p50_repeats``), if any."""
    values = row.get("latency_ms_p50_repeats")
    return [float(v) for v in values] if values is not None and listed(values) else []


def row_verdict(a: pd.Series | dict[str, Any], b: pd.Series | dict[str, Any]) -> Verdict:
    """:func:`verdict` of two rows' configs, over the p50s of their processes (:func:`p50s_of`)."""
    return verdict(p50s_of(a), p50s_of(b))


def within_noise(a: pd.Series | dict[str, Any], b: pd.Series | dict[str, Any]) -> bool:
    """Whether two re-measured configs are within noise of each other (:func:`verdict`):
    neither is faster and their processes overlap. False unless both were measured in two
    processes or more."""
    return row_verdict(a, b).outcome == WITHIN


def rank_within_noise(p50s: Sequence[Sequence[float]]) -> list[int]:
    """Ranks of configs by the p50s of their processes, lower is faster: 1 where no config is
    faster beyond noise, otherwise 1 + the highest rank among those that are; and never above
    a config whose processes were faster on average (the mean of the log p50s, which the test
    compares).

    Two configs of equal rank are within noise of each other (if one were faster, it would have
    the lower mean and the other would rank below it). Being within noise is not passed on: a
    noisy config within noise of both a fast and a slow one does not put those two on one rank,
    and a slow noisy config within noise of the fast one does not rank above a steadier one in
    between that is not."""
    stats = [_log_stats(v) for v in p50s]
    means = [math.inf if s is None else s[0] for s in stats]
    order = sorted(range(len(p50s)), key=lambda i: means[i])
    ranks = [0] * len(p50s)
    for n, i in enumerate(order):
        beyond = 1 + max((ranks[j] for j in order[:n] if faster_beyond_noise(p50s[j], p50s[i])),
                         default=0)
        ranks[i] = max(beyond, ranks[order[n - 1]] if n else 1)
    return ranks
