"""One trial, its steps in order (see README, "A trial"):

build and apply knobs → eager reference → cold first call → warm-up until steady →
correctness → compile health → steady-state latency and memory → the workload's shape schedule
replayed, if it has one. Every expected failure comes back as a record, never an exception.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.domain.config import uses_cudagraphs
from tuner.domain.records import Status, TrialProtocol, TrialRequest, TrialResult
from tuner.trial.compiling import compiling
from tuner.trial.contract import (
    BUILD_FILE_ENV,
    GPU_TIME_CALLS,
    GPU_TIME_ENV,
    QUIET_FILE_ENV,
    QUIET_MAX_WAIT_S,
)
from tuner.trial.host import OtherProcesses

if TYPE_CHECKING:
    from tuner.domain.workload import Workload
    from tuner.trial.prebuild import Prebuilt


def run_trial(request: TrialRequest, started: float,
              prebuilt: Prebuilt | None = None) -> TrialResult:
    """Run the protocol; every expected failure comes back as a record, never an exception.
    ``prebuilt``: what the pre-started process built before the request (its time unmeasured
    but for ``prebuilt.left_s``), used where it serves (:mod:`tuner.trial.prebuild`)."""
    t = time.perf_counter()
    import torch

    if not request.workload.is_factory:
        import torchvision  # noqa: F401 - counted in import time, not build time
    if request.config.backend == "inductor":
        import torch._inductor.compile_fx  # noqa: F401 - as torch.compile would, 1-2 s: import time
    import_s = time.perf_counter() - started

    from tuner.trial import affinity, artifacts, build, checks, fingerprint, health, replay
    from tuner.trial.device import Device, host_rss_peak_bytes
    from tuner.trial.reference import Store
    from tuner.trial.stats import is_steady

    result = TrialResult(status=Status.OK, import_s=import_s)
    result.fingerprint = fingerprint.collect(request.workload.device)
    config, proto = request.config, request.protocol
    dev = Device(request.workload.device)

    # The workload as this config runs it (its precision, memory format, cudnn.benchmark).
    work = config.applied_to(request.workload)
    t = time.perf_counter()
    try:
        model, inputs = _build_float32(request, work, prebuilt, result)
        dev.sync()
    except build.WorkloadError as exc:
        return _fail(result, Status.WORKLOAD_ERROR, str(exc))
    except Exception as exc:  # noqa: BLE001 - the device's own failures are data; others crash
        return _device_failure(result, "building the model on the device: ", exc)
    build_s = time.perf_counter() - t + (prebuilt.left_s if prebuilt else 0.0)
    # The float32 eager output, before the knobs (tf32) and the cast: what this precision's
    # error is measured against. One eager call, only for a precision other than float32;
    # none where an earlier trial kept it, with the FLOPs and eager time (tuner.trial.reference).
    t = time.perf_counter()
    store = Store(request.references, work, config.batch_size, result.fingerprint)
    kept = store.load(model, inputs)
    result.reference_reused = None if request.references is None else kept is not None
    float32_reference = kept.float32_outputs if kept else None
    if kept is None and work.dtype != "float32":
        try:
            float32_reference = _float32_reference(model, inputs)
        except Exception as exc:  # noqa: BLE001 - a CUDA error: the context is lost
            return _device_failure(result, "float32 reference call: ", exc)
    eager_reference_s = time.perf_counter() - t

    build.apply_global_knobs(work)
    t = time.perf_counter()
    try:
        model, inputs = build.finish(work, model, inputs)
        dev.sync()
    except Exception as exc:  # noqa: BLE001
        return _device_failure(result, f"casting the model to {work.dtype}: ", exc)
    result.build_s = build_s + time.perf_counter() - t

    with torch.no_grad():
        # Eager reference on the same inputs, before anything is compiled: this trial's own,
        # kept or not (it also readies the device's libraries before the first compiled call).
        t = time.perf_counter()
        try:
            reference = checks.clone_output(model(*inputs))
            result.eager_reference_ms = kept.eager_reference_ms if kept else \
                dev.time_call_s(lambda: model(*inputs)) * 1e3
            unchecked = _uncheckable(model, inputs, reference, work.dtype, kept is None)
        except Exception as exc:  # noqa: BLE001
            if _is_oom(exc):
                return _fail(result, Status.OOM, f"eager call: {describe_error(exc)}")
            if _is_cuda_error(exc):
                return _cuda_failure(result, "eager call: ", exc)
            return _fail(result, Status.WORKLOAD_ERROR, f"the model fails in eager: {describe_error(exc)}")
        if unchecked:
            return _fail(result, Status.WORKLOAD_ERROR, f"the model cannot be checked: {unchecked}")
        # The work one call does, counted on eager (the compiled model does the same math).
        if kept is None:
            result.flops_per_call = checks.flops_per_call(lambda: model(*inputs))
            store.save(float32_reference, result.flops_per_call, result.eager_reference_ms,
                       is_float32=work.dtype == "float32")
        else:
            result.flops_per_call = kept.flops_per_call
        result.reuse_note = "; ".join(n for n in (result.reuse_note, store.note) if n)
        dev.sync()
        result.eager_reference_s = eager_reference_s + time.perf_counter() - t

        dev.reset_peaks(empty_cache=True)
        result.vram_bytes_baseline = dev.allocated()
        mark_step = uses_cudagraphs(config) and dev.cuda

        if config.compiled:
            # What the first call starts from, looked at before anything is loaded or compiled,
            # so that compile_s_cold is never a warm figure under a cold name.
            held = artifacts.caches_hold_entries()
            if request.load_artifacts:
                # Start from saved artifacts (a finalist re-measurement); not in compile_s_cold.
                result.artifacts_load_s, result.artifacts_note = artifacts.load(
                    Path(request.load_artifacts))
            result.cache_start = artifacts.cache_start(held, result.artifacts_load_s is not None)
        fn = torch.compile(model, **config.compile_kwargs()) if config.compiled else model

        def call():
            if mark_step:
                # One inference step per call, as a serving loop would mark it.
                torch.compiler.cudagraph_mark_step_begin()
            return fn(*inputs)

        # Cold compile: the first call, synchronised; then warm-up. NVML is sampled meanwhile.
        # The runner holds the first call to the compile budget (tuner.trial.compiling).
        let_next_build()
        try:
            with dev.nvml_peak() as nvml:
                with compiling(result, config.compiled):
                    result.compile_s_cold = dev.time_call_s(call)
                result.quiet_wait_s = wait_until_quiet()
                warm_times: list[float] = []
                warm_start = time.perf_counter()
                while len(warm_times) < proto.warmup_max_calls:
                    warm_times.append(dev.time_call_s(call))
                    if len(warm_times) >= proto.warmup_min_calls and is_steady(
                            warm_times, proto.warmup_window, proto.warmup_tolerance):
                        break
                result.warmup_s = time.perf_counter() - warm_start
            result.warmup_calls = len(warm_times)
            result.vram_bytes_compile_allocated, result.vram_bytes_compile_reserved = dev.peaks()
            result.vram_bytes_compile_process_nvml = nvml.peak
            if config.compiled:
                result.fxgraph_cache_hits, result.fxgraph_cache_misses = artifacts.cache_counters()
                if request.save_artifacts:
                    result.artifacts_bytes, note = artifacts.save(Path(request.save_artifacts))
                    result.artifacts_note = result.artifacts_note or note

            output = checks.clone_output(call())
            comparison = checks.compare_outputs(output, reference, work.dtype)
            result.correct = comparison.correct
            result.max_abs_error = comparison.max_abs_error
            result.tolerance = comparison.tolerance
            result.correctness_note = comparison.note
            result.max_abs_error_vs_fp32 = checks.max_abs_difference(
                output, reference if work.dtype == "float32" else float32_reference)
            del reference, output, float32_reference

            if config.compiled:
                health_ = health.compile_health()
                for field in dataclasses.fields(health_):
                    setattr(result, field.name, getattr(health_, field.name))
                result.ran_compiled = health_.ran_compiled

            # Steady state: compile-time transients released, peaks counted afresh. First what
            # one request waits, then what a call costs in a back-to-back stream.
            dev.reset_peaks(empty_cache=True)
            window = (proto.min_calls, proto.min_seconds, proto.max_seconds)
            with affinity.timing_thread_on(affinity.timing_cpu()) as pinned, \
                    OtherProcesses() as host:
                requests = dev.time_requests_ms(call, *window)
                stream = dev.time_stream_ms(call, *window)
            result.timing_cpu = pinned
            result.host_other_cpu_cores, result.host_load_1m = host.other_cpu_cores, host.load_1m
            result.host_steal_cores, result.host_loop_ms = host.steal_cores, host.loop_ms
            if os.environ.get(GPU_TIME_ENV) == "1":
                result.gpu_time_ms = _gpu_time_ms(dev, call)
        except Exception as exc:  # noqa: BLE001
            return _raised(result, "", exc)

    result.vram_bytes_steady_allocated, result.vram_bytes_steady_reserved = dev.peaks()
    result.vram_bytes_process_nvml = dev.process_memory_nvml()
    result.host_rss_bytes_peak = host_rss_peak_bytes()
    _fill_latency(result, *requests, proto)
    _fill_stream(result, *stream)

    if request.workload.shape_schedule and result.correct is not False:
        t = time.perf_counter()
        try:
            with torch.no_grad():
                replay.replay_schedule(result, dataclasses.replace(request, workload=work), fn,
                                      dev, mark_step, model,
                                      lambda exc: _is_oom(exc) or _is_cuda_error(exc))
        except build.WorkloadError as exc:
            return _fail(result, Status.WORKLOAD_ERROR, f"shape schedule: {exc}")
        except Exception as exc:  # noqa: BLE001
            return _raised(result, "shape schedule: ", exc)
        finally:
            result.replay_s = time.perf_counter() - t

    if result.correct is False:
        return _fail(result, Status.WRONG_RESULT, f"output differs from eager: {result.correctness_note}")
    return result


def _gpu_time_ms(dev, call) -> float | None:
    """The GPU's own time for one call (TUNER_GPU_TIME=1); None, with the reason on stderr,
    where the profiler cannot give it: a diagnostic never fails the trial it describes."""
    import sys

    try:
        return dev.gpu_time_ms(call, GPU_TIME_CALLS)
    except Exception as exc:  # noqa: BLE001
        print(f"tuner: no GPU time a call: {describe_error(exc)}", file=sys.stderr)
        return None


def let_next_build() -> None:
    """Let the next trial's process build its model now (see BUILD_FILE_ENV)."""
    path = os.environ.get(BUILD_FILE_ENV)
    if path:
        Path(path).touch()


