"""One trial, its steps in order (see docs/measurement.md, "The steps, in order"):

build and apply knobs → eager reference → cold first call → warm-up until steady →
correctness → compile health → steady-state latency and memory → the workload's shape schedule
replayed, if it has one. Every expected failure comes back as a record, never an exception.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.domain.config import uses_cudagraphs
from tuner.domain.records import Status, TrialProtocol, TrialRequest, TrialResult
from tuner.trial.compiling import compiled_model, compiling, eager_model
from tuner.trial.contract import (
    BUILD_FILE_ENV,
    GPU_TIME_CALLS,
    GPU_TIME_ENV,
    QUIET_FILE_ENV,
    QUIET_MAX_WAIT_S,
)
from tuner.trial.eager import EagerReference, eager_reference, float32_reference
from tuner.trial.failures import (
    TrialStopped,
    describe_error,
    device_failure,
    fail,
    is_cuda_error,
    is_oom,
    raised,
)
from tuner.trial.host import OtherProcesses

if TYPE_CHECKING:
    from tuner.domain.workload import Workload
    from tuner.trial.device import Device
    from tuner.trial.prebuild import Prebuilt

_Timed = tuple[list[float], float, str]  # samples (ms), seconds spent, the timer's name


def run_trial(request: TrialRequest, started: float,
              prebuilt: Prebuilt | None = None) -> TrialResult:
    """Run the protocol; every expected failure comes back as a record, never an exception.
    ``prebuilt``: what the pre-started process built before the request (its time unmeasured
    but for ``prebuilt.left_s``), used where it serves (:mod:`tuner.trial.prebuild`)."""
    result = TrialResult(status=Status.OK, import_s=_import_torch(request, started))
    import torch

    # What the steps use, imported here, after import_s and before any step: no step's time
    # holds an import.
    from tuner.runtime import artifacts, fingerprint, knobs, regions  # noqa: F401
    from tuner.trial import (  # noqa: F401
        affinity,
        build,
        checks,
        health,
        reference,
        replay,
        stats,
    )
    from tuner.trial.device import Device

    result.fingerprint = fingerprint.collect(request.workload.device)
    dev = Device(request.workload.device)
    # The workload as this config runs it (its precision, memory format, cudnn.benchmark).
    work = request.config.applied_to(request.workload)
    try:
        model, inputs, build_s = _build_float32(request, work, prebuilt, dev, result)
        eager = float32_reference(request, work, model, inputs, result)
        model, inputs = _apply_knobs_and_cast(work, model, inputs, dev, build_s, result)
        with torch.no_grad():
            eager_reference(eager, model, inputs, work, dev, result)
            fn, mark_step = _compile(request, model, dev, result)
            call = _one_step(fn, inputs, mark_step)
            # Cold compile: the first call, synchronised; then warm-up. NVML is sampled meanwhile.
            # The runner holds the first call to the compile budget (tuner.trial.compiling).
            let_next_build()
            try:
                _cold_compile_and_warm_up(request, call, dev, result)
                _check_output(call, eager, work.dtype, result)
                _record_health(request, result)
                requests, stream = _steady_state(request.protocol, call, dev, result)
            except Exception as exc:  # noqa: BLE001
                raise TrialStopped(raised(result, "", exc)) from None
        _record_memory(dev, result)
        _fill_latency(result, *requests, request.protocol)
        _fill_stream(result, *stream)
        if request.workload.shape_schedule and result.correct is not False:
            _replay_schedule(request, work, fn, dev, mark_step,
                             eager_model(model, request.config), result)
    except TrialStopped as stopped:
        return stopped.record
    if result.correct is False:
        return fail(result, Status.WRONG_RESULT, f"output differs from eager: {result.correctness_note}")
    return result


def _import_torch(request: TrialRequest, started: float) -> float:
    """Import what the trial runs on; the seconds since the process started (import_s)."""
    import torch  # noqa: F401

    if not request.workload.is_factory:
        import torchvision  # noqa: F401 - counted in import time, not build time
    if request.config.backend == "inductor":
        import torch._inductor.compile_fx  # noqa: F401 - as torch.compile would, 1-2 s: import time
    return time.perf_counter() - started


def _build_float32(request: TrialRequest, work: Workload, prebuilt: Prebuilt | None,
                   dev: Device, result: TrialResult) -> tuple[Any, Any, float]:
    """The float32 model and inputs on the device, and the seconds that took (with what the
    pre-started process had left to do)."""
    from tuner.trial import build

    t = time.perf_counter()
    try:
        model, inputs = _take_or_build(request, work, prebuilt, result)
        dev.sync()
    except build.WorkloadError as exc:
        raise TrialStopped(fail(result, Status.WORKLOAD_ERROR, str(exc))) from None
    except Exception as exc:  # noqa: BLE001 - the device's own failures are data; others crash
        raise TrialStopped(device_failure(result, "building the model on the device: ", exc)) from None
    return model, inputs, time.perf_counter() - t + (prebuilt.left_s if prebuilt else 0.0)


def _take_or_build(request: TrialRequest, work: Workload, prebuilt: Prebuilt | None,
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


def _apply_knobs_and_cast(work: Workload, model, inputs, dev: Device, build_s: float,
                          result: TrialResult):
    """Apply the config's global knobs, then cast the model and inputs to its precision and
    memory format; the row's build_s is ``build_s`` and the cast."""
    from tuner.runtime import knobs
    from tuner.trial import build

    knobs.apply_global_knobs(work)
    t = time.perf_counter()
    try:
        model, inputs = build.finish(work, model, inputs)
        dev.sync()
    except Exception as exc:  # noqa: BLE001
        raise TrialStopped(device_failure(result, f"casting the model to {work.dtype}: ", exc)) from None
    result.build_s = build_s + time.perf_counter() - t
    return model, inputs


