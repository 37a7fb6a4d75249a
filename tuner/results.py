"""The product: ``trials.parquet`` (every trial) and ``pareto.parquet`` (the best trade-offs).

Typed, versioned schema with units in the column names; the hardware/software fingerprint on
every row and in the file metadata, so studies from different machines compare from files alone.
Files are written to a temporary name and renamed: a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tuner.errors import UserError
from tuner.fingerprint import FIELDS as FINGERPRINT_FIELDS
from tuner.records import Status, TrialResult, readable_mode
from tuner.space import TrialConfig
from tuner.workload import Workload

SCHEMA_VERSION = 2  # 2: compile-health reasons, ran_compiled, FLOPs and peak columns
TRIALS_FILE = "trials.parquet"
PARETO_FILE = "pareto.parquet"
# Minimised together, within each batch size.
OBJECTIVES = ("latency_ms_p50", "peak_memory_bytes", "time_to_steady_s")

_f64, _i64, _str, _bool = pa.float64(), pa.int64(), pa.string(), pa.bool_()
# Schema 2: finalists (the Pareto set of each batch size) re-measured in fresh processes; see
# tuner.finalists. Empty for the other trials.
FINALIST_FIELDS = [
    ("compile_s_warm", _f64),  # first call of a second process on the trial's cache folder
    ("compile_s_artifacts", _f64),  # load_cache_artifacts + first call, on an empty cache
    ("latency_ms_p50_repeats", pa.list_(_f64)),  # p50 of each process, the trial's own first
    ("latency_spread_pct", _f64),  # (max - min) / median of those p50s, in percent
    ("latency_ms_p50_ci_low", _f64), ("latency_ms_p50_ci_high", _f64),  # 95 %, see finalists
    ("rank_within_noise", _i64),  # 1 = fastest; equal ranks: intervals overlap, within noise
    ("repeats_failed", _i64),  # re-measurements that did not finish ok
    ("artifacts_file", _str), ("artifacts_torch", _str),  # relative to the study folder
]
SCHEMA = pa.schema([
    ("schema_version", pa.int32()),
    ("study", _str), ("trial_number", _i64), ("config_key", _str), ("label", _str),
    ("backend", _str), ("mode", _str), ("dynamic", _bool), ("batch_size", _i64),
    ("model", _str), ("device", _str), ("dtype", _str), ("image_size", _i64),
    ("channels_last", _bool), ("cudnn_benchmark", _bool),
    ("status", _str), ("message", _str), ("stderr_tail", _str),
    ("import_s", _f64), ("build_s", _f64), ("compile_s_cold", _f64), ("warmup_s", _f64),
    ("warmup_calls", _i64), ("time_to_steady_s", _f64), ("wall_s", _f64),
    ("latency_ms_p50", _f64), ("latency_ms_p90", _f64), ("latency_ms_p99", _f64),
    ("latency_ms_mean", _f64), ("latency_ms_min", _f64), ("latency_ms_iqr", _f64),
    ("latency_samples_ms", pa.list_(_f64)), ("measure_calls", _i64), ("measure_s", _f64),
    ("timer", _str), ("noisy", _bool), ("throughput_per_s", _f64),
    ("eager_latency_ms_p50", _f64), ("speedup_vs_eager", _f64), ("break_even_calls", _f64),
    ("peak_memory_bytes", _i64), ("memory_kind", _str), ("peak_vram_bytes", _i64),
    ("vram_bytes_baseline", _i64), ("vram_bytes_compile_allocated", _i64),
    ("vram_bytes_compile_reserved", _i64), ("vram_bytes_steady_allocated", _i64),
    ("vram_bytes_steady_reserved", _i64), ("vram_bytes_process_nvml", _i64),
    ("host_rss_bytes_peak", _i64),
    ("correct", _bool), ("max_abs_error", _f64), ("tolerance", _f64), ("correctness_note", _str),
    ("graph_breaks", _i64), ("graph_break_reasons", pa.list_(_str)), ("unique_graphs", _i64),
    ("recompiles", _i64), ("recompile_reasons", pa.list_(_str)), ("cudagraph_skips", _i64),
    ("eager_fallback_frames", _i64),
    # schema 2
    ("eager_fallback_reasons", pa.list_(_str)), ("recompile_limit_hits", _i64),
    ("recompile_limit_reasons", pa.list_(_str)), ("cudagraph_skip_reasons", pa.list_(_str)),
    ("ran_compiled", _bool),
    ("flops_per_call", _i64), ("achieved_tflops", _f64), ("peak_tflops_measured", _f64),
    ("fraction_of_peak", _f64),
    # schema 2, later: the workload's shape schedule replayed (tuner.worker; empty without one)
    ("schedule_recompiles", _i64), ("schedule_recompile_s", _f64), ("schedule_total_s", _f64),
    ("schedule_batch_sizes", pa.list_(_i64)), ("schedule_latency_ms", pa.list_(_f64)),
    # schema 2, later: pre-started trial processes (tuner.runner, prestart)
    ("prestarted", _bool), ("quiet_wait_s", _f64),
    # schema 2, later: NVML during compile + warm-up (tuner.measure.NvmlPeak)
    ("vram_bytes_compile_process_nvml", _i64),
    # schema 2, later: shapes with a sequence length ("8x128"), one per schedule_batch_sizes
    ("schedule_shapes", pa.list_(_str)),
    *FINALIST_FIELDS,
    *[(f"fp_{name}", _i64 if name == "gpu_memory_bytes" else _str) for name in FINGERPRINT_FIELDS],
])
COLUMNS = SCHEMA.names


def trial_row(study: str, number: int, config: TrialConfig, workload: Workload,
              result: TrialResult) -> dict[str, Any]:
    """One Parquet row (before the columns that need the other rows, like speedup)."""
    data = result.to_dict()
    fingerprint = data.pop("fingerprint") or {}
    row: dict[str, Any] = {k: v for k, v in data.items() if k in COLUMNS}
    row.update(dict.fromkeys(name for name, _ in FINALIST_FIELDS))  # tuner.finalists fills them
    memory_bytes, memory_kind = memory_objective(result)
    row.update(
        schema_version=SCHEMA_VERSION, study=study, trial_number=number, config_key=config.key,
        label=config.label, backend=config.backend, mode=config.mode, dynamic=config.dynamic,
        batch_size=config.batch_size, model=workload.model, device=workload.device,
        dtype=workload.dtype, image_size=workload.image_size,
        channels_last=workload.channels_last, cudnn_benchmark=workload.cudnn_benchmark,
        time_to_steady_s=result.time_to_steady_s,
        peak_vram_bytes=result.vram_bytes_steady_reserved,
        peak_memory_bytes=memory_bytes,
        memory_kind=memory_kind,
        throughput_per_s=(config.batch_size * 1e3 / result.latency_ms_p50
                          if result.latency_ms_p50 else None),
        achieved_tflops=(result.flops_per_call / (result.latency_ms_p50 * 1e-3) / 1e12
                         if result.flops_per_call is not None and result.latency_ms_p50 else None),
    )
    row.update({f"fp_{k}": fingerprint.get(k) for k in FINGERPRINT_FIELDS})
    return row


def memory_objective(result: TrialResult) -> tuple[int | None, str]:
    """The memory a config costs: what the device holds while serving (allocator-reserved,
    CUDA-graph pools included) or, on the CPU, the trial process's peak resident memory."""
    if result.vram_bytes_steady_reserved is not None:
        return result.vram_bytes_steady_reserved, "cuda_reserved"
    return result.host_rss_bytes_peak, "host_max_rss"


