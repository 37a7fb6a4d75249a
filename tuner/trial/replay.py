"""A shape schedule replayed on the compiled callable after the steady state."""

from __future__ import annotations

import time

from tuner.spec.records import SCHEDULE_REPEATS, TrialRequest, TrialResult

SLOW_STEP_FACTOR = 5.0  # without compile records, a step > 5x its shape's median was compiling


def replay_schedule(result: TrialResult, request: TrialRequest, fn, dev, mark_step: bool) -> None:
    """Replay the workload's shape schedule on the same compiled callable, after the steady
    state: every step timed (synchronised), recompiles and compile time counted.

    Recompiles and compile time come from dynamo's compilation records made during the replay
    (one per frame compile; a recompile is one with a recompile reason). On a torch without
    those records, compile time is the sum of the steps that took more than
    :data:`SLOW_STEP_FACTOR` times the median step of their shape.
    """
    import statistics

    import torch

    from tuner.spec import workload
    from tuner.trial.build import build_inputs

    schedule = request.workload.shape_schedule
    shapes = {s: build_inputs(request.workload, s) for s in dict.fromkeys(schedule)}
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
