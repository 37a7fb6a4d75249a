"""The Parquet schema of ``trials.parquet`` and ``pareto.parquet``: typed, versioned, units in
the column names, the fingerprint of the machine on every row.

Each column's unit and meaning are here and nowhere else (:data:`CATALOGUE`): every file
written holds them as Arrow field metadata (``unit``, ``description``), and docs/columns.md's
reference is generated from them (``python -m tuner.data.column_docs``).

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

``started_from`` (tuner 0.3.0, within version 3) names the study a row's config came from
where the search measured it first because that study's finalists or Pareto front held it
(``tuner search --start-from``); empty for every other row and in files written before it.

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

import dataclasses

import pyarrow as pa

from tuner.domain.records import FINGERPRINT_FIELDS

# What each fingerprint field (fp_<field> on every row) says of the machine.
FINGERPRINT_MEANINGS = {
    "device_kind": "cuda or cpu", "gpu_name": "the GPU's name",
    "gpu_compute_capability": "its compute capability", "gpu_memory_bytes": "its memory",
    "driver": "the NVIDIA driver", "cuda": "the CUDA version torch was built with",
    "torch": "torch's version", "triton": "triton's version",
    "torchvision": "torchvision's version", "python": "Python's version",
    "tuner": "the tuner's version", "host": "the host's name", "cpu": "the CPU's model"}

SCHEMA_VERSION = 3

_f64, _i64, _str, _bool = pa.float64(), pa.int64(), pa.string(), pa.bool_()
_f64s, _i64s, _strs = pa.list_(_f64), pa.list_(_i64), pa.list_(_str)
# Units, as docs/columns.md and each field's metadata name them ("" where none applies).
MS, S, BYTES, COUNT, RATIO = "ms", "s", "bytes", "count", "x"


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of the files: its name, Arrow type, unit and meaning (docs/columns.md is
    generated from these, and each written file holds unit and meaning as field metadata)."""

    name: str
    type: pa.DataType
    unit: str
    description: str

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, metadata={
            b"unit": self.unit.encode(), b"description": self.description.encode()})


_c = Column  # the catalogue below, one column a line


def _per_process(stat: str, what: str) -> str:
    return (f"{stat} of each fresh process that measured the config (the search trial's "
            f"first{what}); empty for a row that was not measured again")


