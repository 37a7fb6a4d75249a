"""What may be compared and recommended, and in which order; each rule defined once.

* :func:`eligible`: a row may be compared, ranked and recommended when its trial finished, its
  output was checked against eager and matched (``correct`` is True: what could not be checked
  is not vouched for), it has a latency (a positive, finite number: a p50 of 0 or inf is no
  measurement, and no speedup can be taken from it), a compiled config really ran compiled code, and, for a
  finalist, none of its re-measurements in fresh processes failed (crashed, computed a wrong
  result, ...): a config that fails one process in several is not one to serve.
* :func:`pareto`: the eligible rows no other eligible row of the same batch size beats on all
  of latency, memory and warm-up.
* :data:`OBJECTIVES`, :func:`rank`, :func:`best`: the best row for one objective; a compiled
  config within noise of eager (:func:`tuner.data.noise.within_noise`) never beats eager, and
  one undecided against eager (too few processes to tell) keeps its place by its median.
* :class:`Constraints`: the limits a recommended config must meet.

Latency, for the front and for every objective, is :data:`LATENCY`: a finalist's median p50
over the fresh processes that measured it, any other row's own p50. So one process on a slow
core decides neither a config's place nor the recommendation, and the fastest row is always on
the front. Optuna was told each trial's own p50 (:data:`PARETO_OBJECTIVES`): its front
(``best_trials``, the dashboard's) is the same until finalists are measured again.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from tuner.data.derive import listed, measured_latency, median_p50, ran_eager_only
from tuner.data.noise import (
    FASTER,
    UNDECIDED,
    Verdict,
    p50s_of,
    rank_within_noise,
    row_verdict,
    within_noise,
)
from tuner.data.rows import num
from tuner.domain.config import EAGER
from tuner.domain.records import NOT_RUN, Status
from tuner.errors import UserError

GIB = 2**30
# The latency rows are ranked, recommended and compared by (tuner.data.derive.median_p50).
LATENCY = "latency_ms_p50_median"
# The tail one request waits, taken the same way: a finalist's median p90 and p99 over its
# processes, any other row's own.
TAIL_P90, TAIL_P99 = "latency_ms_p90_median", "latency_ms_p99_median"
# Minimised together, within each batch size, as each trial measured them: the objectives the
# sampler is told, and so Optuna's front.
PARETO_OBJECTIVES = ("latency_ms_p50", "peak_memory_bytes", "time_to_steady_s")
# The tuner's front: the same, with latency as LATENCY.
FRONT_OBJECTIVES = (LATENCY, *PARETO_OBJECTIVES[1:])


def eligible(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that may be compared, ranked and recommended (see the module's docstring)."""
    verified = df["correct"].map(lambda v: v is True or (v is not None and v == True))  # noqa: E712
    keep = (df["status"] == Status.OK.value) & verified.astype(bool)
    keep &= measured_latency(df)
    keep &= ~ran_eager_only(df)
    keep &= ~failed_again(df)
    return df[keep]


def failed_again(df: pd.DataFrame) -> pd.Series:
    """Rows of finalists that a re-measurement in a fresh process failed (``repeats_failed``);
    :func:`eligible` leaves them out."""
    if "repeats_failed" not in df:
        return pd.Series(False, index=df.index)
    return pd.to_numeric(df["repeats_failed"], errors="coerce").fillna(0).gt(0)


def not_run(df: pd.DataFrame) -> pd.Series:
    """The rows of configs skipped without a trial (a mode past the compile budget, a batch
    size whose eager failed): their message starts with NOT_RUN."""
    return df["message"].fillna("").astype(str).str.startswith(NOT_RUN)


def why_left_out(rows: pd.DataFrame) -> list[str]:
    """Why each of ``rows`` (none of them eligible) is left out, as :func:`eligible` decides: a
    failure's status, a config the search did not run and why, or what an ok row lacks. What
    comes before a ":" is the reason in short."""
    again, eager_only, timed = failed_again(rows), ran_eager_only(rows), measured_latency(rows)
    out = []
    for i, row in rows.iterrows():
        message = str(row.get("message") or "")
        if message.startswith(NOT_RUN):
            out.append(message.splitlines()[0])
        elif row["status"] != Status.OK.value:
            out.append(str(row["status"]))
        elif again[i]:
            # The rows keep how many re-measurements failed, not how (the study's storage does).
            failed = int(row["repeats_failed"])
            fine = max(listed(row.get("latency_ms_p50_repeats")) - 1, 0)  # its own p50 first
            out.append(f"failed when measured again: {failed} of {failed + fine} "
                       "re-measurements in fresh processes did not finish ok")
        elif eager_only[i]:
            out.append("compiled nothing, ran eager")
        elif not timed[i]:
            out.append("no latency measured" if num(row.get("latency_ms_p50")) is None
                       else f"no latency measured: its p50 is {row['latency_ms_p50']} ms")
        else:
            out.append("not verified correct")
    return out