def wait_until_quiet() -> float | None:
    """Wait until the next trial's process is ready, imported and built (see QUIET_FILE_ENV); the
    seconds waited, or None when this trial has no such neighbour."""
    path = os.environ.get(QUIET_FILE_ENV)
    if not path:
        return None
    t = time.perf_counter()
    while not os.path.exists(path) and time.perf_counter() - t < QUIET_MAX_WAIT_S:
        time.sleep(0.005)
    return time.perf_counter() - t


def _fill_latency(result: TrialResult, samples: list[float], spent: float, timer: str,
                  proto: TrialProtocol) -> None:
    from tuner.trial.stats import LatencyStats

    stats = LatencyStats.of(samples)
    result.latency_ms_p50, result.latency_ms_p90, result.latency_ms_p99 = stats.p50, stats.p90, stats.p99
    result.latency_ms_mean, result.latency_ms_min, result.latency_ms_iqr = stats.mean, stats.min, stats.iqr
    result.noisy = stats.iqr / stats.p50 > proto.noisy_iqr_ratio if stats.p50 > 0 else None
    # Keep every sample unless there are very many; then an even stride keeps the shape.
    step = max(1, -(-len(samples) // proto.max_samples_kept))
    result.latency_samples_ms = [round(s, 6) for s in samples[::step]]
    result.measure_calls = len(samples)
    result.measure_s = spent
    result.timer = timer


def _fill_stream(result: TrialResult, samples: list[float], spent: float, timer: str) -> None:
    from tuner.trial.stats import LatencyStats

    stats = LatencyStats.of(samples)
    result.stream_ms_p50, result.stream_ms_p90, result.stream_ms_p99 = stats.p50, stats.p90, stats.p99
    result.stream_ms_iqr = stats.iqr
    result.stream_calls, result.stream_s, result.stream_timer = len(samples), spent, timer


def _build_float32(request: TrialRequest, work: Workload, prebuilt: Prebuilt | None,
                   result: TrialResult):
    """The float32 model and inputs on the device: moved there from what the pre-started
    process built, where that serves (``result.prebuilt``), else built here."""
    from tuner.trial import build, prebuild

    if prebuilt is not None:
        made, result.reuse_note = prebuild.take(prebuilt, request.workload,
                                                request.config.batch_size)
        result.prebuilt = made is not None
        result.prewarmed = prebuilt.warmed
        result.prewarm_vram_bytes_nvml = prebuilt.warm_vram_bytes
        result.reuse_note = "; ".join(n for n in (result.reuse_note, prebuilt.warm_note) if n)
        if made is not None:
            return build.to_device(work, *made)
    return build.build_float32(work, request.config.batch_size)


def _float32_reference(model, inputs):
    """The eager float32 output on the CPU; None where it cannot be had (say, float32 does not
    fit where the trial's precision does): a blank cell, never a failed trial. A CUDA error
    is raised: it is sticky, so nothing after it could run on the device."""
    import torch

    from tuner.trial import checks

    try:
        with torch.no_grad():
            return checks.clone_output(model(*inputs), to_cpu=True)
    except Exception as exc:  # noqa: BLE001 - the trial itself reports what fails in its precision
        if _is_cuda_error(exc) and not _is_oom(exc):
            raise
        return None


def _fail(result: TrialResult, status: Status, message: str) -> TrialResult:
    result.status = status
    result.message = one_line(message)
    return result


def _device_failure(result: TrialResult, where: str, exc: Exception) -> TrialResult:
    """The record of an oom or a CUDA error raised while the model is placed or cast, its
    message prefixed with ``where``; any other error is raised again (a crash, with its
    traceback)."""
    if _is_oom(exc):
        return _fail(result, Status.OOM, f"{where}{describe_error(exc)}")
    if _is_cuda_error(exc):
        return _cuda_failure(result, where, exc)
    raise exc


def _raised(result: TrialResult, where: str, exc: BaseException) -> TrialResult:
    """The record of an error raised while compiling, measuring or replaying: oom, cuda_error
    or compile_error, its message prefixed with ``where``."""
    if _is_oom(exc):
        return _fail(result, Status.OOM, f"{where}{describe_error(exc)}")
    if _is_cuda_error(exc):
        return _cuda_failure(result, where, exc)
    return _fail(result, Status.COMPILE_ERROR, f"{where}{describe_error(exc)}")


def one_line(message: str) -> str:
    """A failure's message as one line for the table: its first line and, where the error ran
    over several (inductor's wrapped errors, CUDA's advice), its last, at most 300 characters.
    The whole text goes to stderr, whose tail the runner keeps as ``stderr_tail``."""
    import sys

    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return message.strip()
    print(message, file=sys.stderr, flush=True)
    text = f"{lines[0]} ... {lines[-1]}"
    return text if len(text) <= 300 else text[:297] + "..."


# Two eager calls on the same inputs differ by less than this many times the precision's
# tolerance (another cuDNN algorithm, atomics); dropout left on differs by the output's scale.
NONDETERMINISM_FACTOR = 10


def _uncheckable(model, inputs, reference, dtype: str, first: bool) -> str | None:
    """Why no config's output could be checked against this eager ``reference``, or None: it
    holds no tensor pytree sees, or (``first``: the first trial of this workload, batch size
    and precision, which keeps the reference) a second eager call on the same inputs gives
    another output, so every config, eager too, would read as a wrong result."""
    from tuner.trial import checks

    why = checks.unseen_output(reference)
    if why is not None or not first:
        return why
    tolerance = min(0.3, NONDETERMINISM_FACTOR * checks.TOLERANCE.get(dtype, 1e-3))
    again = checks.compare_outputs(checks.clone_output(model(*inputs)), reference, dtype,
                                   tolerance=tolerance)
    if again.correct is False:
        return (f"two eager calls on the same inputs give different outputs ({again.note}): "
                "randomness in the forward that model.eval(), which the tuner calls, does not "
                "turn off (say, F.dropout(x, training=True) or torch.rand in forward): make the "
                "forward deterministic in eval mode, since each config is checked against eager")
    return None


# How an exhausted host says so through torch: the CPU allocator's RuntimeError, a C++
# std::bad_alloc, or the OS's ENOMEM from a compile worker or a fork.
_HOST_OOM = ("out of memory", "can't allocate memory", "cannot allocate memory", "bad_alloc",
             "errno 12")


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None),
                                  getattr(torch.cuda, "OutOfMemoryError", None), MemoryError) if t)
    text = str(exc).lower()
    return isinstance(exc, oom_types) or any(words in text for words in _HOST_OOM)


