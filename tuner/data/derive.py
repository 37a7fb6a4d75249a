"""The columns computed from other columns, defined once: for rows just measured (export) and
for files of any schema version (read), so ``show``, ``recommend`` and ``compare`` see the same.
"""

from __future__ import annotations

import contextlib
import statistics
from typing import Any

import numpy as np
import pandas as pd

from tuner.domain.config import EAGER
from tuner.domain.records import FINGERPRINT_FIELDS, Status


def serving_memory(steady_reserved: Any, host_rss: Any) -> tuple[Any, str]:
    """The memory a config costs while serving: what the device holds (allocator-reserved,
    CUDA-graph pools included) or, on the CPU, the trial process's peak resident memory."""
    if steady_reserved is not None and not pd.isna(steady_reserved):
        return steady_reserved, "cuda_reserved"
    return host_rss, "host_max_rss"


def ran_eager(ran_compiled: Any) -> bool:
    """True for a ``ran_compiled`` cell that says False (not for an empty one)."""
    return ran_compiled is not None and ran_compiled is not pd.NA and ran_compiled == False  # noqa: E712


def ran_eager_only(df: pd.DataFrame) -> pd.Series:
    """Rows of a compiled config whose calls all ran eager (``ran_compiled`` is False); rows of
    files without the column (schema 1: tuner 0.1.0 before 2026-11-30, 1a13ffe) count as
    compiled."""
    if "ran_compiled" not in df:
        return pd.Series(False, index=df.index)
    return df["ran_compiled"].map(ran_eager).astype(bool)


def baseline_of(df: pd.DataFrame) -> pd.Series:
    """Which eager rows each row is compared with: those of its batch size and precision. The
    fastest of them is its ``eager_latency_ms_p50``, whatever their memory format (which eager
    can choose too); another precision is another model's accuracy, so never its baseline."""
    dtype = (df["dtype"].astype(object).where(df["dtype"].notna(), "") if "dtype" in df
             else pd.Series("", index=df.index))
    return pd.Series(list(zip(df["batch_size"], dtype)), index=df.index, dtype=object)


DERIVED = ("latency_ms_p50_median", "latency_ms_p90_median", "latency_ms_p99_median",
           "stream_ms_p50_median", "throughput_per_s",
           "time_to_steady_s", "peak_memory_bytes", "memory_kind", "peak_vram_bytes",
           "memory_needed_bytes",
           "achieved_tflops", "eager_latency_ms_p50", "speedup_vs_eager", "break_even_calls",
           "fraction_of_peak", "host_core_slowdown")


# Derived from latency_ms_p50_median: a file written by tuner 0.1.0 before 2026-12-01 (ec4271c),
# without that column, has them from each trial's own p50, and reading it computes them afresh.
FROM_MEDIAN = ("latency_ms_p50_median", "eager_latency_ms_p50", "speedup_vs_eager",
               "break_even_calls")


