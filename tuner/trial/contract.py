"""What the launching process and the trial process agree on, besides the two JSON records.

The record in RESULT.json is the truth; the exit code says the same for anyone watching
processes. No record means the process died.
"""

from __future__ import annotations

from tuner.domain.records import Status

EXIT_CODES = {
    Status.OK: 0,
    Status.WORKLOAD_ERROR: 3,
    Status.COMPILE_ERROR: 4,
    Status.OOM: 5,
    Status.WRONG_RESULT: 6,
    Status.CUDA_ERROR: 7,
}

PARENT_PID_ENV = "TUNER_PARENT_PID"  # set by the runner: the trial dies with that process

# Set by the runner for a fresh trial process: when it started it (time.monotonic()), so the
# trial records its start-up as launch_s. A pre-started process is told by its job's sent_at
# instead. Every time stamp passed between the runner and a trial process is read from
# CLOCK_MONOTONIC (time.monotonic(), one clock for the whole host on Linux), the clock of the
# runner's wall_s: the wall clock can be stepped between two stamps, and the trial's phases
# then no longer fit within its wall_s.
LAUNCHED_AT_ENV = "TUNER_LAUNCHED_AT"

# Set by the runner for a pre-started trial: a file that exists once the process that will run
# the next trial has finished importing. Warm-up and measurement wait for it (at most
# QUIET_MAX_WAIT_S), so that no import runs beside them.
QUIET_FILE_ENV = "TUNER_QUIET_FILE"

QUIET_MAX_WAIT_S = 120.0

# Set by the runner for a pre-started trial: a file the trial creates just before its first
# (compiling) call. The next trial's process builds its model only once it exists (or its own
# job has come), so that build runs beside this trial's compile, not beside its set-up and eager
# call. The runner creates it itself for a process no trial runs beside, and after each trial.
BUILD_FILE_ENV = "TUNER_NEXT_BUILD_FILE"

# TUNER_TEMPLATE=0 in the tuner's environment: no template process; each pre-started process
# starts fresh and imports (tuner.launch.prestart).
TEMPLATE_ENV = "TUNER_TEMPLATE"

# Set by the runner when the protocol has a compile budget (--compile-timeout): a file the trial
# writes, holding its record so far, just before its first compiled call, and removes as soon
# as that call returns or raises (tuner.trial.compiling). A marker older than the budget makes
# the runner kill the process group and keep that record as compile_timeout
# (tuner.launch.compile_budget): no exit code of the trial's own says so.
COMPILE_MARKER_ENV = "TUNER_COMPILE_MARKER"

# TUNER_GPU_TIME=1 in the tuner's environment: each CUDA trial also records the GPU's own time
# for one call (gpu_time_ms: the profiler over GPU_TIME_CALLS calls after the steady state), to
# tell GPU work from host time. Off by default: the profiler's start-up is a trial's overhead.
GPU_TIME_ENV = "TUNER_GPU_TIME"
GPU_TIME_CALLS = 10
