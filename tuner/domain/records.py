"""Typed records that cross process and module boundaries.

A :class:`TrialRequest` goes to the trial process as JSON; a :class:`TrialResult` comes back as
JSON, written atomically. Both round-trip through plain dicts so they can live in Optuna's
storage.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from typing import Any

from tuner.domain.config import TrialConfig
from tuner.domain.naming import config_name
from tuner.domain.workload import Workload

# The machine a measurement was made on (tuner.runtime.fingerprint collects it): on every Parquet
# row as fp_<field>, and in the file metadata.
FINGERPRINT_FIELDS = ("device_kind", "gpu_name", "gpu_compute_capability", "gpu_memory_bytes",
                      "driver", "cuda", "torch", "triton", "torchvision", "python", "tuner",
                      "host", "cpu")
SCHEDULE_REPEATS = 3  # a shape schedule is replayed this many times over: samples per shape
# How the record of a config the search decided not to run begins
# (tuner.study.record.record_not_run); here, so that readers of a file need no Optuna.
NOT_RUN = "not run: "
# What the record of a trial whose factory asked for CUDA on a machine without it says
# (tuner.trial.build): bad input at every batch size, so the search stops with it as its error.
NO_CUDA_FOR_FACTORY = "asked for CUDA on a machine without CUDA"


class Status(str, enum.Enum):  # noqa: UP042 (StrEnum would change what str() of a member gives)
    """How a trial ended. Every status but ``ok`` is a failure stored as data."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"  # torch.compile or the first compiled call raised
    OOM = "oom"  # out of device (or host) memory
    # A sticky CUDA error (device-side assert, illegal memory access): the process's CUDA
    # context is poisoned, so the trial ends there; the next trial is a fresh process.
    CUDA_ERROR = "cuda_error"
    TIMEOUT = "timeout"  # the parent killed the trial's process group at the deadline
    # The first (compiling) call ran past the protocol's compile budget: the parent killed the
    # trial's process group (tuner.launch.compile_budget)
    COMPILE_TIMEOUT = "compile_timeout"
    CRASH = "crash"  # the process died without a record (signal, abort, segfault)
    WRONG_RESULT = "wrong_result"  # compiled output differs from eager beyond tolerance
    WORKLOAD_ERROR = "workload_error"  # the model or factory itself is broken: bad input
    INTERRUPTED = "interrupted"  # the user stopped the search while this trial ran


@dataclasses.dataclass(frozen=True)
class TrialProtocol:
    """How a trial measures. Defaults suit the GPU; the CPU demo uses shorter windows."""

    min_calls: int = 50  # steady-state calls timed, at least ...
    min_seconds: float = 2.0  # ... and at least this long
    max_seconds: float = 60.0  # stop timing after this, whatever min_calls says
    warmup_min_calls: int = 5  # CUDA graphs record on the 2nd-3rd call: never fewer
    warmup_max_calls: int = 200
    warmup_window: int = 5  # steady when two consecutive windows' medians agree ...
    warmup_tolerance: float = 0.10  # ... within this fraction
    noisy_iqr_ratio: float = 0.10  # IQR / median above this marks the row noisy
    warm_cache: bool = False  # reuse the study's inductor cache instead of a fresh one
    # The first (compiling) call's budget: past it the trial ends as compile_timeout
    # (tuner.launch.compile_budget). None: no budget, as for a study made by tuner 0.1.0 before
    # 2026-11-30 (79eef4c).
    compile_timeout_s: float | None = None
    max_samples_kept: int = 5000
    # After the trial, time a dense matmul for the device's peak (the study asks it of one
    # trial per run: it is a property of the machine, not of the config).
    measure_peak: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialProtocol:
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class TrialRequest:
    config: TrialConfig
    workload: Workload
    protocol: TrialProtocol = TrialProtocol()
    # Compile artifacts (tuner.runtime.artifacts): after warm-up, save them to this file; before
    # the first compiled call, load them from this one.
    save_artifacts: str | None = None
    load_artifacts: str | None = None
    # The study's folder of eager references (tuner.trial.reference): FLOPs, eager time and the
    # float32 output, kept by the first trial of a workload, batch size and precision and
    # reused by the next. None: computed in the trial and kept nowhere.
    references: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "workload": self.workload.to_dict(),
                "protocol": self.protocol.to_dict(), "save_artifacts": self.save_artifacts,
                "load_artifacts": self.load_artifacts, "references": self.references}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRequest:
        return cls(TrialConfig.from_dict(data["config"]), Workload.from_dict(data["workload"]),
                   TrialProtocol.from_dict(data["protocol"]), data.get("save_artifacts"),
                   data.get("load_artifacts"), data.get("references"))