def derive(df: pd.DataFrame, fingerprints: list[dict[str, Any]] | None = None,
           fill_only: bool = False, recompute: tuple[str, ...] = ()) -> pd.DataFrame:
    """``df`` with the :data:`DERIVED` columns computed from the measured ones. ``fill_only``
    (reading a file) keeps the values a file holds and fills only its empty cells, except in
    the columns named in ``recompute``. With one ``fingerprints`` entry (one machine made the
    whole study), rows without a fingerprint get it."""
    stored = df.copy()
    df = df.copy()
    number = {c: pd.to_numeric(df[c], errors="coerce") for c in (
        "latency_ms_p50", "stream_ms_p50", "batch_size", "compile_s_cold", "warmup_s",
        "flops_per_call", "peak_tflops_measured")}
    # The latency a row is ranked, recommended and compared by: a finalist measured again in
    # fresh processes (tuner.study.finalists) by the median of their p50s, so that one process
    # on a slow core or a busy host neither makes nor breaks it; any other row by its own p50.
    df["latency_ms_p50_median"] = median_p50(df)
    p50 = df["latency_ms_p50_median"]
    # The tail one request waits, taken the same way: a finalist's median p90 and p99 over the
    # processes that kept them (--max-p99-ms bounds the p99).
    for tail in ("latency_ms_p90", "latency_ms_p99"):
        df[f"{tail}_median"] = _median(df, f"{tail}_repeats", tail)
    # Items per second of a busy server: from the back-to-back time per call (a finalist's
    # median over its processes, as for p50).
    df["stream_ms_p50_median"] = stream = _median(df, "stream_ms_p50_repeats", "stream_ms_p50")
    stream = positive(stream)  # a time of 0 or inf is no measurement: nothing to divide by
    df["throughput_per_s"] = number["batch_size"] * 1e3 / stream
    # Warm-up cost: the cold first call plus the calls until latency settled.
    df["time_to_steady_s"] = number["compile_s_cold"] + number["warmup_s"].fillna(0.0)
    memory = [serving_memory(s, h) for s, h in zip(df["vram_bytes_steady_reserved"],
                                                   df["host_rss_bytes_peak"])]
    df["peak_memory_bytes"] = pd.array([None if m is None or pd.isna(m) else int(m)
                                        for m, _ in memory], dtype="Int64")
    df["memory_kind"] = [kind for _, kind in memory]
    df["peak_vram_bytes"] = df["vram_bytes_steady_reserved"]  # serving, as its name does not say
    # What --max-vram-gb bounds: serving, or compiling and warming up, whichever held more.
    needed = pd.concat([pd.to_numeric(df["peak_memory_bytes"], errors="coerce"),
                        pd.to_numeric(df["vram_bytes_compile_reserved"], errors="coerce")],
                       axis=1).max(axis=1)
    df["memory_needed_bytes"] = pd.array([None if pd.isna(v) else int(v) for v in needed],
                                         dtype="Int64")
    df["achieved_tflops"] = number["flops_per_call"] / (stream * 1e-3) / 1e12

    # Neither a row nor its eager baseline has a speedup from a p50 of 0 or inf (no latency).
    p50 = p50.where(measured_latency(df))
    ok = df[(df["status"] == Status.OK.value) & (df["backend"] == EAGER)]
    eager = p50[ok.index].groupby(baseline_of(ok)).min()
    df["eager_latency_ms_p50"] = baseline_of(df).map(eager.dropna().to_dict()).astype(float)
    df["speedup_vs_eager"] = df["eager_latency_ms_p50"] / p50
    saved_ms = df["eager_latency_ms_p50"] - p50
    # Calls after which the warm-up cost is paid back by faster calls; none if never.
    df["break_even_calls"] = (df["time_to_steady_s"] * 1e3 / saved_ms).where(
        (saved_ms > 0) & (df["backend"] != EAGER))
    # A config that ran eager under a compiled label has no compiled speedup to report.
    df.loc[ran_eager_only(df), ["speedup_vs_eager", "break_even_calls"]] = float("nan")

    if fingerprints is not None and len(fingerprints) == 1:
        for key in FINGERPRINT_FIELDS:
            if fingerprints[0].get(key) is not None:
                df[f"fp_{key}"] = df[f"fp_{key}"].astype(object).where(
                    df[f"fp_{key}"].notna(), fingerprints[0][key])
    # Against the best matmul rate measured on the same machine during the study.
    machine = [df["fp_host"].fillna(""), df["fp_gpu_name"].fillna("")]
    peak = positive(number["peak_tflops_measured"].groupby(machine).transform("max"))
    df["fraction_of_peak"] = df["achieved_tflops"] / peak  # a peak of 0 is none: NaN, not inf
    # How slow the launching core was: the fixed loop's time against the lower quartile of
    # the same machine's trials in the study (its fast cores), 1.0 on a fast one.
    loop = pd.to_numeric(df["host_loop_ms"], errors="coerce") if "host_loop_ms" in df \
        else pd.Series(float("nan"), index=df.index)
    df["host_core_slowdown"] = loop / loop.groupby(machine).transform(lambda v: v.quantile(0.25))
    if fill_only:
        for column in (c for c in DERIVED if c not in recompute):
            # An inf a file holds (written from a p50 of 0) is no value: computed afresh.
            held = stored[column].notna() & ~stored[column].isin([np.inf, -np.inf])
            filled = stored[column].where(held, df[column])
            # A column the file lacked reads as None's: its values are the computed ones' kind.
            with contextlib.suppress(TypeError, ValueError):
                filled = filled.astype(df[column].dtype)
            df[column] = filled
    return df


def listed(value: Any) -> int:
    """How many values a list cell holds (``latency_ms_p50_repeats``, say): 0 for an empty
    cell, None or NaN. A Parquet list reads back as an array."""
    return len(value) if hasattr(value, "__len__") and not isinstance(value, str) else 0


def positive(values: pd.Series) -> pd.Series:
    """``values`` where each is a positive, finite number, NaN elsewhere: a time of 0 or inf
    is no measurement."""
    return values.where(np.isfinite(values) & values.gt(0))


def measured_latency(df: pd.DataFrame) -> pd.Series:
    """Rows whose p50, and median p50 where measured again, are positive finite numbers."""
    own = pd.to_numeric(df["latency_ms_p50"], errors="coerce")
    return (positive(own).notna() & positive(median_p50(df)).notna()).astype(bool)


def median_p50(df: pd.DataFrame) -> pd.Series:
    """Each row's ``latency_ms_p50_median``: the median of ``latency_ms_p50_repeats`` (the p50
    of every process of a finalist, the trial's own first) where the row has them, else its
    ``latency_ms_p50``."""
    return _median(df, "latency_ms_p50_repeats", "latency_ms_p50")


def _median(df: pd.DataFrame, repeats_column: str, own_column: str) -> pd.Series:
    """The median of each row's list in ``repeats_column`` where it has one, else its
    ``own_column``."""
    own = pd.to_numeric(df[own_column], errors="coerce")
    repeats = df[repeats_column] if repeats_column in df \
        else pd.Series(None, index=df.index, dtype=object)
    medians = [statistics.median(float(v) for v in values) if listed(values) else None
               for values in repeats]
    return pd.Series(medians, index=df.index, dtype=float).fillna(own)