# A sticky CUDA error poisons the process's CUDA context: every later CUDA call fails too.
# torch 2.8+ raises torch.AcceleratorError; before, a RuntimeError that says so.
_CUDA_ERROR = ("cuda error", "device-side assert", "illegal memory access",
               "unspecified launch failure")


def _is_cuda_error(exc: BaseException) -> bool:
    """A CUDA error (check :func:`_is_oom` first: "CUDA error: out of memory" is an oom)."""
    import torch

    accelerator_error = getattr(torch, "AcceleratorError", None)
    text = str(exc).lower()
    return (accelerator_error is not None and isinstance(exc, accelerator_error)) or any(
        words in text for words in _CUDA_ERROR)


def _cuda_failure(result: TrialResult, where: str, exc: BaseException) -> TrialResult:
    """A cuda_error record. Its message is one line, the one that names the error (CUDA
    appends lines of advice); the whole text goes to stderr, which the runner keeps as the
    record's stderr_tail."""
    import sys
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    sys.stderr.flush()
    lines = [line.strip() for line in describe_error(exc).splitlines() if line.strip()]
    line = next((ln for ln in lines if any(w in ln.lower() for w in _CUDA_ERROR)), lines[0])
    if line != lines[0]:  # a wrapper's message (a compile error, say) names it further down
        line = f"{type(exc).__name__}: {line}"
    return _fail(result, Status.CUDA_ERROR, f"{where}{line}"[:300])


def describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:4000]
