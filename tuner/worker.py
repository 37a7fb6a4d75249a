"""One trial, in its own fresh process: ``python -m tuner.worker REQUEST.json RESULT.json``.

Pre-started (``python -m tuner.worker --wait READY``): the process imports torch, creates the
file READY and waits for one job on stdin, a JSON line ``{"request": ..., "result": ...,
"env": {...}}``; it then runs that one trial exactly as above and exits. CUDA is not touched
before the job arrives. See :class:`tuner.runner.ProcessRunner` (``prestart``).

The protocol (DESIGN.md, "A trial, as the user should be able to trust it"), in order:
build and apply knobs → eager reference → cold first call → warm-up until steady →
correctness → compile health → steady-state latency and memory → the workload's shape schedule
replayed, if it has one → one record, written atomically.

Contract with the parent (:mod:`tuner.runner`): the record in RESULT.json is the truth; the exit
code says the same thing for anyone watching processes. No record means the process died. If the
parent sets TUNER_PARENT_PID, the trial dies with that process (Linux).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path

from tuner.records import Protocol, Status, TrialRequest, TrialResult, write_json_atomic
from tuner.space import TrialConfig

EXIT_CODES = {
    Status.OK: 0,
    Status.WORKLOAD_ERROR: 3,
    Status.COMPILE_ERROR: 4,
    Status.OOM: 5,
    Status.WRONG_RESULT: 6,
}
# Any other exit (a signal, an abort, Python's own 1 for an uncaught error) is a crash.

PARENT_PID_ENV = "TUNER_PARENT_PID"  # set by the runner: the trial dies with that process
# Set by the runner for a pre-started trial: a file that exists once the process that will run
# the next trial has finished importing. Warm-up and measurement wait for it (at most
# QUIET_MAX_WAIT_S), so that no import runs beside them.
QUIET_FILE_ENV = "TUNER_QUIET_FILE"
QUIET_MAX_WAIT_S = 120.0

_CUDAGRAPH_MODES = {"reduce-overhead", "max-autotune"}


def uses_cudagraphs(config: TrialConfig) -> bool:
    return config.backend == "cudagraphs" or (config.backend == "inductor"
                                              and config.mode in _CUDAGRAPH_MODES)


def run_trial(request: TrialRequest, started: float) -> TrialResult:
    """Run the protocol; every expected failure comes back as a record, never an exception."""
    t = time.perf_counter()
    import torch

    if not request.workload.is_factory:
        import torchvision  # noqa: F401 - counted in import time, not build time
    import_s = time.perf_counter() - started

    from tuner import artifacts, fingerprint, measure, workload

    result = TrialResult(status=Status.OK, import_s=import_s)
    result.fingerprint = fingerprint.collect(request.workload.device)
    config, proto = request.config, request.protocol
    dev = measure.Device(request.workload.device)

    workload.apply_global_knobs(request.workload)
    t = time.perf_counter()
    try:
        model, inputs = workload.build(request.workload, config.batch_size)
        dev.sync()
    except workload.WorkloadError as exc:
        return _fail(result, Status.WORKLOAD_ERROR, str(exc))
    result.build_s = time.perf_counter() - t

    with torch.no_grad():
        # Eager reference on the same inputs, before anything is compiled.
        try:
            reference = _clone(model(*inputs))
            result.eager_reference_ms = dev.time_call_s(lambda: model(*inputs)) * 1e3
        except Exception as exc:  # noqa: BLE001
            if _is_oom(exc):
                return _fail(result, Status.OOM, f"eager call: {_describe(exc)}")
            return _fail(result, Status.WORKLOAD_ERROR, f"the model fails in eager: {_describe(exc)}")
        # The work one call does, counted on eager (the compiled model does the same math).
        result.flops_per_call = measure.flops_per_call(lambda: model(*inputs))

        dev.reset_peaks(empty_cache=True)
        result.vram_bytes_baseline = dev.allocated()
        mark_step = uses_cudagraphs(config) and dev.cuda

        if request.load_artifacts and config.compiled:
            # Start from saved artifacts (a finalist re-measurement); not in compile_s_cold.
            result.artifacts_load_s, result.artifacts_note = artifacts.load(
                Path(request.load_artifacts))
        fn = torch.compile(model, **config.compile_kwargs()) if config.compiled else model

        def call():
            if mark_step:
                # One inference step per call, as a serving loop would mark it.
                torch.compiler.cudagraph_mark_step_begin()
            return fn(*inputs)

        # Cold compile: the first call, synchronised; then warm-up. NVML is sampled meanwhile.
        try:
            with dev.nvml_peak() as nvml:
                result.compile_s_cold = dev.time_call_s(call)
                result.quiet_wait_s = wait_until_quiet()
                warm_times = []
                warm_start = time.perf_counter()
                while len(warm_times) < proto.warmup_max_calls:
                    warm_times.append(dev.time_call_s(call))
                    if len(warm_times) >= proto.warmup_min_calls and measure.is_steady(
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

            comparison = measure.compare_outputs(_clone(call()), reference, request.workload.dtype)
            result.correct = comparison.correct
            result.max_abs_error = comparison.max_abs_error
            result.tolerance = comparison.tolerance
            result.correctness_note = comparison.note
            del reference

            if config.compiled:
                health = measure.compile_health()
                for field in dataclasses.fields(health):
                    setattr(result, field.name, getattr(health, field.name))
                result.ran_compiled = health.ran_compiled

            # Steady state: compile-time transients released, peaks counted afresh.
            dev.reset_peaks(empty_cache=True)
            samples, spent, timer = dev.time_steady_ms(call, proto.min_calls, proto.min_seconds,
                                                       proto.max_seconds)
        except Exception as exc:  # noqa: BLE001
            status = Status.OOM if _is_oom(exc) else Status.COMPILE_ERROR
            return _fail(result, status, _describe(exc))

    result.vram_bytes_steady_allocated, result.vram_bytes_steady_reserved = dev.peaks()
    result.vram_bytes_process_nvml = dev.process_memory_nvml()
    result.host_rss_bytes_peak = measure.host_rss_peak_bytes()
    _fill_latency(result, samples, spent, timer, proto)

    if request.workload.shape_schedule and result.correct is not False:
        try:
            with torch.no_grad():
                _replay_schedule(result, request, fn, dev, mark_step)
        except workload.WorkloadError as exc:
            return _fail(result, Status.WORKLOAD_ERROR, f"shape schedule: {exc}")
        except Exception as exc:  # noqa: BLE001
            status = Status.OOM if _is_oom(exc) else Status.COMPILE_ERROR
            return _fail(result, status, f"shape schedule: {_describe(exc)}")

    if result.correct is False:
        return _fail(result, Status.WRONG_RESULT, f"output differs from eager: {result.correctness_note}")
    return result


def wait_until_quiet() -> float | None:
    """Wait until the next trial's process has finished importing (see QUIET_FILE_ENV); the
    seconds waited, or None when this trial has no such neighbour."""
    path = os.environ.get(QUIET_FILE_ENV)
    if not path:
        return None
    t = time.perf_counter()
    while not os.path.exists(path) and time.perf_counter() - t < QUIET_MAX_WAIT_S:
        time.sleep(0.005)
    return time.perf_counter() - t


def _fill_latency(result: TrialResult, samples: list[float], spent: float, timer: str,
                  proto: Protocol) -> None:
    from tuner.measure import LatencyStats

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


SCHEDULE_REPEATS = 3  # the schedule is replayed this many times over: several samples a shape
SLOW_STEP_FACTOR = 5.0  # without compile records, a step > 5x its shape's median was compiling


def _replay_schedule(result: TrialResult, request: TrialRequest, fn, dev, mark_step: bool) -> None:
    """Replay the workload's shape schedule on the same compiled callable, after the steady
    state: every step timed (synchronised), recompiles and compile time counted.

    Recompiles and compile time come from dynamo's compilation records made during the replay
    (one per frame compile; a recompile is one with a recompile reason). On a torch without
    those records, compile time is the sum of the steps that took more than
    :data:`SLOW_STEP_FACTOR` times the median step of their shape.
    """
    import statistics

    import torch

    from tuner import workload

    schedule = request.workload.shape_schedule
    shapes = {s: workload.build_inputs(request.workload, s) for s in dict.fromkeys(schedule)}
    compiled = request.config.compiled
    before = {id(m) for m in _compilation_metrics()}
    times: dict[workload.Shape, list[float]] = {s: [] for s in shapes}
    start = time.perf_counter()
    for _ in range(SCHEDULE_REPEATS):
        for shape in schedule:
            inputs = shapes[shape]

            def step(inputs=inputs):
                if mark_step:
                    torch.compiler.cudagraph_mark_step_begin()
                return fn(*inputs)

            times[shape].append(dev.time_call_s(step))
    result.schedule_total_s = time.perf_counter() - start
    medians = {s: statistics.median(ts) for s, ts in times.items()}
    result.schedule_batch_sizes = [workload.shape_batch(s) for s in shapes]
    result.schedule_shapes = [workload.shape_label(s) for s in shapes]
    result.schedule_latency_ms = [round(medians[s] * 1e3, 6) for s in shapes]
    if not compiled:
        return
    new = [m for m in _compilation_metrics() if id(m) not in before]
    if new or before:  # this torch keeps compilation records
        result.schedule_recompiles = sum(1 for m in new if getattr(m, "recompile_reason", None))
        result.schedule_recompile_s = sum(_compile_seconds(m) for m in new)
    else:
        result.schedule_recompile_s = sum(t for s, ts in times.items() for t in ts
                                          if t > SLOW_STEP_FACTOR * medians[s])


def _compilation_metrics() -> list:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return []
    return list(get_compilation_metrics())


def _compile_seconds(record) -> float:
    """Wall time of one frame compile from its record (field names vary across torch)."""
    us = getattr(record, "duration_us", None)
    if us is not None:
        return us / 1e6
    seconds = getattr(record, "entire_frame_compile_time_s", None)
    return float(seconds or 0.0)


def _peak_tflops(device: str) -> float | None:
    from tuner import measure

    try:
        return measure.peak_matmul_tflops(device)
    except Exception:  # noqa: BLE001 - a device that cannot run it leaves the cell blank
        traceback.print_exc()
        return None


def _fail(result: TrialResult, status: Status, message: str) -> TrialResult:
    result.status = status
    result.message = message
    return result


def _clone(out):
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, out)


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None),
                                  getattr(torch.cuda, "OutOfMemoryError", None), MemoryError) if t)
    return isinstance(exc, oom_types) or "out of memory" in str(exc).lower()


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:4000]


def die_with_parent() -> None:
    """Be killed when the process named by TUNER_PARENT_PID dies (Linux; elsewhere a no-op).

    The parent kills this trial's process group whenever it ends a trial, but killed outright
    (SIGKILL, the OOM killer) it cannot, and an orphaned trial would go on computing on the GPU
    beside the trial that measures its config again. The kernel signals us when the parent's
    thread that started us exits: the runner starts trials from the search loop's thread.
    """
    parent = os.environ.get(PARENT_PID_ENV, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # a wrapper between us, or the parent died just before
        try:
            os.kill(int(parent), 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:
            pass


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    die_with_parent()
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--wait":
        return wait_for_job(Path(argv[1]))
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: python -m tuner.worker REQUEST.json RESULT.json\n"
              "       python -m tuner.worker --wait READY  (then one JSON job line on stdin)",
              file=sys.stderr)
        return 2
    return serve(Path(argv[0]), Path(argv[1]), started)


def wait_for_job(ready: Path) -> int:
    """Pre-started: import what every trial needs (CUDA untouched), create ``ready``, then run
    the one job that arrives on stdin. No job (stdin closed) is a quiet exit."""
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    from tuner import artifacts, fingerprint, measure, workload  # noqa: F401

    imported_at = time.time()
    ready.touch()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    job = json.loads(line)
    os.environ.update(job.get("env") or {})  # this trial's cache folders, read lazily by torch
    # import_s: what was left of the import when the job was sent (0 once the process is ready).
    left_s = max(0.0, imported_at - float(job.get("sent_at", imported_at)))
    return serve(Path(job["request"]), Path(job["result"]), time.perf_counter() - left_s,
                 prestarted=True)


def serve(request_path: Path, result_path: Path, started: float, prestarted: bool = False) -> int:
    """Run the request's trial and write its record; the exit code for the record's status."""
    request = TrialRequest.from_dict(json.loads(request_path.read_text()))
    try:
        result = run_trial(request, started)
        result.prestarted = prestarted
        if request.protocol.measure_peak:  # last, so it cannot disturb the trial's numbers
            result.peak_tflops_measured = _peak_tflops(request.workload.device)
    except Exception as exc:  # noqa: BLE001 - unexpected: still leave a record behind
        traceback.print_exc()
        result = TrialResult(status=Status.CRASH, message=f"worker error: {_describe(exc)}")
    write_json_atomic(result_path, result.to_dict())
    return EXIT_CODES.get(result.status, 1)


if __name__ == "__main__":
    sys.exit(main())
