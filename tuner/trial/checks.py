"""Checks of what the compiled model computes: its output against eager, and its work in FLOPs;
and the device's peak matmul rate, to put that work in proportion."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from tuner.trial.device import Device


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
def output_tensors(output: Any) -> list[Any]:
    """The tensors of a model's output, as ``torch.utils._pytree`` finds them: a tensor, or
    tuples, lists, dicts (and types registered with pytree) of them."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(output) if isinstance(t, torch.Tensor)]


def clone_output(output: Any, to_cpu: bool = False) -> Any:
    """``output`` with each tensor copied (to the CPU with ``to_cpu``): a CUDA graph's outputs
    are overwritten by its next call, and a reference must outlive the calls after it."""
    import torch
    from torch.utils._pytree import tree_map

    def copy(t: Any) -> Any:
        return t.detach().to("cpu", copy=True) if to_cpu else t.detach().clone()

    return tree_map(lambda t: copy(t) if isinstance(t, torch.Tensor) else t, output)


def unseen_output(output: Any) -> str | None:
    """Why a model's eager output cannot be checked, or None: it holds no tensor that pytree
    sees (a dict subclass or a dataclass that is not registered), so no config's output could
    be compared with it."""
    if output_tensors(output):
        return None
    return (f"its output ({type(output).__name__}) holds no tensor that torch.utils._pytree "
            "sees, so no config could be checked against eager: return a tensor, or a tuple, "
            "list or dict of them (or register the type with "
            "torch.utils._pytree.register_pytree_node)")


# tf32 keeps float16's 10-bit mantissa in matmuls, and the compiled kernels and eager's need
# not round alike: float16's tolerance.
TOLERANCE = {"float32": 1e-3, "tf32": 1e-2, "bfloat16": 3e-2, "float16": 1e-2}


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    correct: bool | None
    max_abs_error: float | None
    tolerance: float
    note: str = ""


def compare_outputs(actual: Any, expected: Any, dtype: str,
                    tolerance: float | None = None) -> OutputCheck:
    """Compiled vs eager output, NaN-aware, with a tolerance relative to the output's scale.

    NaN must sit in the same places in both, and so must each infinity, with its sign; finite
    values must agree within ``tol * max|expected|`` (absolute) plus ``tol`` (relative). An
    eager output with no finite value at all (a random bf16 ViT can do that) leaves
    correctness unknown (``None``). ``tolerance``: another than the precision's
    (:data:`TOLERANCE`).
    """
    import torch

    tol = TOLERANCE.get(dtype, 1e-3) if tolerance is None else tolerance
    got, want = output_tensors(actual), output_tensors(expected)
    if len(got) != len(want):
        return OutputCheck(False, None, tol, f"{len(got)} output tensors, eager gave {len(want)}")
    worst = 0.0
    finite_seen = False
    nan_count = 0
    values: set[float] = set()  # eager's finite values, while there are at most two
    compared = 0  # how many
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return OutputCheck(False, None, tol, f"output shape {tuple(g.shape)}, eager {tuple(w.shape)}")
        g = g.detach().float().cpu()
        w = w.detach().float().cpu()
        nan_w = torch.isnan(w)
        nan_count += int(nan_w.sum())
        if not torch.equal(nan_w, torch.isnan(g)):
            return OutputCheck(False, None, tol, "NaN in different places than eager")
        inf_w = torch.isinf(w)
        if not torch.equal(inf_w, torch.isinf(g)) or not torch.equal(g[inf_w], w[inf_w]):
            return OutputCheck(False, None, tol, "infinities in different places (or of "
                                                 "another sign) than eager")
        finite = torch.isfinite(w) & torch.isfinite(g)
        if not finite.any():
            continue
        finite_seen = True
        gw, ww = g[finite], w[finite]
        compared += ww.numel()
        if len(values) < 2:
            values |= {float(ww.min()), float(ww.max())}
        scale = float(ww.abs().max())
        err = float((gw - ww).abs().max())
        worst = max(worst, err)
        if not torch.allclose(gw, ww, rtol=tol, atol=tol * max(scale, 1e-6)):
            return OutputCheck(False, err, tol, f"max abs error {err:.3g} at output scale {scale:.3g}")
    note = f"eager output has {nan_count} NaN values (compared NaN-aware)" if nan_count else ""
    if len(values) == 1 and compared > 1:  # a model whose last layer starts at zero, say: the check shows little
        note = "; ".join(n for n in (note, (
            f"eager's output is {values.pop():g} everywhere, so the check against it shows "
            "little (does a layer start at zero?)")) if n)
    if not finite_seen:
        return OutputCheck(None, None, tol, "no finite output values to compare" + (
            f": eager gives {nan_count} NaN values" if nan_count else ""))
    return OutputCheck(True, worst, tol, note)


def max_abs_difference(actual: Any, expected: Any) -> float | None:
    """The largest absolute difference between two outputs (say, a precision's against the
    float32 eager output), over the values finite in both; None if there is nothing to compare
    (no expected output, other shapes, no finite value)."""
    import torch

    if expected is None:
        return None
    got, want = output_tensors(actual), output_tensors(expected)
    if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
        return None
    worst = None
    for g, w in zip(got, want):
        g, w = g.detach().float().cpu(), w.detach().float().cpu()
        finite = torch.isfinite(g) & torch.isfinite(w)
        if finite.any():
            err = float((g[finite] - w[finite]).abs().max())
            worst = err if worst is None else max(worst, err)
    return worst
