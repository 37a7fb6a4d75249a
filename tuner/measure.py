"""Measurement helpers used inside the trial process: timers, statistics, memory, health.

Nothing here decides what a trial does; :mod:`tuner.worker` runs the protocol in order.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import resource
import statistics
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


@dataclasses.dataclass(frozen=True)
class LatencyStats:
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    iqr: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> LatencyStats:
        xs = sorted(samples_ms)
        return cls(p50=percentile(xs, 50), p90=percentile(xs, 90), p99=percentile(xs, 99),
                   mean=statistics.fmean(xs), min=xs[0],
                   iqr=percentile(xs, 75) - percentile(xs, 25))


def percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated percentile of an already sorted list (numpy's default method)."""
    if not sorted_xs:
        raise ValueError("no samples")
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def is_steady(times: list[float], window: int, tolerance: float) -> bool:
    """True when the medians of the last two windows of call times agree within ``tolerance``."""
    if len(times) < 2 * window:
        return False
    prev = statistics.median(times[-2 * window:-window])
    last = statistics.median(times[-window:])
    return abs(last - prev) <= tolerance * max(prev, 1e-12)


class Device:
    """The one place that knows whether we are on CUDA: sync, timing and memory."""

    def __init__(self, name: str) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(name)
        self.cuda = self.device.type == "cuda"
        self._nvml_handle = None

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time_call_s(self, fn: Callable[[], Any]) -> float:
        """Wall time of one call, synchronised before and after."""
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - start

    def time_steady_ms(self, fn: Callable[[], Any], min_calls: int, min_seconds: float,
                       max_seconds: float) -> tuple[list[float], float, str]:
        """Per-call latency in ms for at least ``min_calls`` calls AND ``min_seconds``.

        On CUDA each call sits between two device events, so the samples are device time
        including any gap where the GPU waited for the CPU to launch work (launch-bound
        configs show it); on the CPU, perf_counter around each call.
        Returns (samples_ms, seconds spent, timer name).
        """
        self.sync()
        start = time.perf_counter()
        if self.cuda:
            pairs = []
            while True:
                begin = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                begin.record()
                fn()
                end.record()
                pairs.append((begin, end))
                elapsed = time.perf_counter() - start
                if (len(pairs) >= min_calls and elapsed >= min_seconds) or elapsed >= max_seconds:
                    break
            self.sync()
            samples = [b.elapsed_time(e) for b, e in pairs]
            return samples, time.perf_counter() - start, "cuda_event"
        samples = []
        while True:
            t = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t) * 1e3)
            elapsed = time.perf_counter() - start
            if (len(samples) >= min_calls and elapsed >= min_seconds) or elapsed >= max_seconds:
                break
        return samples, time.perf_counter() - start, "perf_counter"

    # memory -------------------------------------------------------------------------------
    def reset_peaks(self, empty_cache: bool = False) -> None:
        if self.cuda:
            self.sync()
            if empty_cache:
                self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int | None:
        return int(self.torch.cuda.memory_allocated(self.device)) if self.cuda else None

    def peaks(self) -> tuple[int | None, int | None]:
        """(max allocated, max reserved) since the last reset; CUDA-graph pools are included,
        since their memory comes from the same caching allocator."""
        if not self.cuda:
            return None, None
        self.sync()
        return (int(self.torch.cuda.max_memory_allocated(self.device)),
                int(self.torch.cuda.max_memory_reserved(self.device)))

    def process_memory_nvml(self) -> int | None:
        """Device memory NVML attributes to this process (CUDA context included), if visible."""
        if not self.cuda:
            return None
        try:
            import pynvml

            if self._nvml_handle is None:  # once: NvmlPeak calls this every 50 ms
                pynvml.nvmlInit()
                index = self.device.index if self.device.index is not None else 0
                visible = os.environ.get("CUDA_VISIBLE_DEVICES")
                if visible:
                    index = int(visible.split(",")[index])
                self._nvml_handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(self._nvml_handle):
                if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                    return int(proc.usedGpuMemory)
        except Exception:  # noqa: BLE001 - NVML is optional, and some sandboxes hide processes
            return None
        return None

    def nvml_peak(self, interval_s: float = 0.05) -> NvmlPeak:
        """A context that samples :meth:`process_memory_nvml` in a thread while it is open."""
        return NvmlPeak(self.process_memory_nvml if self.cuda else None, interval_s)


