"""A shape schedule replayed on the compiled callable after the steady state.

Two passes. The replay: the schedule, :data:`SCHEDULE_REPEATS` times over, every step timed
(synchronised), as traffic would arrive: its total, and per shape the compiles and CUDA-graph
recordings it caused and what they cost. Then the warm pass: each shape called until its call
times settle, then timed alone, so its latency is a latency, never a recording or a compile.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from tuner.domain.records import SCHEDULE_REPEATS, TrialRequest, TrialResult
from tuner.trial.checks import clone_output, compare_outputs
from tuner.trial.stats import is_steady

SLOW_STEP_FACTOR = 5.0  # without compile records, a step > 5x its shape's warm latency compiled
WARM_WINDOW, WARM_TOLERANCE, WARM_MAX_CALLS = 3, 0.10, 50  # a shape is warm when ...
TIMED_CALLS, TIMED_MIN_S = 20, 0.2  # ... then timed for at least this many calls and seconds


@dataclasses.dataclass(frozen=True)
class ShapeFigures:
    """What one distinct shape of the schedule cost and how fast it ran once warm."""

    latency_ms: float  # median of the timed calls, once warm
    timed_calls: int
    first_call_s: float  # its first step in the replay (a compile or a recording, if any)
    warmup_s: float  # replay time beyond its warm latency: compiles, recordings, settling
    warmup_calls: int  # calls of the warm pass before its times settled
    recompiles: int | None  # compiles its replay steps caused; None without compile records


@dataclasses.dataclass(frozen=True)
class ScheduleFigures:
    total_s: float  # the whole replay
    shapes: dict[Any, ShapeFigures]  # by shape, in first-seen order
    recompiles: int | None
    recompile_s: float | None


def measure_schedule(schedule: Sequence[Hashable], step: Callable[[Any], float],
                     compiles: Callable[[], list[Any]] | None) -> ScheduleFigures:
    """The replay and the warm pass over ``schedule``. ``step(shape)`` runs one synchronised
    call and returns its seconds; ``compiles()`` lists dynamo's compilation records so far
    (None: not compiled, or this torch keeps none)."""
    distinct = list(dict.fromkeys(schedule))
    before = len(compiles()) if compiles else 0
    replay: dict[Any, list[float]] = {s: [] for s in distinct}
    caused: dict[Any, int] = dict.fromkeys(distinct, 0)
    start = time.perf_counter()
    for _ in range(SCHEDULE_REPEATS):
        for shape in schedule:
            seen = len(compiles()) if compiles else 0
            replay[shape].append(step(shape))
            if compiles:
                caused[shape] += len(compiles()) - seen
    total_s = time.perf_counter() - start
    new = compiles()[before:] if compiles else []

    figures = {}
    for shape in distinct:
        settling: list[float] = []
        while len(settling) < WARM_MAX_CALLS and not (
                len(settling) >= 2 * WARM_WINDOW
                and is_steady(settling, WARM_WINDOW, WARM_TOLERANCE)):
            settling.append(step(shape))
        timed: list[float] = []
        t = time.perf_counter()
        while len(timed) < TIMED_CALLS or time.perf_counter() - t < TIMED_MIN_S:
            timed.append(step(shape))
        warm = statistics.median(timed)
        figures[shape] = ShapeFigures(
            latency_ms=warm * 1e3, timed_calls=len(timed), first_call_s=replay[shape][0],
            warmup_s=max(0.0, sum(replay[shape]) - warm * len(replay[shape])),
            warmup_calls=len(settling), recompiles=caused[shape] if compiles else None)
    if compiles and (new or before):
        recompiles = sum(1 for m in new if getattr(m, "recompile_reason", None))
        recompile_s = sum(_compile_seconds(m) for m in new)
    elif compiles:  # no records on this torch: the steps far slower than warm were compiling
        recompiles = None
        recompile_s = sum(t for s, ts in replay.items() for t in ts
                          if t > SLOW_STEP_FACTOR * figures[s].latency_ms / 1e3)
    else:
        recompiles = recompile_s = None
    return ScheduleFigures(total_s, figures, recompiles, recompile_s)


def replay_schedule(result: TrialResult, request: TrialRequest, fn: Callable[..., Any], dev: Any,
                    mark_step: bool, model: Callable[..., Any] | None = None,
                    device_error: Callable[[BaseException], bool] = lambda exc: False) -> None:
    """Replay the workload's shape schedule on the same compiled callable, after the steady
    state, and fill the record's ``schedule_*`` fields (see :func:`measure_schedule`). Then,
    given the eager ``model``, check the compiled output at each shape against eager's: a
    recompile for a new shape is new code, and a wrong one is a wrong result
    (``result.correct`` False, the shape named in its note).

    A compiled call that raises at a shape where eager ``model`` raises too is the model's
    failure, not the config's: :class:`~tuner.trial.build.WorkloadError`, naming the shape
    (a sequence length past a model's position embeddings, say). ``device_error``: whether an
    error is the device's (out of memory, a CUDA error), after which eager is not tried."""
    import torch

    from tuner.domain import workload
    from tuner.trial.build import WorkloadError, build_inputs

    inputs = {s: build_inputs(request.workload, s)
              for s in dict.fromkeys(request.workload.shape_schedule)}
    current: list[Any] = []  # the shape of the step running now

    def step_output(shape: Any) -> Any:
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        return fn(*inputs[shape])

    def step(shape: Any) -> float:
        current[:] = [shape]  # outside the timed call
        return dev.time_call_s(lambda: step_output(shape))

    try:
        figures = measure_schedule(request.workload.shape_schedule, step,
                                   _compilation_metrics if request.config.compiled else None)
    except Exception as exc:
        if model is None or not current or device_error(exc):
            raise
        try:
            model(*inputs[current[0]])
        except Exception as eager_exc:  # noqa: BLE001 - the model's own failure, named
            raise WorkloadError(
                f"the model fails in eager at shape {workload.shape_label(current[0])} of the "
                f"schedule: {type(eager_exc).__name__}: {eager_exc}") from exc
        raise
    shapes = list(figures.shapes)
    result.schedule_total_s = figures.total_s
    result.schedule_recompiles = figures.recompiles
    result.schedule_recompile_s = figures.recompile_s
    result.schedule_batch_sizes = [workload.shape_batch(s) for s in shapes]
    result.schedule_shapes = [workload.shape_label(s) for s in shapes]
    result.schedule_latency_ms = [round(figures.shapes[s].latency_ms, 6) for s in shapes]
    result.schedule_first_call_s = [round(figures.shapes[s].first_call_s, 6) for s in shapes]
    result.schedule_warmup_s = [round(figures.shapes[s].warmup_s, 6) for s in shapes]
    # counted per shape (int) wherever counted in all (measure_schedule's compile records)
    result.schedule_shape_recompiles = [cast(int, figures.shapes[s].recompiles)
                                        for s in shapes] if figures.recompiles is not None else []
    if model is not None and request.config.compiled:
        for shape in shapes:
            got = clone_output(step_output(shape))
            check = compare_outputs(got, model(*inputs[shape]), request.workload.dtype)
            if check.correct is False:
                result.correct = False
                result.correctness_note = (f"at shape {workload.shape_label(shape)} of the "
                                           f"schedule: {check.note}")
                return


def _compilation_metrics() -> list:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return []
    return list(get_compilation_metrics())


def _compile_seconds(record: Any) -> float:
    """Wall time of one frame compile from its record (field names vary across torch)."""
    us = getattr(record, "duration_us", None)
    if us is not None:
        return us / 1e6
    seconds = getattr(record, "entire_frame_compile_time_s", None)
    return float(seconds or 0.0)
