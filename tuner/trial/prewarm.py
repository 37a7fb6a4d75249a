"""A device readied before its trial, by the pre-started process that will run that trial.

A trial's first eager call readies the device's libraries: it starts CUDA, loads cuDNN and
cuBLAS, and, with ``cudnn.benchmark``, tries every convolution algorithm for each shape and
keeps the fastest. On the H200 that call took 0.9-1.4 s for resnet50 (bf16, batch size 1,
benchmarks/first_call.py), most of a pre-started trial's overhead.

So a pre-started process that has built its model (:mod:`tuner.trial.prebuild`) may also run
it once on the device before its job comes: in the precision, memory format and cudnn.benchmark
setting the runner expects (those of the trial running beside it, :func:`expected`), at the
batch size it built for, on copies of the weights (the CPU model is left as built), freed
afterwards. What stays in the process is what a first call leaves there: CUDA started, the
libraries loaded, cuDNN's algorithm choices for those shapes. The trial then runs its own
eager call as always, before its first compiled call, so ``compile_s_cold`` starts from the
same state it did; only the eager call is shorter (``eager_reference_s``).

It runs while the trial beside it compiles (once its BUILD file exists), and that trial waits
for it before its warm-up (``quiet_wait_s``), so no measurement shares the GPU with it.

It is on unless ``TUNER_PREWARM=0``. On the H200 (torch 2.11, 2026-12-01) it cut resnet50's
overhead per trial from 1.67 s to 0.45 s. Whether it changes what a trial measures was checked
with the same config run twice in a fresh runner, the second trial readied ahead or not
(benchmarks/prewarm_fidelity.py): the GPU's own time a call (``gpu_time_ms``, every kernel's
time from the profiler) was the same, trial over control a median 1.006 readied against 0.999
not (14 and 11 samples, 0.955-1.038 either way; every trial 1.63-1.78 ms). So cuDNN's
algorithm choices made beside another trial's compile give the same GPU work. The p50s spread
far more (2.1-4.2 ms in those samples, in the two modes a slow launching core makes; see
benchmarks/slow_mode.py), readied or not: over every check, trial over control a
median 1.050 readied against 1.010 not (35 and 32 samples, one-sided p = 0.31;
benchmarks/prewarm_fidelity.py), slow in 10 of 35 readied trials, 11 of 32 others
and 15 of 67 controls.

It is not readied where the device has less than half its memory free (:func:`room`): the
trial beside holds only its weights and inputs while it compiles, and may need much more when
its first compiled call runs, perhaps while this process still has its copies there.

It is not done beside a compile that itself benchmarks kernels on the GPU (max-autotune,
coordinate descent tuning): two processes timing kernels at once could both choose worse ones.
Nor beside an uncompiled trial, which has no compile to hide it behind: it would wait for it
instead. Nor where the search varies cudnn.benchmark: PyTorch keys the cuDNN plans it keeps
without that setting, so a plan chosen with it off would serve a next trial that has it on.
Where it fails (a model that raises, runs out of memory or trips a device-side assert at that
batch size), the process replaces itself with a fresh one, same pid, same stdin, which imports
and then runs its trial with nothing built ahead: the trial meets the failure, if it is its
own, in a clean process. The process keeps what readying left on the device (its CUDA context,
the libraries' workspaces, the allocator's cache) while that trial measures: NVML gave 722 MiB
for resnet50 bf16 on the H200 (benchmarks/trial_overhead.py); each readied
trial records its own figure (``prewarm_vram_bytes_nvml``).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from tuner.domain.config import TrialConfig
from tuner.domain.workload import Workload

PREWARM_ENV = "TUNER_PREWARM"
# Readied only while this share of the device's memory is free: the trial beside, which may
# need much more than it holds while compiling, must not run out of memory for it.
MIN_FREE_SHARE = 0.5

# Inductor options under which the compile benchmarks kernels on the GPU.
_TUNING_OPTIONS = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise",
                   "coordinate_descent_tuning")


def expected(config: TrialConfig, workload: Workload) -> Workload | None:
    """What the process started beside the trial of ``config`` (on ``workload``, as requests
    carry it) warms the device with: the workload as this config runs it (its precision,
    memory format, cudnn.benchmark), the next trial's most likely; None where it must not warm
    (see the module's text) or is told not to (TUNER_PREWARM=0)."""
    if os.environ.get(PREWARM_ENV, "1") == "0" or not workload.device.startswith("cuda"):
        return None
    if not config.compiled or benchmarks_while_compiling(config):
        return None
    if config.cudnn_benchmark is not None:  # searched: the next trial's may differ
        return None
    return config.applied_to(workload)


def benchmarks_while_compiling(config: TrialConfig) -> bool:
    """Whether compiling ``config`` times kernels on the GPU to choose among them."""
    options = config.option_dict
    return "max-autotune" in (config.mode or "") or any(
        options.get(name) is True for name in _TUNING_OPTIONS)


def room(work: Workload, mem_get_info: Any = None) -> str:
    """An empty string where the device has room to be readied beside the trial running
    there (at least MIN_FREE_SHARE of its memory free); else why not. A guard, not a
    guarantee: what the trial beside will take is not known, only what it holds now (its
    weights and inputs while it compiles). Starts CUDA in this process, as readying would."""
    import torch

    if torch.device(work.device).type != "cuda":
        return ""
    free, total = (mem_get_info or torch.cuda.mem_get_info)(torch.device(work.device))
    if free >= MIN_FREE_SHARE * total:
        return ""
    return (f"device not readied: {free / 2**30:.1f} of {total / 2**30:.1f} GiB free beside the "
            f"trial before it (under {MIN_FREE_SHARE:.0%})")


def warm(model: Any, inputs: tuple[Any, ...], work: Workload) -> str:
    """Run ``model`` (on the CPU, as built, float32) once on ``work``'s device, in its
    precision and memory format, with its cudnn.benchmark and tf32 settings, on copies of the
    weights and ``inputs``; ``model`` and the process's settings are left as they were. Never
    raises: "" where it ran, else why not. A process where it failed is not trusted with a
    trial (a sticky CUDA error poisons its CUDA context for good): it starts afresh
    (:func:`tuner.trial.serve.wait_for_job`)."""
    import torch
    from torch.func import functional_call

    from tuner.domain.workload import tensor_dtype
    from tuner.runtime.knobs import apply_global_knobs
    from tuner.trial.build import place_inputs

    knobs = _knobs()
    dtype = getattr(torch, tensor_dtype(work.dtype))
    device = torch.device(work.device)
    tensors: dict[str, Any] = {}
    placed: tuple[Any, ...] = ()
    try:
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            t = t.detach().to(device=device, dtype=dtype if t.is_floating_point() else None)
            if work.channels_last and t.dim() == 4:
                t = t.contiguous(memory_format=torch.channels_last)
            tensors[name] = t
        placed = place_inputs(work, inputs)
        apply_global_knobs(work)
        with torch.no_grad():
            functional_call(model, tensors, placed)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return ""
    except Exception as exc:  # noqa: BLE001 - the trial's own eager call says what is wrong
        return f"device not readied before the trial ({type(exc).__name__})"
    finally:
        tensors.clear()
        del placed
        _set_knobs(knobs)
        if device.type == "cuda" and torch.cuda.is_initialized():
            with contextlib.suppress(Exception):  # a context a sticky error poisoned raises
                torch.cuda.empty_cache()


# The process-wide settings readying may change (tuner.runtime.knobs), restored afterwards,
# each assigned only where it differs. Where torch has the fp32_precision settings (2.9 on),
# they are the state and the legacy switches (allow_tf32, set_float32_matmul_precision) follow
# from them: assigning a legacy switch its own value turns matmul's fp32_precision from "none"
# (a fresh process's) into "ieee", and inductor keys its FX-graph cache on it, so the trial
# compiled under another key than production's apply() in a fresh process and its saved
# artifacts missed there (tuner check on the H100, torch 2.11, 2026-12-07).
_PRECISIONS = ("backends", "backends.cuda.matmul", "backends.cudnn", "backends.cudnn.conv",
               "backends.cudnn.rnn", "backends.mkldnn", "backends.mkldnn.matmul",
               "backends.mkldnn.conv", "backends.mkldnn.rnn")
_LEGACY = ("backends.cudnn.allow_tf32", "backends.cuda.matmul.allow_tf32")
_MATMUL = "float32_matmul_precision"  # torch.get/set_float32_matmul_precision, legacy


def _knobs() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"backends.cudnn.benchmark": torch.backends.cudnn.benchmark}
    try:  # torch keeps it beside the fp32_precision settings, and may refuse to say it
        out[_MATMUL] = torch.get_float32_matmul_precision()
    except RuntimeError:  # "a mix of the legacy and new APIs": left as it is
        pass
    if not hasattr(torch.backends, "fp32_precision"):
        for name in _LEGACY:
            owner, _, attr = name.rpartition(".")
            out[name] = getattr(_resolve(torch, owner), attr)
        return out
    for name in _PRECISIONS:  # last: restored after the legacy matmul precision
        holder = _resolve(torch, name)
        if holder is not None and hasattr(holder, "fp32_precision"):
            out[name + ".fp32_precision"] = holder.fp32_precision
    return out


def _set_knobs(knobs: dict[str, Any]) -> None:
    import torch

    for name, value in knobs.items():
        if name == _MATMUL:
            try:
                now = torch.get_float32_matmul_precision()
            except RuntimeError:
                now = None
            if now != value:
                torch.set_float32_matmul_precision(value)
            continue
        owner, _, attr = name.rpartition(".")
        holder = _resolve(torch, owner)
        if holder is not None and getattr(holder, attr) != value:
            setattr(holder, attr, value)


def _resolve(torch: Any, dotted: str) -> Any:
    """``torch.backends.cudnn.conv`` from ``backends.cudnn.conv``, or None where this torch
    lacks it."""
    holder = torch
    for part in dotted.split("."):
        holder = getattr(holder, part, None)
        if holder is None:
            return None
    return holder
