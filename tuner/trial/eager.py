"""The trial's eager side, before anything compiles: the float32 output its precision's error is
measured against, its own eager output on the same inputs, eager's time and FLOPs (kept for the
next trials by :mod:`tuner.trial.reference`), and whether that output can be checked at all."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from tuner.domain.records import Status, TrialRequest, TrialResult
from tuner.trial.failures import (
    TrialStopped,
    cuda_failure,
    describe_error,
    device_failure,
    fail,
    is_cuda_error,
    is_oom,
)

if TYPE_CHECKING:
    from tuner.domain.workload import Workload
    from tuner.trial.device import Device
    from tuner.trial.reference import Reference, Store


@dataclasses.dataclass
class EagerReference:
    """What the compiled output is checked against, as eager gave it before the compile."""

    store: Store  # this workload's kept reference file
    kept: Reference | None  # what an earlier trial kept; None: this trial computes it
    float32_output: Any  # the float32 eager output, on the CPU; None: float32, or not to be had
    seconds: float  # spent on it so far (the row's eager_reference_s)
    output: Any = None  # this trial's own eager output, on its inputs


def float32_reference(request: TrialRequest, work: Workload, model, inputs,
                      result: TrialResult) -> EagerReference:
    """The float32 eager output, before the knobs (tf32) and the cast: what this precision's
    error is measured against. One eager call, only for a precision other than float32; none
    where an earlier trial kept it, with the FLOPs and eager time (tuner.trial.reference)."""
    from tuner.trial.reference import Store

    t = time.perf_counter()
    store = Store(request.references, work, request.config.batch_size, result.fingerprint)
    kept = store.load(model, inputs)
    result.reference_reused = None if request.references is None else kept is not None
    float32_output = kept.float32_outputs if kept and work.dtype != "float32" else None
    if kept is None and work.dtype != "float32":
        try:
            float32_output = _float32_output(model, inputs)
        except Exception as exc:  # noqa: BLE001 - a CUDA error: the context is lost
            raise TrialStopped(device_failure(result, "float32 reference call: ", exc)) from None
    return EagerReference(store, kept, float32_output, time.perf_counter() - t)


def eager_reference(eager: EagerReference, model, inputs, work: Workload, dev: Device,
                    result: TrialResult) -> None:
    """Eager's output on the same inputs, before anything is compiled: this trial's own, kept
    or not (it also readies the device's libraries before the first compiled call); its time
    and FLOPs, kept for the next trials where an earlier one kept none."""
    from tuner.trial import checks

    t = time.perf_counter()
    kept = eager.kept
    try:
        eager.output = checks.clone_output(model(*inputs))
        result.eager_reference_ms = kept.eager_reference_ms if kept else \
            dev.time_call_s(lambda: model(*inputs)) * 1e3
        unchecked = _uncheckable(model, inputs, eager.output, work.dtype, kept is None)
    except Exception as exc:  # noqa: BLE001
        if is_oom(exc):
            raise TrialStopped(fail(result, Status.OOM, f"eager call: {describe_error(exc)}")) from None
        if is_cuda_error(exc):
            raise TrialStopped(cuda_failure(result, "eager call: ", exc)) from None
        raise TrialStopped(fail(result, Status.WORKLOAD_ERROR,
                                f"the model fails in eager: {describe_error(exc)}")) from None
    if unchecked:
        raise TrialStopped(fail(result, Status.WORKLOAD_ERROR,
                                f"the model cannot be checked: {unchecked}"))
    # The work one call does, counted on eager (the compiled model does the same math).
    if kept is None:
        result.flops_per_call = checks.flops_per_call(lambda: model(*inputs))
        is_float32 = work.dtype == "float32"  # eager's own output is the float32 one
        eager.store.save(checks.clone_output(eager.output, to_cpu=True) if is_float32
                         else eager.float32_output, result.flops_per_call,
                         result.eager_reference_ms, is_float32=is_float32)
    else:
        result.flops_per_call = kept.flops_per_call
    result.reuse_note = "; ".join(n for n in (result.reuse_note, eager.store.note) if n)
    dev.sync()
    result.eager_reference_s = eager.seconds + time.perf_counter() - t


def _float32_output(model, inputs):
    """The eager float32 output on the CPU; None where it cannot be had (say, float32 does not
    fit where the trial's precision does): a blank cell, never a failed trial. A CUDA error
    is raised: it is sticky, so nothing after it could run on the device."""
    import torch

    from tuner.trial import checks

    try:
        with torch.no_grad():
            return checks.clone_output(model(*inputs), to_cpu=True)
    except Exception as exc:  # noqa: BLE001 - the trial itself reports what fails in its precision
        if is_cuda_error(exc) and not is_oom(exc):
            raise
        return None


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