def left_out_counts(rows: pd.DataFrame) -> str:
    """How many of ``rows`` (none of them eligible) are left out for each reason, in short:
    ``2 compile_error, 1 crash``."""
    short = pd.Series([why.split(":")[0] for why in why_left_out(rows)]).value_counts()
    return ", ".join(f"{n} {why}" for why, n in sorted(short.items()))


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    """The eligible rows that have every one of :data:`PARETO_OBJECTIVES`, as numbers: the rows
    a Pareto front is chosen from (and the trials the sampler is told are feasible)."""
    ok = eligible(df)
    ok = ok.assign(**{c: pd.to_numeric(ok[c], errors="coerce") for c in PARETO_OBJECTIVES})
    return ok.dropna(subset=list(PARETO_OBJECTIVES))


def pareto(df: pd.DataFrame) -> pd.DataFrame:
    """Non-dominated eligible rows within each batch size over :data:`FRONT_OBJECTIVES`, by
    batch size, then fastest first."""
    ok = comparable(df)
    ok = ok.assign(**{LATENCY: median_p50(ok)})  # from the repeats, as derive makes it
    keep: list[Any] = []
    for _, group in ok.groupby("batch_size"):
        values = group[list(FRONT_OBJECTIVES)].to_numpy(dtype=float)
        keep += list(group.index[~_dominated(values)])
    order = ok.loc[keep].sort_values(["batch_size", LATENCY], kind="stable").index
    return df.loc[order].reset_index(drop=True)


