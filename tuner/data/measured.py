"""What a study measured for one config, as a typed record (units in the names)."""

from __future__ import annotations

import dataclasses

import pandas as pd

from tuner.data.derive import listed
from tuner.data.rows import plain
from tuner.data.select import memory_needed_bytes


@dataclasses.dataclass(frozen=True)
class Measured:
    """What the study measured for the recommended config. Units in the names: ``latency_ms_*``
    per request (each call then synchronize), ``stream_ms_p50`` per call back to back."""

    latency_ms_p50: float
    latency_ms_p90: float | None
    latency_ms_p99: float | None
    throughput_per_s: float | None
    speedup_vs_eager: float | None
    eager_latency_ms_p50: float | None
    compile_s_cold: float | None
    time_to_steady_s: float | None
    break_even_calls: float | None
    peak_memory_bytes: int | None
    memory_kind: str | None
    memory_needed_bytes: int | None  # the most at any point, compile and warm-up included
    noisy: bool | None
    graph_breaks: int | None
    recompiles: int | None
    # finalists measured again in fresh processes (tuner.study.finalists); None if not
    compile_s_warm: float | None = None
    compile_s_artifacts: float | None = None
    latency_ms_p50_ci_low: float | None = None
    latency_ms_p50_ci_high: float | None = None
    latency_spread_pct: float | None = None
    rank_within_noise: int | None = None
    stream_ms_p50: float | None = None
    # what it was ranked and recommended by: the median p50 over its processes where it was
    # measured again, else latency_ms_p50 (tuner.data.select.LATENCY)
    latency_ms_p50_median: float | None = None
    stream_ms_p50_median: float | None = None  # the same back to back: throughput_per_s uses it
    # the tail per request taken the same way (tuner.data.select.TAIL_P90, TAIL_P99)
    latency_ms_p90_median: float | None = None
    latency_ms_p99_median: float | None = None
    # how many processes those two medians are over: 1 where the re-measurements were recorded
    # by tuner 0.1.0 before 2026-12-02 (268c918), which kept no p99 (the medians are then the
    # search trial's own figures)
    tail_processes: int | None = None
    # what --objective traffic ranks by, on a study with a shape schedule, and its recompiles
    schedule_total_s: float | None = None
    schedule_recompiles: int | None = None
    # what another precision costs: the output's largest error against float32 eager
    max_abs_error_vs_fp32: float | None = None

    @classmethod
    def from_row(cls, row: pd.Series) -> Measured:
        values = {f.name: plain(row.get(f.name)) for f in dataclasses.fields(cls)}
        values["memory_needed_bytes"] = memory_needed_bytes(row)
        values["tail_processes"] = min(listed(row.get(f"latency_ms_{q}_repeats"))
                                       for q in ("p90", "p99")) or None
        for name in ("peak_memory_bytes", "graph_breaks", "recompiles", "rank_within_noise",
                     "schedule_recompiles"):
            if values[name] is not None:
                values[name] = int(values[name])
        return cls(**values)