class NvmlPeak:
    """The highest device memory NVML showed for this process while the context was open,
    sampled every ``interval_s`` in a thread (NVML reports current use, not a peak, so a spike
    shorter than the interval can be missed). For the compile phase only: the sampling thread
    would compete with the calls being timed at steady state. ``peak`` stays None without CUDA
    or where NVML shows no process."""

    def __init__(self, sample: Callable[[], int | None] | None, interval_s: float) -> None:
        self._sample, self._interval = sample, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak: int | None = None

    def _take(self) -> None:
        value = self._sample()
        if value is not None and (self.peak is None or value > self.peak):
            self.peak = value

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._take()

    def __enter__(self) -> NvmlPeak:
        if self._sample is not None:
            self._take()
            self._thread = threading.Thread(target=self._loop, name="tuner-nvml", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._take()


def host_rss_peak_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


# FLOPs --------------------------------------------------------------------------------------
def flops_per_call(fn: Callable[[], Any]) -> int | None:
    """FLOPs of one call as ``torch.utils.flop_counter`` counts them (matmuls, convolutions,
    attention; elementwise work is not counted); None where it cannot count this model, or
    counts nothing: a fused kernel it does not know (such as the eager fast path of
    nn.TransformerEncoderLayer) would otherwise read as a model that does no work."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            fn()
        return int(counter.get_total_flops()) or None
    except Exception:  # noqa: BLE001 - a count we cannot make is a blank cell, not a failed trial
        return None


def peak_matmul_tflops(device: str, warmups: int = 3, repeats: int = 10) -> float:
    """TFLOP/s of dense matrix products as this device runs them, measured here and now.

    CUDA: bf16 products of 8192x8192 matrices (the tensor-core rate a bf16 model could reach),
    each timed with device events. CPU: fp32 products of 2048x2048 matrices, each timed with
    perf_counter. Each product counts 2*n**3 FLOPs; the fastest of ``repeats`` is the peak (a
    peak is what the device can do, not what it did on average while something else ran).
    """
    import torch

    dev = Device(device)
    n, dtype = (8192, torch.bfloat16) if dev.cuda else (2048, torch.float32)
    with torch.no_grad():
        a = torch.randn(n, n, device=dev.device, dtype=dtype)
        b = torch.randn(n, n, device=dev.device, dtype=dtype)
        out = torch.empty(n, n, device=dev.device, dtype=dtype)
        for _ in range(warmups):
            torch.mm(a, b, out=out)
        dev.sync()
        fastest = math.inf
        for _ in range(repeats):
            if dev.cuda:
                begin = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                begin.record()
                torch.mm(a, b, out=out)
                end.record()
                dev.sync()
                seconds = begin.elapsed_time(end) / 1e3
            else:
                start = time.perf_counter()
                torch.mm(a, b, out=out)
                seconds = time.perf_counter() - start
            fastest = min(fastest, seconds)
        del a, b, out
    return 2.0 * n**3 / fastest / 1e12


# correctness ----------------------------------------------------------------------------
TOLERANCE = {"float32": 1e-3, "bfloat16": 3e-2, "float16": 1e-2}


@dataclasses.dataclass(frozen=True)
class Comparison:
    correct: bool | None
    max_abs_error: float | None
    tolerance: float
    note: str = ""


def compare_outputs(actual: Any, expected: Any, dtype: str) -> Comparison:
    """Compiled vs eager output, NaN-aware, with a tolerance relative to the output's scale.

    NaN must sit in the same places in both; finite values must agree within
    ``tol * max|expected|`` (absolute) plus ``tol`` (relative). An eager output with no finite
    value at all (a random bf16 ViT can do that) leaves correctness unknown (``None``).
    """
    import torch
    from torch.utils._pytree import tree_leaves

    tol = TOLERANCE.get(dtype, 1e-3)
    got = [t for t in tree_leaves(actual) if isinstance(t, torch.Tensor)]
    want = [t for t in tree_leaves(expected) if isinstance(t, torch.Tensor)]
    if len(got) != len(want):
        return Comparison(False, None, tol, f"{len(got)} output tensors, eager gave {len(want)}")
    worst = 0.0
    finite_seen = False
    nan_count = 0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return Comparison(False, None, tol, f"output shape {tuple(g.shape)}, eager {tuple(w.shape)}")
        g = g.detach().float().cpu()
        w = w.detach().float().cpu()
        nan_w = torch.isnan(w)
        nan_count += int(nan_w.sum())
        if not torch.equal(nan_w, torch.isnan(g)):
            return Comparison(False, None, tol, "NaN in different places than eager")
        finite = torch.isfinite(w) & torch.isfinite(g)
        if not finite.any():
            continue
        finite_seen = True
        gw, ww = g[finite], w[finite]
        scale = float(ww.abs().max())
        err = float((gw - ww).abs().max())
        worst = max(worst, err)
        if not torch.allclose(gw, ww, rtol=tol, atol=tol * max(scale, 1e-6)):
            return Comparison(False, err, tol, f"max abs error {err:.3g} at output scale {scale:.3g}")
    note = f"eager output has {nan_count} NaN values (compared NaN-aware)" if nan_count else ""
    if not finite_seen:
        return Comparison(None, None, tol, note or "no finite output values to compare")
    return Comparison(True, worst, tol, note)


# compile health --------------------------------------------------------------------------
# How dynamo words a refused recompile: "Dynamo recompile limit exceeded ... Limit type:
# recompile_limit" (torch 2.14, checked); older releases raised "cache_size_limit reached" or
# "<limit name> reached" (from their source, not run here).
_LIMIT_HIT = re.compile(r"(recompile|cache)[ _]?(size[ _]?)?limit", re.IGNORECASE)
_LIMIT_TYPE = re.compile(r"Limit type: (\w+)|(\w*(?:recompile|cache_size)_limit)")


@dataclasses.dataclass(frozen=True)
class Health:
    """What dynamo and inductor did with the model, from their own counters.

    ``recompiles`` counts every guard failure that made dynamo compile a frame again, including
    the ones it refused at the recompile limit; ``recompile_limit_hits`` counts those refusals
    (the frame then runs eager for the inputs that failed its guards). ``eager_fallback_frames``
    counts frames whose compilation failed otherwise (a backend error under
    ``suppress_errors``, ...). Reasons are first lines, at most 20 of each.
    """

    graph_breaks: int
    graph_break_reasons: list[str]
    unique_graphs: int
    recompiles: int
    recompile_reasons: list[str]
    cudagraph_skips: int
    eager_fallback_frames: int
    recompile_limit_hits: int = 0
    recompile_limit_reasons: list[str] = dataclasses.field(default_factory=list)
    cudagraph_skip_reasons: list[str] = dataclasses.field(default_factory=list)
    eager_fallback_reasons: list[str] = dataclasses.field(default_factory=list)

    @property
    def ran_compiled(self) -> bool:
        """False when the backend produced no compiled graph at all: every call ran eager
        under a compiled label (a backend that failed under ``suppress_errors``, a model with
        nothing dynamo could capture). Such a config must never pass for a compiled speedup."""
        return self.unique_graphs > 0


def compile_health() -> Health:
    """Read dynamo's and inductor's own counters; call after the compiled calls."""
    from torch._dynamo.utils import counters

    metrics: list[Any] = []
    try:
        from torch._dynamo.utils import get_compilation_metrics

        metrics = list(get_compilation_metrics())
    except ImportError:
        pass
    return health_from(counters, metrics)


def health_from(counters: Any, metrics: list[Any]) -> Health:
    """:class:`Health` from dynamo's ``counters`` and its ``CompilationMetrics`` records (an
    empty list on a torch without them). Every field of a record is read with ``getattr``:
    older torch has fewer."""
    recompile_reasons = [str(m.recompile_reason) for m in metrics
                         if getattr(m, "recompile_reason", None)]
    failed = [m for m in metrics if getattr(m, "fail_type", None)]
    limit_hits = [m for m in failed if _LIMIT_HIT.search(str(getattr(m, "fail_reason", "") or ""))]
    fell_back = [m for m in failed if m not in limit_hits]
    frames = counters.get("frames", {})
    if metrics:
        limit_count = len(limit_hits)
        limit_reasons = [_limit_reason(str(getattr(m, "fail_reason", "")),
                                       getattr(m, "recompile_reason", None)) for m in limit_hits]
        fallback = len(fell_back)
    else:  # no records: dynamo's ``unimplemented`` counter still names a refused recompile
        limits = {k: v for k, v in counters.get("unimplemented", {}).items() if _LIMIT_HIT.search(k)}
        limit_count = int(sum(limits.values()))
        limit_reasons = [_limit_reason(k, None) for k in limits]
        fallback = max(0, frames.get("total", 0) - frames.get("ok", 0) - limit_count)
    skip_reasons = [str(getattr(m, "cudagraph_skip_reason", None)) for m in metrics
                    if getattr(m, "cudagraph_skip_reason", None)]
    return Health(
        graph_breaks=int(sum(counters.get("graph_break", {}).values())),
        graph_break_reasons=[_first_line(r) for r in counters.get("graph_break", {})][:20],
        unique_graphs=int(counters.get("stats", {}).get("unique_graphs", 0)),
        recompiles=len(recompile_reasons),
        recompile_reasons=[_first_line(r) for r in recompile_reasons][:20],
        cudagraph_skips=int(counters.get("inductor", {}).get("cudagraph_skips", 0)),
        eager_fallback_frames=fallback,
        recompile_limit_hits=limit_count,
        recompile_limit_reasons=_unique(limit_reasons),
        # Inductor counts skips on the CPU without a reason: fewer reasons than skips is normal.
        cudagraph_skip_reasons=_unique(_first_line(r) for r in skip_reasons),
        eager_fallback_reasons=_unique(
            f"{getattr(m, 'fail_type', '')}: {_one_line(str(getattr(m, 'fail_reason', '') or ''))}"
            for m in fell_back),
    )


def reset_compile_health() -> None:
    """Forget what dynamo compiled and counted in this process. A trial's own process starts
    clean; tests that compile in-process call this first (``torch._dynamo.reset()`` alone keeps
    the counters and the compilation records)."""
    import torch
    from torch._dynamo import utils

    torch._dynamo.reset()
    utils.counters.clear()
    clear = getattr(utils, "clear_compilation_metrics", None)
    if clear is not None:
        clear()


def _limit_reason(fail_reason: str, recompile_reason: str | None) -> str:
    match = _LIMIT_TYPE.search(fail_reason)
    limit = (match.group(1) or match.group(2)) if match else "recompile limit"
    return _first_line(f"{limit}: {recompile_reason}" if recompile_reason else limit)


def _unique(texts: Any, limit: int = 20) -> list[str]:
    return list(dict.fromkeys(texts))[:limit]


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]