# Finalists (the Pareto set of each batch size) measured again in fresh processes
# (tuner.study.finalists); empty for the other trials.
FINALISTS = (
    _c("compile_s_warm", _f64, S, "first call of a second process on the trial's cache "
       "folder (warm inductor and triton caches), median over the re-measurements"),
    _c("compile_s_artifacts", _f64, S, "loading the saved compile artifacts plus the first "
       "call, on empty caches: what a warm start costs in production"),
    _c("latency_ms_p50_repeats", _f64s, MS, _per_process("p50 per request", "")),
    _c("stream_ms_p50_repeats", _f64s, MS, _per_process("back-to-back p50", ", of each "
                                                        "process that kept it")),
    _c("latency_ms_p90_repeats", _f64s, MS, _per_process("p90 per request", ", of each "
                                                         "process that kept it")),
    _c("latency_ms_p99_repeats", _f64s, MS, _per_process("p99 per request", ", of each "
                                                         "process that kept it")),
    _c("latency_spread_pct", _f64, "%", "(max - min) / median of latency_ms_p50_repeats"),
    _c("latency_ms_p50_ci_low", _f64, MS, "95 % interval of the typical p50 over the "
       "processes, low end (a t-interval on the logarithms, tuner.data.noise)"),
    _c("latency_ms_p50_ci_high", _f64, MS, "the same interval's high end"),
    _c("rank_within_noise", _i64, "rank", "1 = fastest at its batch size; equal ranks are not "
       "faster than each other beyond noise (tuner.data.noise)"),
    _c("repeats_failed", _i64, COUNT, "re-measurements that did not finish ok (the row is "
       "then never recommended)"),
    _c("artifacts_file", _str, "", "the saved compile artifacts, relative to the study folder"),
    _c("artifacts_torch", _str, "", "the torch version that saved them (only it can load them)"),
)
FINALIST_FIELDS = [(c.name, c.type) for c in FINALISTS]
_ON_CUDA = ", on CUDA (torch.cuda memory stats)"
CATALOGUE = (
    _c("schema_version", pa.int32(), "", "the version of this schema the row was written in"),
    # the trial and its config
    _c("study", _str, "", "the study's name"),
    _c("trial_number", _i64, "", "the trial's number in the study (its folder trials/N/)"),
    _c("config_key", _str, "", "a stable key of the config: equal keys measured the same thing"),
    _c("label", _str, "", "every setting of the config in words (tables print its "
       "short name: tuner.domain.naming)"),
    _c("backend", _str, "", "torch.compile backend; eager = no torch.compile at all"),
    _c("mode", _str, "", "inductor mode (default, reduce-overhead, max-autotune ...)"),
    _c("dynamic", _bool, "", "torch.compile's dynamic; empty for eager and for dynamic=None"),
    _c("batch_size", _i64, "items", "items per call"),
    _c("config_json", _str, "", "the whole config as JSON (TrialConfig.to_dict)"),
    _c("started_from", _str, "", "the study whose finalists or Pareto front gave this config, "
       "measured first (tuner search --start-from); empty otherwise"),
    # the workload
    _c("model", _str, "", "torchvision model name, or module:function of a factory"),
    _c("device", _str, "", "cuda or cpu"),
    _c("dtype", _str, "", "the precision the row ran in (float32, tf32, bfloat16, float16)"),
    _c("image_size", _i64, "px", "input height and width of an image model"),
    _c("channels_last", _bool, "", "whether the model and 4-D inputs were channels_last"),
    _c("cudnn_benchmark", _bool, "", "torch.backends.cudnn.benchmark as the row ran"),
    # what torch.compile was given (tuner 0.3.0; empty for eager and in files before it)
    _c("compile_scope", _str, "", "whole (torch.compile(model)) or regional (each block of the "
       "model's largest list of repeated blocks compiled in place, the rest eager)"),
    _c("region_class", _str, "", "regional: the class of the blocks compiled"),
    _c("regions_compiled", _i64, COUNT, "regional: how many blocks were compiled"),
    # how it ended
    _c("status", _str, "", "ok, or how it failed: compile_error, oom, cuda_error, timeout, "
       "compile_timeout, crash, wrong_result, workload_error, interrupted"),
    _c("message", _str, "", "what went wrong, in a line or a few; \"not run: ...\" for a "
       "config the search skipped"),
    _c("stderr_tail", _str, "", "the last lines the trial process wrote to stderr"),
    # time
    _c("import_s", _f64, S, "importing torch (and torchvision) in the trial process"),
    _c("build_s", _f64, S, "building the model and inputs and moving them to the device"),
    _c("compile_s_cold", _f64, S, "the first compiled call, synchronised (compile + run)"),
    _c("cache_start", _str, "", "what that first call started from: cold, warm or artifacts"),
    _c("warmup_s", _f64, S, "further calls until latency was steady"),
    _c("warmup_calls", _i64, COUNT, "calls the warm-up took"),
    _c("time_to_steady_s", _f64, S, "warm-up cost: compile_s_cold + warmup_s (derived)"),
    _c("wall_s", _f64, S, "the whole trial process, as the parent saw it"),
    _c("prestarted", _bool, "", "the process was pre-started (had imported torch already)"),
    _c("quiet_wait_s", _f64, S, "after the first call, waiting for the next trial's process "
       "to finish importing, so that nothing runs beside the measurement"),
    _c("launch_s", _f64, S, "from the runner's start to the trial process's own clock"),
    _c("eager_reference_s", _f64, S, "the eager reference: its output, time and FLOPs (or "
       "loading them)"),
    _c("replay_s", _f64, S, "the shape schedule's replay, warm pass included"),
    _c("process_s", _f64, S, "everything the trial process did, to its record"),
    _c("tuner_overhead_s", _f64, S, "the search process's own time before this trial"),
    _c("prebuilt", _bool, "", "the model came pre-built by the pre-started process"),
    _c("prewarmed", _bool, "", "the pre-started process readied the device before the trial"),
    _c("reference_reused", _bool, "", "the eager reference came from an earlier trial"),
    _c("reuse_note", _str, "", "why a pre-built model, readied device or kept reference was "
       "not used"),
    # steady-state latency, per request
    _c("latency_ms_p50", _f64, MS, "median time one request waits: each call followed by a "
       "synchronize, timed on the host"),
    _c("latency_ms_p90", _f64, MS, "90th percentile of the same"),
    _c("latency_ms_p99", _f64, MS, "99th percentile of the same (about the slowest call "
       "below 100 calls)"),
    _c("latency_ms_mean", _f64, MS, "mean of the same"),
    _c("latency_ms_min", _f64, MS, "fastest call of the same"),
    _c("latency_ms_iqr", _f64, MS, "interquartile range of the same"),
    _c("latency_samples_ms", _f64s, MS, "every timed call per request (at most 5,000 kept)"),
    _c("measure_calls", _i64, COUNT, "calls timed per request"),
    _c("measure_s", _f64, S, "time spent timing them"),
    _c("timer", _str, "", "how they were timed: perf_counter_sync (cuda_event or perf_counter: "
       "back to back, files of schema 1 and 2)"),
    _c("noisy", _bool, "", "IQR / median per request above the protocol's ratio (10 %)"),
    # steady state, back to back
    _c("stream_ms_p50", _f64, MS, "median time per call back to back (calls launched without "
       "waiting): what a busy server pays per call"),
    _c("stream_ms_p90", _f64, MS, "90th percentile of the same"),
    _c("stream_ms_p99", _f64, MS, "99th percentile of the same"),
    _c("stream_ms_iqr", _f64, MS, "interquartile range of the same"),
    _c("stream_calls", _i64, COUNT, "calls timed back to back"),
    _c("stream_s", _f64, S, "time spent timing them"),
    _c("stream_timer", _str, "", "how they were timed (cuda_event, perf_counter)"),
    _c("host_other_cpu_cores", _f64, "cores", "CPU other processes used while the steady "
       "state was timed"),
    _c("host_load_1m", _f64, "", "the host's 1-minute load average after it"),
    _c("host_steal_cores", _f64, "cores", "CPU the hypervisor gave to other VMs meanwhile"),
    _c("host_loop_ms", _f64, MS, "a fixed Python loop on the launching core: how fast it ran"),
    _c("host_core_slowdown", _f64, RATIO, "host_loop_ms over the lower quartile of the "
       "study's trials on the same machine: 1.0 on a fast core (derived)"),
    _c("timing_cpu", _i64, "", "the core the timing thread was pinned to (TUNER_TIMING_CPU)"),
    _c("gpu_time_ms", _f64, MS, "the GPU's own time for one call, every kernel summed "
       "(TUNER_GPU_TIME=1)"),
    _c("throughput_per_s", _f64, "items/s", "batch_size / stream_ms_p50_median (derived)"),
    # ranked, recommended and compared by
    _c("latency_ms_p50_median", _f64, MS, "what rows are ranked, recommended and compared by: "
       "a finalist's median of latency_ms_p50_repeats, else latency_ms_p50 (derived)"),
    _c("latency_ms_p90_median", _f64, MS, "the same of the p90 (derived)"),
    _c("latency_ms_p99_median", _f64, MS, "the same of the p99: what --max-p99-ms bounds "
       "(derived)"),
    _c("stream_ms_p50_median", _f64, MS, "the same back to back (derived)"),
    _c("eager_latency_ms_p50", _f64, MS, "the fastest eager latency_ms_p50_median of the same "
       "batch size and precision (derived)"),
    _c("speedup_vs_eager", _f64, RATIO, "eager_latency_ms_p50 / latency_ms_p50_median "
       "(derived)"),
    _c("break_even_calls", _f64, "calls", "calls after which the warm-up is paid back by "
       "faster calls than eager's; empty if never (derived)"),
    # memory
    _c("peak_memory_bytes", _i64, BYTES, "memory while serving: vram_bytes_steady_reserved "
       "on CUDA, host_rss_bytes_peak on the CPU (derived)"),
    _c("memory_kind", _str, "", "which of the two: cuda_reserved or host_max_rss (derived)"),
    _c("peak_vram_bytes", _i64, BYTES, "vram_bytes_steady_reserved (derived)"),
    _c("memory_needed_bytes", _i64, BYTES, "the most held at any point, compiling included: "
       "what --max-vram-gb bounds (derived)"),
    _c("vram_bytes_baseline", _i64, BYTES, "allocated after the build: weights and inputs"
       + _ON_CUDA),
    _c("vram_bytes_compile_allocated", _i64, BYTES, "peak allocated during compile and "
       "warm-up" + _ON_CUDA),
    _c("vram_bytes_compile_reserved", _i64, BYTES, "peak reserved during compile and warm-up"
       + _ON_CUDA),
    _c("vram_bytes_steady_allocated", _i64, BYTES, "peak allocated while serving" + _ON_CUDA),
    _c("vram_bytes_steady_reserved", _i64, BYTES, "peak reserved while serving" + _ON_CUDA),
    _c("vram_bytes_process_nvml", _i64, BYTES, "the process's device memory, CUDA context "
       "included, at the end of the steady state (NVML)"),
    _c("vram_bytes_compile_process_nvml", _i64, BYTES, "the most NVML showed for the process "
       "during compile and warm-up"),
    _c("prewarm_vram_bytes_nvml", _i64, BYTES, "device memory the readied process held "
       "beside the trial before it (NVML)"),
    _c("host_rss_bytes_peak", _i64, BYTES, "the trial process's peak resident memory"),
    # correctness against eager
    _c("correct", _bool, "", "the compiled output matched eager's within tolerance "
       "(NaN-aware); empty where it could not be checked"),
    _c("max_abs_error", _f64, "", "largest absolute difference from eager's output"),
    _c("tolerance", _f64, "", "the tolerance of the row's precision"),
    _c("correctness_note", _str, "", "what the check could not show"),
    _c("max_abs_error_vs_fp32", _f64, "", "largest absolute difference from float32 eager's "
       "output: what the precision costs"),
    # compile health, from dynamo's own counters
    _c("graph_breaks", _i64, COUNT, "graph breaks"),
    _c("graph_break_reasons", _strs, "", "why each graph broke"),
    _c("unique_graphs", _i64, COUNT, "distinct graphs compiled"),
    _c("recompiles", _i64, COUNT, "recompiles, as dynamo counted them"),
    _c("recompile_reasons", _strs, "", "why each recompile happened"),
    _c("cudagraph_skips", _i64, COUNT, "times inductor skipped CUDA graphs for a graph"),
    _c("eager_fallback_frames", _i64, COUNT, "frames that fell back to eager"),
    _c("eager_fallback_reasons", _strs, "", "why each fell back"),
    _c("recompile_limit_hits", _i64, COUNT, "recompiles dynamo refused: the frame ran eager"),
    _c("recompile_limit_reasons", _strs, "", "why each was refused"),
    _c("cudagraph_skip_reasons", _strs, "", "why CUDA graphs skipped each graph"),
    _c("ran_compiled", _bool, "", "False: no compiled graph ran, every call was eager under "
       "the config's label (never counted as compiled)"),
    # work per call and the machine's peak
    _c("flops_per_call", _i64, "FLOP", "floating-point operations of one eager call "
       "(torch.utils.flop_counter)"),
    _c("achieved_tflops", _f64, "TFLOP/s", "flops_per_call / stream_ms_p50_median (derived)"),
    _c("peak_tflops_measured", _f64, "TFLOP/s", "a dense matmul's rate on the machine (bf16 "
       "8192^3 on CUDA, fp32 2048^3 on the CPU)"),
    _c("fraction_of_peak", _f64, "", "achieved_tflops over the best peak measured on the same "
       "machine in the study (derived)"),
    # the workload's shape schedule replayed (empty without one)
    _c("schedule_recompiles", _i64, COUNT, "dynamo recompiles during the replay"),
    _c("schedule_recompile_s", _f64, S, "compile time spent during the replay"),
    _c("schedule_total_s", _f64, S, "the whole replay, every step synchronised: what "
       "--objective traffic ranks by"),
    _c("schedule_batch_sizes", _i64s, "items", "the schedule's distinct batch sizes, in order"),
    _c("schedule_shapes", _strs, "", "the schedule's distinct shapes, in order (8 or 8x128)"),
    _c("schedule_latency_ms", _f64s, MS, "per shape: median latency once warm"),
    _c("schedule_first_call_s", _f64s, S, "per shape: its first call in the replay"),
    _c("schedule_warmup_s", _f64s, S, "per shape: the replay's time beyond its warm latency "
       "(compiles, CUDA-graph recordings, settling)"),
    _c("schedule_shape_recompiles", _i64s, COUNT, "per shape: the compiles its steps caused"),
    *FINALISTS,
    *(_c(f"fp_{name}", _i64 if name == "gpu_memory_bytes" else _str,
         BYTES if name == "gpu_memory_bytes" else "", f"fingerprint: {FINGERPRINT_MEANINGS[name]}")
      for name in FINGERPRINT_FIELDS),
)
SCHEMA = pa.schema([c.field for c in CATALOGUE])
COLUMNS = SCHEMA.names
OPTION_PREFIX = "opt_"  # tuner.domain.config.option_column
# The field metadata of an inductor option's column (opt_<name>, beyond SCHEMA).
OPTION_DESCRIPTION = ("an inductor option the study searched (torch._inductor.config, dots as "
                      "underscores), as given to torch.compile(options=...); typed as the "
                      "option is, empty where it does not apply (eager, other backends)")
OPTION_METADATA = {b"unit": b"", b"description": OPTION_DESCRIPTION.encode()}
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
