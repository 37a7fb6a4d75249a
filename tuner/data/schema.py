"""The Parquet schema of ``trials.parquet`` and ``pareto.parquet``: typed, versioned, units in
the column names, the fingerprint of the machine on every row.

Versions, all written by tuner 0.1.0 (CHANGELOG.md): 1 the first files (2026-11-30, 876ec63);
2 (2026-11-30, 1a13ffe) added compile-health reasons, ``ran_compiled``, FLOPs and the device's
peak, the finalist columns, the shape-schedule replay, pre-started processes and NVML during
compile; 3 (2026-11-30, fd5945c) measures latency per request (``latency_ms_*``: each call
followed by a synchronize) and back to back (``stream_ms_*``) and takes throughput from the
stream. Versions 1 and 2 timed calls back to back only, under the ``latency_ms_*`` names: reading
them, those values are also the ``stream_ms_*`` columns. A file of any earlier version loads:
its missing columns come back empty, and the derived ones are computed (:mod:`tuner.data.derive`).

Version 3 also holds the searched dimensions: ``dtype``, ``channels_last`` and
``cudnn_benchmark`` are what each row ran with (the config's where the study searches them,
else the workload's; ``dtype`` may be ``tf32``), ``max_abs_error_vs_fp32`` is each row's error
against the float32 eager output (what its precision costs), ``config_json`` is the row's config
exactly (:meth:`tuner.domain.config.TrialConfig.to_dict`, for :func:`tuner.data.rows.config_of`),
and each inductor option a study searched has a column of its own beyond :data:`SCHEMA`:
``opt_`` plus its name with dots as underscores (``opt_epilogue_fusion``,
``opt_triton_cudagraphs``), typed as the option is, empty where it does not apply (eager, other
backends). Those columns exist only in files of studies that searched the option
(:func:`is_option_column`).

``compile_scope`` (tuner 0.3.0, within version 3) says what each compiled row compiled:
``whole`` (the model, ``torch.compile(model)``) or ``regional`` (each block of its largest list
of repeated blocks, :mod:`tuner.runtime.regions`), whose ``region_class`` and
``regions_compiled`` say which and how many; empty for eager, and in files written before it
(where every compiled row compiled the whole model).

``cache_start`` says what each compiled row's first call (``compile_s_cold``) started from:
``cold`` (empty inductor and triton caches), ``warm`` (caches that already held entries, as
with ``--warm-cache``) or ``artifacts`` (saved compile artifacts loaded first); empty for eager
and in files written by tuner 0.1.0 before 2026-11-30 (79eef4c).

The trial's phases beyond import, build, compile, warm-up and measurement (``launch_s``,
``eager_reference_s``, ``replay_s``, ``process_s``, ``tuner_overhead_s``) and what came
ready-made (``prebuilt``, ``prewarmed``, ``reference_reused``, ``reuse_note``) are empty in
files written by tuner 0.1.0 before 2026-11-30 (79eef4c; prewarmed: 9067913).
"""

from __future__ import annotations

import pyarrow as pa

from tuner.domain.records import FINGERPRINT_FIELDS

SCHEMA_VERSION = 3