def objective_values(result: TrialResult) -> list[float] | None:
    """The values Optuna minimises, in :data:`OBJECTIVES` order; None if any is missing."""
    values = [result.latency_ms_p50, memory_objective(result)[0], result.time_to_steady_s]
    return None if any(v is None for v in values) else [float(v) for v in values]


def frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows → a DataFrame with every column of the schema and the cross-row columns filled."""
    df = pd.DataFrame(list(rows), columns=COLUMNS)
    ok = df[df["status"] == Status.OK.value]
    eager = ok[ok["backend"] == "eager"].groupby("batch_size")["latency_ms_p50"].min()
    df["eager_latency_ms_p50"] = df["batch_size"].map(eager)
    df["speedup_vs_eager"] = df["eager_latency_ms_p50"] / df["latency_ms_p50"]
    saved_ms = df["eager_latency_ms_p50"] - df["latency_ms_p50"]
    # Calls after which the warm-up cost is paid back by faster calls; none if never.
    df["break_even_calls"] = (df["time_to_steady_s"] * 1e3 / saved_ms).where(
        (saved_ms > 0) & (df["backend"] != "eager"))
    # A config that ran eager under a compiled label has no compiled speedup to report.
    ran_eager = ran_eager_only(df)
    df.loc[ran_eager, ["speedup_vs_eager", "break_even_calls"]] = float("nan")
    # Against the best matmul rate measured on the same machine during the study.
    machine = [df["fp_host"].fillna(""), df["fp_gpu_name"].fillna("")]
    peak = pd.to_numeric(df["peak_tflops_measured"], errors="coerce").groupby(machine).transform("max")
    df["fraction_of_peak"] = pd.to_numeric(df["achieved_tflops"], errors="coerce") / peak
    return df.sort_values(["batch_size", "trial_number"], kind="stable").reset_index(drop=True)


def pareto(df: pd.DataFrame) -> pd.DataFrame:
    """Non-dominated trials within each batch size over :data:`OBJECTIVES`.

    Only trials that finished, were not shown wrong and, if compiled, really ran compiled
    are candidates.
    """
    ok = candidates(df).dropna(subset=list(OBJECTIVES))
    keep = []
    for _, group in ok.groupby("batch_size"):
        values = group[list(OBJECTIVES)].to_numpy()
        for i, row in enumerate(values):
            dominated = any(
                (other <= row).all() and (other < row).any()
                for j, other in enumerate(values) if j != i)
            if not dominated:
                keep.append(group.index[i])
    return df.loc[keep].sort_values(["batch_size", "latency_ms_p50"]).reset_index(drop=True)


def candidates(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that may be compared, ranked and recommended: the trial finished, its output was not
    shown wrong, and a compiled config really ran compiled code."""
    return df[(df["status"] == Status.OK.value) & (df["correct"] != False)  # noqa: E712
              & ~ran_eager_only(df)]