@dataclasses.dataclass
class TrialResult:
    """Everything one trial measured. Units are in the names; ``None`` means not measured."""

    status: Status
    message: str = ""
    stderr_tail: str = ""
    # time
    import_s: float | None = None  # importing torch (+ torchvision) in the fresh process
    # A pre-started process imported torch before it was given this trial (tuner.launch.prestart):
    # its import_s is then only what was left of that at hand-over, usually nothing.
    prestarted: bool | None = None
    quiet_wait_s: float | None = None  # after the first call, waiting for the next trial's
    # process to finish importing, so that warm-up and measurement run with nothing beside them
    build_s: float | None = None  # model + inputs built and moved to the device
    compile_s_cold: float | None = None  # first compiled call, synchronised
    # What that first call started from (tuner.runtime.artifacts.cache_start): "cold" (empty
    # inductor and triton caches), "warm" (caches that held entries: --warm-cache's shared one,
    # or a finalist's own) or "artifacts" (saved artifacts loaded into empty caches); None: eager
    cache_start: str | None = None
    warmup_s: float | None = None  # further calls until latency is steady
    warmup_calls: int | None = None
    wall_s: float | None = None  # the whole trial process, seen by the parent
    # Where the rest of wall_s goes (docs/measurement.md, "Where a trial's time goes"): from the
    # runner's start to the trial process's own clock (a fresh process's start-up; a
    # pre-started one's hand-over), ...
    launch_s: float | None = None
    # ... the eager reference, its time, FLOPs and the float32 output (or loading them), ...
    eager_reference_s: float | None = None
    replay_s: float | None = None  # ... the shape schedule's replay, warm pass included ...
    process_s: float | None = None  # ... and everything the trial process did, to its record
    # The search process's own time before this trial: from the previous trial's end (its
    # record stored, the files written, the next config asked for); None for a run's first
    tuner_overhead_s: float | None = None
    # The model came pre-built by the pre-started process (tuner.trial.prebuild): True; one was
    # built there but could not serve (reuse_note says why): False; built in the trial: None
    prebuilt: bool | None = None
    # The pre-started process ran the model once on the device before the trial, readying CUDA,
    # cuDNN and cuBLAS (tuner.trial.prewarm): True; the job came first (reuse_note says): False;
    # not asked (beside an eager or autotuning trial, on the CPU), or it failed and the process
    # started afresh: None
    prewarmed: bool | None = None
    # FLOPs, eager time and the float32 output came from an earlier trial's kept eager
    # reference (tuner.trial.reference): True; computed here: False; None: no study folder
    reference_reused: bool | None = None
    # why a pre-built model, a readied device or a kept reference was not used
    reuse_note: str = ""
    # Steady state, per request: each call followed by a synchronize, timed on the host from
    # the call to its result: what one request waits.
    latency_ms_p50: float | None = None
    latency_ms_p90: float | None = None
    latency_ms_p99: float | None = None
    latency_ms_mean: float | None = None
    latency_ms_min: float | None = None
    latency_ms_iqr: float | None = None
    latency_samples_ms: list[float] = dataclasses.field(default_factory=list)
    measure_calls: int | None = None
    measure_s: float | None = None
    timer: str | None = None  # perf_counter_sync
    noisy: bool | None = None  # per-request IQR / median above the protocol's ratio
    # Steady state, back to back: calls launched without waiting for results; a call's time is
    # from its start to the next call's start: what a busy server pays per call.
    stream_ms_p50: float | None = None
    stream_ms_p90: float | None = None
    stream_ms_p99: float | None = None
    stream_ms_iqr: float | None = None
    stream_calls: int | None = None
    stream_s: float | None = None
    stream_timer: str | None = None  # cuda_event | perf_counter
    # CPU other processes used while the steady state was timed, in cores (tuner.trial.host),
    # and the host's 1-minute load average after it
    host_other_cpu_cores: float | None = None
    host_load_1m: float | None = None
    # CPU time the hypervisor gave to others while this VM's cores wanted it ("steal"), in
    # cores; on bare metal 0 (tuner.trial.host)
    host_steal_cores: float | None = None
    # how fast the launching core ran: a fixed Python loop's milliseconds, around the steady
    # state (tuner.trial.host.core_loop_ms); on a slow core a launch-bound config reads slow
    host_loop_ms: float | None = None
    timing_cpu: int | None = None  # the core the timing thread ran on (TUNER_TIMING_CPU), if pinned
    # the GPU's own time for one call: every kernel's device time, summed (TUNER_GPU_TIME=1;
    # tuner.trial.device.Device.gpu_time_ms); no host time is in it, so a p50 far above it is
    # launch-bound
    gpu_time_ms: float | None = None
    eager_reference_ms: float | None = None  # one eager call, for the break-even estimate
    # memory
    vram_bytes_baseline: int | None = None  # allocated after build: weights + inputs
    vram_bytes_compile_allocated: int | None = None  # peaks during compile + warm-up
    vram_bytes_compile_reserved: int | None = None
    vram_bytes_steady_allocated: int | None = None  # peaks while serving (after empty_cache)
    vram_bytes_steady_reserved: int | None = None
    vram_bytes_process_nvml: int | None = None  # the process's device memory, context included
    # the highest NVML showed for this process during compile + warm-up (sampled every 50 ms)
    vram_bytes_compile_process_nvml: int | None = None
    # Readied ahead (prewarmed): the device memory NVML gave this trial's process once it had
    # readied the device, context included: what it held beside the trial before this one
    # while that one measured (NVML counts each process apart, so that trial's own figures
    # leave it out)
    prewarm_vram_bytes_nvml: int | None = None
    host_rss_bytes_peak: int | None = None
    # correctness vs eager on the same inputs
    correct: bool | None = None
    max_abs_error: float | None = None
    tolerance: float | None = None
    # against the float32 eager output on the same inputs and weights: what the precision costs
    max_abs_error_vs_fp32: float | None = None
    correctness_note: str = ""
    # compile health, from dynamo's own counters
    graph_breaks: int | None = None
    graph_break_reasons: list[str] = dataclasses.field(default_factory=list)
    unique_graphs: int | None = None
    recompiles: int | None = None
    recompile_reasons: list[str] = dataclasses.field(default_factory=list)
    cudagraph_skips: int | None = None
    eager_fallback_frames: int | None = None
    eager_fallback_reasons: list[str] = dataclasses.field(default_factory=list)
    recompile_limit_hits: int | None = None  # recompiles dynamo refused: the frame ran eager
    recompile_limit_reasons: list[str] = dataclasses.field(default_factory=list)
    cudagraph_skip_reasons: list[str] = dataclasses.field(default_factory=list)
    # False: a compiled backend produced no compiled graph, every call ran eager under the
    # config's label; never a compiled speedup. None: not compiled (eager) or not known.
    ran_compiled: bool | None = None
    # A regional config (tuner.runtime.regions): the class of the blocks compiled, and how many
    # (torch compiles one and reuses its code for the others); None: whole model or eager.
    region_class: str | None = None
    regions_compiled: int | None = None
    # work per call (torch.utils.flop_counter on one eager call) and the machine's peak
    flops_per_call: int | None = None
    peak_tflops_measured: float | None = None  # bf16 8192^3 matmul on CUDA, fp32 2048^3 on CPU
    # compile artifacts and cache hits (tuner.runtime.artifacts; finalist re-measurements ask for them)
    artifacts_bytes: int | None = None  # saved to the request's save_artifacts file
    artifacts_load_s: float | None = None  # load_cache_artifacts, before the first call
    artifacts_note: str = ""  # why none were saved or loaded
    fxgraph_cache_hits: int | None = None  # inductor's FX-graph cache, after warm-up
    fxgraph_cache_misses: int | None = None
    # the workload's shape schedule replayed on the same compiled callable (tuner.trial.replay)
    schedule_recompiles: int | None = None  # dynamo recompiles during the replay; None: eager
    schedule_recompile_s: float | None = None  # compile time spent during the replay
    schedule_total_s: float | None = None  # the whole replay, every step synchronised
    schedule_batch_sizes: list[int] = dataclasses.field(default_factory=list)  # distinct, in order
    schedule_shapes: list[str] = dataclasses.field(default_factory=list)  # "8" or "8x128"
    # per shape, aligned with schedule_shapes: the median latency once warm (the warm pass), its
    # first call in the replay, the replay time beyond its warm latency (compiles, CUDA-graph
    # recordings, settling), and the compiles its replay steps caused
    schedule_latency_ms: list[float] = dataclasses.field(default_factory=list)
    schedule_first_call_s: list[float] = dataclasses.field(default_factory=list)
    schedule_warmup_s: list[float] = dataclasses.field(default_factory=list)
    schedule_shape_recompiles: list[int] = dataclasses.field(default_factory=list)
    fingerprint: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def time_to_steady_s(self) -> float | None:
        """Warm-up cost: cold compile plus the calls until latency settles."""
        if self.compile_s_cold is None:
            return None
        return self.compile_s_cold + (self.warmup_s or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data, with its own copies of the lists and the fingerprint.
        What ``dataclasses.asdict`` gives, without its deep copy of every number: the search
        turns every stored record into a row after every trial."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, value in data.items():
            if isinstance(value, list):
                data[name] = list(value)  # numbers and text: nothing in them to share
            elif isinstance(value, dict):
                data[name] = copy.deepcopy(value)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["status"] = Status(kwargs["status"])
        return cls(**kwargs)

    @classmethod
    def failure(cls, status: Status, message: str, **fields: Any) -> TrialResult:
        return cls(status=status, message=message, **fields)


@dataclasses.dataclass(frozen=True)
class TrialEvent:
    """Progress after each trial, for whoever shows it (the CLI prints it to stderr)."""

    number: int  # measured configs in the study so far
    target: int | None  # --trials, else the configs in the space
    config: TrialConfig
    result: TrialResult
    best: dict[int, tuple[str, float]]  # batch size -> (name, p50 ms) of the fastest so far
    eta_s: float | None
    trial_number: int | None = None  # the trial's own number: its row, trials/<N>/
    # eta_s is a floor: compiles are left and none has been timed (eager's seconds stand in)
    eta_at_least: bool = False
    budget_left_s: float | None = None  # of the --budget, as the event was made; None: no budget
    # the config as people read it (tuner.domain.naming); "": named against no study
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", config_name(self.config))