def _compile(request: TrialRequest, model, dev: Device,
             result: TrialResult) -> tuple[Callable[..., Any], bool]:
    """The model as the config runs it: torch.compile's wrapper (its first call compiles), or
    the model itself for eager or with its blocks compiled (regional,
    :func:`tuner.trial.compiling.compiled_model`); and whether each call marks a CUDA-graph
    step. The device's peaks are counted afresh from here."""
    from tuner.runtime import artifacts

    config = request.config
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
    return compiled_model(model, config, request.workload, result), mark_step


def _one_step(fn: Callable[..., Any], inputs, mark_step: bool) -> Callable[[], Any]:
    """One call of ``fn`` on the trial's inputs: what every timer times."""
    import torch

    def call():
        if mark_step:
            # One inference step per call, as a serving loop would mark it.
            torch.compiler.cudagraph_mark_step_begin()
        return fn(*inputs)

    return call


def _cold_compile_and_warm_up(request: TrialRequest, call: Callable[[], Any], dev: Device,
                              result: TrialResult) -> None:
    """The first call (compile_s_cold), then calls until their times settle; the compile
    phase's memory peaks, the compile caches' counters and, if asked, the saved artifacts."""
    from tuner.runtime import artifacts
    from tuner.trial.stats import is_steady

    config, proto = request.config, request.protocol
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


def _check_output(call: Callable[[], Any], eager: EagerReference, dtype: str,
                  result: TrialResult) -> None:
    """The compiled output against eager's, within the precision's tolerance, and its error
    against float32's; eager's outputs are let go then, before the steady state."""
    from tuner.trial import checks

    output = checks.clone_output(call())
    comparison = checks.compare_outputs(output, eager.output, dtype)
    result.correct = comparison.correct
    result.max_abs_error = comparison.max_abs_error
    result.tolerance = comparison.tolerance
    result.correctness_note = comparison.note
    result.max_abs_error_vs_fp32 = checks.max_abs_difference(
        output, eager.output if dtype == "float32" else eager.float32_output)
    eager.output = eager.float32_output = None


def _record_health(request: TrialRequest, result: TrialResult) -> None:
    """Dynamo's own counters for a compiled config (:mod:`tuner.trial.health`)."""
    from tuner.trial import health

    if request.config.compiled:
        health_ = health.compile_health()
        for field in dataclasses.fields(health_):
            setattr(result, field.name, getattr(health_, field.name))
        result.ran_compiled = health_.ran_compiled


def _steady_state(proto: TrialProtocol, call: Callable[[], Any], dev: Device,
                  result: TrialResult) -> tuple[_Timed, _Timed]:
    """The timed calls, as (samples, seconds, timer) for requests and for the stream; the
    core they ran on and what else the host did meanwhile."""
    from tuner.trial import affinity

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
    return requests, stream


def _gpu_time_ms(dev, call) -> float | None:
    """The GPU's own time for one call (TUNER_GPU_TIME=1); None, with the reason on stderr,
    where the profiler cannot give it: a diagnostic never fails the trial it describes."""
    import sys

    try:
        return dev.gpu_time_ms(call, GPU_TIME_CALLS)
    except Exception as exc:  # noqa: BLE001
        print(f"tuner: no GPU time a call: {describe_error(exc)}", file=sys.stderr)
        return None


def _record_memory(dev: Device, result: TrialResult) -> None:
    """The steady state's memory: the device's peaks, the process's device memory from NVML,
    the host's peak RSS."""
    from tuner.trial.device import host_rss_peak_bytes

    result.vram_bytes_steady_allocated, result.vram_bytes_steady_reserved = dev.peaks()
    result.vram_bytes_process_nvml = dev.process_memory_nvml()
    result.host_rss_bytes_peak = host_rss_peak_bytes()


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


def _replay_schedule(request: TrialRequest, work: Workload, fn: Callable[..., Any], dev: Device,
                     mark_step: bool, model, result: TrialResult) -> None:
    """The workload's shape schedule replayed on the compiled callable
    (:mod:`tuner.trial.replay`); the row's replay_s whatever the outcome."""
    import torch

    from tuner.trial import build, replay

    t = time.perf_counter()
    try:
        with torch.no_grad():
            replay.replay_schedule(result, dataclasses.replace(request, workload=work), fn,
                                   dev, mark_step, model,
                                   lambda exc: is_oom(exc) or is_cuda_error(exc))
    except build.WorkloadError as exc:
        raise TrialStopped(fail(result, Status.WORKLOAD_ERROR, f"shape schedule: {exc}")) from None
    except Exception as exc:  # noqa: BLE001
        raise TrialStopped(raised(result, "shape schedule: ", exc)) from None
    finally:
        result.replay_s = time.perf_counter() - t


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