def ran_eager_only(df: pd.DataFrame) -> pd.Series:
    """Rows of a compiled config whose calls all ran eager (``ran_compiled`` is False); rows of
    files older than the column count as compiled."""
    if "ran_compiled" not in df:
        return pd.Series(False, index=df.index)
    return df["ran_compiled"].map(ran_eager).astype(bool)


def ran_eager(ran_compiled: Any) -> bool:
    """True for a ``ran_compiled`` cell that says False (not for an empty one)."""
    return ran_compiled is not None and ran_compiled is not pd.NA and ran_compiled == False  # noqa: E712


def to_table(df: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(df[COLUMNS], schema=SCHEMA, preserve_index=False)


def write(df: pd.DataFrame, path: Path, metadata: dict[str, Any]) -> None:
    """Atomically write ``df`` with the tuner's metadata (JSON values under ``tuner.*`` keys)."""
    table = to_table(df)
    meta = dict(table.schema.metadata or {})
    meta.update({f"tuner.{k}".encode(): json.dumps(v, default=_plain).encode()
                 for k, v in metadata.items()})
    meta[b"tuner.schema_version"] = str(SCHEMA_VERSION).encode()
    table = table.replace_schema_metadata(meta)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, readable_mode())
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Load a tuner Parquet file (a study folder means its trials file) and its metadata.

    Files of older schema versions load: missing columns come back empty.
    """
    path = Path(path)
    if path.is_dir():
        path = path / TRIALS_FILE
    if not path.exists():
        raise UserError(f"{path}: no such file (give a study folder or a tuner Parquet file)")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{path}: not a readable Parquet file ({exc})") from exc
    raw = table.schema.metadata or {}
    if b"tuner.schema_version" not in raw:
        raise UserError(f"{path}: not a tuner study file (no tuner metadata)")
    meta = {k.decode()[len("tuner."):]: json.loads(v) for k, v in raw.items()
            if k.startswith(b"tuner.")}
    version = int(meta["schema_version"])
    if version > SCHEMA_VERSION:
        raise UserError(f"{path}: schema version {version} is newer than this tuner reads "
                        f"({SCHEMA_VERSION}); upgrade tuner")
    df = table.to_pandas()
    for column in COLUMNS:
        if column not in df:
            df[column] = None
    return df, meta


def fingerprints(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The distinct fingerprints in a study (one, unless several machines shared it)."""
    cols = [f"fp_{k}" for k in FINGERPRINT_FIELDS]
    distinct = df[cols].dropna(how="all").drop_duplicates()
    return [{c[3:]: (None if pd.isna(v) else v) for c, v in row.items()}
            for row in distinct.to_dict("records")]


def peaks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The best matmul rate measured on each machine of a study (host, GPU name, TFLOP/s)."""
    measured = df[pd.to_numeric(df["peak_tflops_measured"], errors="coerce").notna()]
    best = measured.groupby([measured["fp_host"].fillna(""), measured["fp_gpu_name"].fillna("")])[
        "peak_tflops_measured"].max()
    return [{"host": host or None, "gpu_name": gpu or None, "peak_tflops_measured": float(v)}
            for (host, gpu), v in best.items()]


def export(study_dir: Path, df: pd.DataFrame, metadata: dict[str, Any]) -> None:
    """Write both files of a study."""
    meta = {**metadata, "fingerprints": fingerprints(df), "peak_tflops": peaks(df)}
    write(df, Path(study_dir) / TRIALS_FILE, meta)
    write(pareto(df), Path(study_dir) / PARETO_FILE, meta)


def _plain(value: Any) -> Any:
    """JSON fallback for numpy scalars that pandas hands back."""
    return value.item() if hasattr(value, "item") else str(value)