_f64, _i64, _str, _bool = pa.float64(), pa.int64(), pa.string(), pa.bool_()
# Finalists (the Pareto set of each batch size) measured again in fresh processes
# (tuner.study.finalists); empty for the other trials.
FINALIST_FIELDS = [
    ("compile_s_warm", _f64),  # first call of a second process on the trial's cache folder
    ("compile_s_artifacts", _f64),  # load_cache_artifacts + first call, on an empty cache
    ("latency_ms_p50_repeats", pa.list_(_f64)),  # p50 of each process, the trial's own first
    ("stream_ms_p50_repeats", pa.list_(_f64)),  # back to back, of each process that kept it
    # the tail per request, of each process that kept it (re-measurements made by tuner 0.1.0
    # before 2026-12-02, 268c918, kept no p99)
    ("latency_ms_p90_repeats", pa.list_(_f64)), ("latency_ms_p99_repeats", pa.list_(_f64)),
    ("latency_spread_pct", _f64),  # (max - min) / median of those p50s, in percent
    ("latency_ms_p50_ci_low", _f64), ("latency_ms_p50_ci_high", _f64),  # 95 %, tuner.data.noise
    ("rank_within_noise", _i64),  # 1 = fastest; equal ranks: within noise (tuner.data.noise)
    ("repeats_failed", _i64),  # re-measurements that did not finish ok
    ("artifacts_file", _str), ("artifacts_torch", _str),  # relative to the study folder
]
SCHEMA = pa.schema([
    ("schema_version", pa.int32()),
    # the trial and its config
    ("study", _str), ("trial_number", _i64), ("config_key", _str), ("label", _str),
    ("backend", _str), ("mode", _str), ("dynamic", _bool), ("batch_size", _i64),
    ("config_json", _str),
    # the workload
    ("model", _str), ("device", _str), ("dtype", _str), ("image_size", _i64),
    ("channels_last", _bool), ("cudnn_benchmark", _bool),
    # what torch.compile was given: whole (the model) or regional (each repeated block); the
    # blocks' class and how many were compiled (tuner 0.3.0; empty for eager and before)
    ("compile_scope", _str), ("region_class", _str), ("regions_compiled", _i64),
    # how it ended
    ("status", _str), ("message", _str), ("stderr_tail", _str),
    # time
    ("import_s", _f64), ("build_s", _f64), ("compile_s_cold", _f64),
    ("cache_start", _str),  # what the first call started from: cold, warm or artifacts
    ("warmup_s", _f64),
    ("warmup_calls", _i64), ("time_to_steady_s", _f64), ("wall_s", _f64),
    ("prestarted", _bool), ("quiet_wait_s", _f64),
    # where the rest of wall_s goes, and what came ready-made (tuner.domain.records.TrialResult)
    ("launch_s", _f64), ("eager_reference_s", _f64), ("replay_s", _f64), ("process_s", _f64),
    ("tuner_overhead_s", _f64), ("prebuilt", _bool), ("prewarmed", _bool),
    ("reference_reused", _bool),
    ("reuse_note", _str),
    # steady-state latency
    ("latency_ms_p50", _f64), ("latency_ms_p90", _f64), ("latency_ms_p99", _f64),
    ("latency_ms_mean", _f64), ("latency_ms_min", _f64), ("latency_ms_iqr", _f64),
    ("latency_samples_ms", pa.list_(_f64)), ("measure_calls", _i64), ("measure_s", _f64),
    ("timer", _str), ("noisy", _bool),
    # steady state, back to back
    ("stream_ms_p50", _f64), ("stream_ms_p90", _f64), ("stream_ms_p99", _f64),
    ("stream_ms_iqr", _f64), ("stream_calls", _i64), ("stream_s", _f64), ("stream_timer", _str),
    ("host_other_cpu_cores", _f64), ("host_load_1m", _f64), ("host_steal_cores", _f64),
    ("host_loop_ms", _f64), ("host_core_slowdown", _f64), ("timing_cpu", _i64),
    ("gpu_time_ms", _f64),
    ("throughput_per_s", _f64),
    # ranked, recommended and compared by: a finalist's median p50 over its processes, else p50
    ("latency_ms_p50_median", _f64),
    # the tail per request taken the same way: recommend --max-p99-ms bounds the p99
    ("latency_ms_p90_median", _f64), ("latency_ms_p99_median", _f64),
    ("stream_ms_p50_median", _f64),  # the same back to back: throughput and TFLOP/s use it
    ("eager_latency_ms_p50", _f64), ("speedup_vs_eager", _f64), ("break_even_calls", _f64),
    # memory
    ("peak_memory_bytes", _i64), ("memory_kind", _str), ("peak_vram_bytes", _i64),
    # the most held at any point, compiling included: what recommend --max-vram-gb bounds
    ("memory_needed_bytes", _i64),
    ("vram_bytes_baseline", _i64), ("vram_bytes_compile_allocated", _i64),
    ("vram_bytes_compile_reserved", _i64), ("vram_bytes_steady_allocated", _i64),
    ("vram_bytes_steady_reserved", _i64), ("vram_bytes_process_nvml", _i64),
    ("vram_bytes_compile_process_nvml", _i64), ("prewarm_vram_bytes_nvml", _i64),
    ("host_rss_bytes_peak", _i64),
    # correctness against eager
    ("correct", _bool), ("max_abs_error", _f64), ("tolerance", _f64), ("correctness_note", _str),
    ("max_abs_error_vs_fp32", _f64),
    # compile health
    ("graph_breaks", _i64), ("graph_break_reasons", pa.list_(_str)), ("unique_graphs", _i64),
    ("recompiles", _i64), ("recompile_reasons", pa.list_(_str)), ("cudagraph_skips", _i64),
    ("eager_fallback_frames", _i64), ("eager_fallback_reasons", pa.list_(_str)),
    ("recompile_limit_hits", _i64), ("recompile_limit_reasons", pa.list_(_str)),
    ("cudagraph_skip_reasons", pa.list_(_str)), ("ran_compiled", _bool),
    # work per call and the machine's peak
    ("flops_per_call", _i64), ("achieved_tflops", _f64), ("peak_tflops_measured", _f64),
    ("fraction_of_peak", _f64),
    # the workload's shape schedule replayed (empty without one)
    ("schedule_recompiles", _i64), ("schedule_recompile_s", _f64), ("schedule_total_s", _f64),
    ("schedule_batch_sizes", pa.list_(_i64)), ("schedule_shapes", pa.list_(_str)),
    ("schedule_latency_ms", pa.list_(_f64)), ("schedule_first_call_s", pa.list_(_f64)),
    ("schedule_warmup_s", pa.list_(_f64)), ("schedule_shape_recompiles", pa.list_(_i64)),
    *FINALIST_FIELDS,
    *[(f"fp_{name}", _i64 if name == "gpu_memory_bytes" else _str) for name in FINGERPRINT_FIELDS],
])
COLUMNS = SCHEMA.names
OPTION_PREFIX = "opt_"  # tuner.domain.config.option_column
# Every version wrote these, and nothing in a file stands in for them: what each trial ran, how
# it ended and its latency. A file without one of them was not written by tuner, or is damaged
# (tuner.data.files.read refuses it rather than show, compare or recommend nothing).
REQUIRED_COLUMNS = ("status", "batch_size", "backend", "label", "latency_ms_p50", "correct")


def kind_of(type_: pa.DataType) -> str | None:
    """What a column of this Arrow type holds, in words (``numbers``, ``text``, ``true/false``,
    ``lists``); None for a type with no values at all (a column no row filled)."""
    if pa.types.is_null(type_):
        return None
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        return "numbers"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "text"
    if pa.types.is_boolean(type_):
        return "true/false"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return "lists"
    return str(type_)


def is_option_column(name: str) -> bool:
    """An inductor option's column (added to the schema for the options a study searched)."""
    return name.startswith(OPTION_PREFIX) and name not in COLUMNS