def _dominated(values: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Which rows of ``values`` (one per trial, one column per objective, lower is better)
    another row dominates: no worse in every objective and better in one. Whole arrays, a
    chunk of rows at a time: the search rewrites the front after every trial, and a Python
    loop over the pairs grew with the study (benchmarks/study_growth.py measures it)."""
    out = np.zeros(len(values), dtype=bool)
    for start in range(0, len(values), chunk):
        rows = values[start:start + chunk, None, :]  # each row against every other
        no_worse = np.all(values[None, :, :] <= rows, axis=2)
        better = np.any(values[None, :, :] < rows, axis=2)
        out[start:start + chunk] = np.any(no_worse & better, axis=1)
    return out


@dataclasses.dataclass(frozen=True)
class Objective:
    name: str
    column: str
    higher_is_better: bool
    what: str


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("latency", LATENCY, False,
              "lowest p50 per request (a finalist's median over its processes)"),
    Objective("throughput", "throughput_per_s", True,
              "most items per second back to back (a finalist's median over its processes)"),
    Objective("memory", "peak_memory_bytes", False, "least memory while serving"),
    Objective("warmup", "time_to_steady_s", False, "cheapest warm-up (compile + settle)"),
    Objective("traffic", "schedule_total_s", False,
              "least time on the study's shape schedule, recompiles included"),
)}
# After the objective itself, in this order: a tail that is better, a warm-up that is cheaper,
# then the earlier trial. Exact ties only; noise is :func:`best`'s to weigh.
TIE_BREAKERS = (TAIL_P90, "time_to_steady_s", "trial_number")
# Objectives decided by latency: there, a config within noise of eager is no faster than it.
_LATENCY_OBJECTIVES = ("latency", "throughput")


def rank(df: pd.DataFrame, objective: str) -> pd.DataFrame:
    """``df`` best first for ``objective``; exact ties as :data:`TIE_BREAKERS` says, and for
    memory first the least needed at any point (a compile that held 5 GiB loses a tie on
    serving memory to eager's 1 GiB)."""
    spec = OBJECTIVES[objective]
    keys = [spec.column] + [c for c in TIE_BREAKERS if c != spec.column]
    if objective == "memory":
        keys.insert(1, "memory_needed_bytes")
    ordered = df.assign(**{c: pd.to_numeric(df[c], errors="coerce") for c in keys})
    ordered = ordered.sort_values(
        keys, ascending=[not spec.higher_is_better] + [True] * (len(keys) - 1),
        na_position="last", kind="stable")
    return df.loc[ordered.index]


def best(df: pd.DataFrame, objective: str) -> pd.Series:
    """The best row of ``df`` (eligible rows, one batch size unless the objective is
    throughput) for ``objective``. For latency and throughput, a compiled row within noise of
    an eager row of its batch size (:func:`tuner.data.noise.verdict`: their processes overlap)
    is no measurable gain for its warm-up: the best compiled row ranked ahead of that eager row
    that was measured again and is, against every eager row of its batch size, faster beyond
    noise or undecided and faster by its processes, wins, and where there is none, the eager
    row does. Undecided is never a reason for eager: a compiled row undecided against eager
    keeps its place by the objective. (The top row alone was weighed: a noisy one within noise
    of eager made eager win over a config measurably faster than it.)"""
    ranked = rank(df, objective)
    top = ranked.iloc[0]
    if objective not in _LATENCY_OBJECTIVES or top["backend"] == EAGER:
        return top

    def eager_of(row: pd.Series) -> pd.DataFrame:
        return ranked[(ranked["backend"] == EAGER) & (ranked["batch_size"] == row["batch_size"])]

    fallback = next((e for _, e in eager_of(top).iterrows() if within_noise(top, e)), None)
    if fallback is None:
        return top

    def beats_eager(row: pd.Series) -> bool:
        # A row measured once is not known to be faster: it may be one a finalist dominates.
        eager = eager_of(row)
        return len(p50s_of(row)) >= 2 and not eager.empty and all(
            len(p50s_of(e)) >= 2 and _ahead(row_verdict(row, e)) for _, e in eager.iterrows())

    for index, row in ranked.iterrows():
        if index == fallback.name:
            break
        if row["backend"] != EAGER and beats_eager(row):
            return row
    return fallback


def _ahead(v: Verdict) -> bool:
    """Faster beyond noise, or undecided with every process faster (where both configs ran in
    two processes or more, undecided means their processes do not overlap)."""
    return v.outcome == FASTER or (v.outcome == UNDECIDED and v.ratio is not None and v.ratio < 1)


def throughput_picks_off_front(trials: pd.DataFrame, front: pd.DataFrame) -> pd.DataFrame:
    """Per batch size, the row ``tuner recommend --objective throughput`` picks (the most items
    per second back to back) where it is not on the Pareto ``front``, which ranks what one
    request waits: ``tuner show`` names it, and the finalists' re-measurement measures it too."""
    picks = []
    for bs, group in eligible(trials).groupby("batch_size"):
        here = front[front["batch_size"] == bs] if "batch_size" in front else front
        if here.empty or pd.to_numeric(group["throughput_per_s"], errors="coerce").isna().all():
            continue
        top = best(group, "throughput")
        if top["trial_number"] not in set(here["trial_number"]):
            picks.append(top.name)
    return trials.loc[picks]


def memory_needed_bytes(row: pd.Series) -> int | None:
    """The most memory a config held at any point: serving, or compiling and warming up (the
    row's ``memory_needed_bytes``, which :func:`tuner.data.derive.derive` computes)."""
    value = num(row.get("memory_needed_bytes"))
    return None if value is None else int(value)


def _over(fmt: str, value: float, limit: float) -> str:
    """``fmt`` (one ``{:.Nf}`` and a unit) of a value above ``limit``, with more decimals
    where N would not show it is above: 0.0047 s against a limit of 0.001 is not "0.0 s"."""
    head, _, tail = fmt.partition("}")
    decimals = int(head.split(".")[1].rstrip("f"))
    while float(f"{value:.{decimals}f}") <= limit and decimals < 12:
        decimals += 1
    return f"{value:.{decimals}f}" + tail


@dataclasses.dataclass(frozen=True)
class Constraints:
    """Limits a recommended config must meet. ``None`` means no limit.

    ``max_vram_gb`` is in GiB (2**30 bytes, as ``tuner show`` prints memory) and bounds the most
    memory the config needed at any point: while serving and while compiling and warming up. On a
    CPU study the memory is the trial process's peak resident memory. ``max_compile_s`` bounds
    the first compiled call as the study measured it (cold, unless the study ran with
    ``--warm-cache``). ``max_latency_ms`` bounds the p50 per request (:data:`LATENCY`: a
    finalist's median over its processes) and ``max_p99_ms`` the p99 per request, the tail a
    latency target is usually set on (:data:`TAIL_P99`, taken the same way).
    """

    max_vram_gb: float | None = None
    max_compile_s: float | None = None
    max_latency_ms: float | None = None
    max_p99_ms: float | None = None

    def __post_init__(self) -> None:
        for name, value in self.to_dict().items():
            if value is None:
                continue
            # Any real number (numpy's from a DataFrame too, kept as a float: JSON-able); True
            # is not a limit of 1.
            if not (isinstance(value, numbers.Real) and not isinstance(value, bool)
                    and value > 0 and math.isfinite(value)):
                raise UserError(f"{name}={value!r}: give a positive number")
            object.__setattr__(self, name, float(value))  # frozen

    def to_dict(self) -> dict[str, float | None]:
        return dataclasses.asdict(self)

    def _checks(self, row: pd.Series) -> tuple[tuple[str, float | None, float | None, float,
                                                  str, str], ...]:
        """(constraint, limit, the row's value, unit, format, verb) of each limit."""
        return (
            ("max_vram_gb", self.max_vram_gb, memory_needed_bytes(row), GIB, "{:.2f} GiB",
             "needs"),
            ("max_compile_s", self.max_compile_s, compile_seconds(row), 1.0,
             "{:.1f} s", "takes"),
            ("max_latency_ms", self.max_latency_ms, num(row.get(LATENCY)), 1.0,
             "{:.3f} ms", "takes"),
            ("max_p99_ms", self.max_p99_ms, num(row.get(TAIL_P99)), 1.0,
             "{:.3f} ms at p99", "takes"),
        )

    def excess(self, row: pd.Series) -> dict[str, float]:
        """Each limit's relative excess, value / limit - 1 (at most 0 within the limit), for the
        limits set that the row measured."""
        return {name: value / (limit * unit) - 1
                for name, limit, value, unit, _, _ in self._checks(row)
                if limit is not None and value is not None}

    def violations(self, row: pd.Series, called: Callable[[str], str] = str
                   ) -> list[tuple[str, float, str]]:
        """Each broken limit as (constraint, relative excess, sentence); unknown counts as broken.
        ``called`` names a limit in the sentence (the CLI: its option)."""
        out = []
        for name, limit, value, unit, fmt, verb in self._checks(row):
            if limit is None:
                continue
            if value is None:
                out.append((name, math.inf, f"has no measurement for {called(name)}"))
            elif value > limit * unit:
                out.append((name, value / (limit * unit) - 1,
                            f"{verb} {_over(fmt, value / unit, limit)} where "
                            f"{called(name)}={limit:g}"))
        return out


def compile_seconds(row: pd.Series) -> float | None:
    """What ``max_compile_s`` bounds: the first compiled call; eager compiles nothing (its
    first call, ``tuner show`` lists as "-", is no compile), so 0."""
    return 0.0 if row.get("backend") == EAGER else num(row.get("compile_s_cold"))


def with_ranks(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``rank_within_noise`` filled for the finalists measured again.

    Within each batch size (:func:`tuner.data.noise.rank_within_noise`, over the p50s of each
    finalist's processes): rank 1 where no finalist is faster beyond noise, otherwise one below
    the lowest-ranked finalist that is, and never above one faster on average.
    """
    df = df.copy()
    ranks = pd.Series(pd.NA, index=df.index, dtype="Int64")
    if len(df):
        again = df["latency_ms_p50_repeats"].map(lambda v: listed(v) >= 2) \
            if "latency_ms_p50_repeats" in df else pd.Series(False, index=df.index)
        # Only finalists measured again have processes to rank: no front to find before any is.
        front = set(pareto(df)["trial_number"]) if again.any() else set()
        ranked = df[df["trial_number"].isin(front) & again]
        for _, group in ranked.groupby("batch_size"):
            ranks[group.index] = rank_within_noise(
                [p50s_of(row) for _, row in group.iterrows()])
    df["rank_within_noise"] = ranks
    return df
