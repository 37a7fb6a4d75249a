"""A model built before its trial, by the pre-started process that will run that trial.

While a trial runs, the process for the next one (:mod:`tuner.launch.prestart`) imports torch
and, told the study's workload and the batch size the runner expects next
(:class:`PrebuildRequest`), imports the user's module and builds the model and its inputs on the
CPU, seeded, exactly as the trial would (:func:`tuner.trial.build.build_on_host`). Only then does
it say it is ready, so the running trial's warm-up and measurement never share the machine with
the build. When its request comes, the trial moves what was built to the device instead of
building it (the row's ``prebuilt``).

What was built is used only where the trial would have built the same thing: the same workload,
and the same batch size; for a torchvision model any batch size, since its weights do not depend
on it and its inputs are drawn again from the random state the weights left. A factory's model
for another batch size is dropped (the factory makes both). A factory that touches CUDA while
building (its contract says CPU) has started CUDA in a process that waits beside another
trial's measurement: its model is dropped, the trial builds it as usual, and the row says so
(``reuse_note``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tuner.domain.workload import Workload

CUDA_NOTE = ("the factory touched CUDA while it was pre-built on the CPU (its contract says CPU): "
             "built in the trial instead")


@dataclasses.dataclass(frozen=True)
class PrebuildRequest:
    """What a pre-started process builds while it waits: the study's workload (as requests
    carry it) at one batch size; with ``warm``, the workload as the next trial most likely
    runs it, to ready the device with once built (:mod:`tuner.trial.prewarm`)."""

    workload: Workload
    batch_size: int
    warm: Workload | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {"workload": self.workload.to_dict(), "batch_size": self.batch_size}
        return data if self.warm is None else {**data, "warm": self.warm.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrebuildRequest:
        warm = data.get("warm")
        return cls(Workload.from_dict(data["workload"]), int(data["batch_size"]),
                   None if warm is None else Workload.from_dict(warm))


@dataclasses.dataclass
class Prebuilt:
    """What a pre-started process built: the model and inputs on the CPU, or why there are none."""

    request: PrebuildRequest
    model: Any = None
    inputs: tuple[Any, ...] | None = None
    rng_after_model: Any = None  # torchvision: the random state the weights left
    note: str = ""  # why there is no model
    # building (and readying the device) still going on when the trial was handed over: its build_s
    left_s: float = 0.0
    # the device was readied with the model (tuner.trial.prewarm): True; its job came first:
    # False, with ``warm_note``; the device too full to ready (tuner.trial.prewarm.room): False,
    # with ``warm_note``; not asked: None
    warmed: bool | None = None
    warm_note: str = ""
    # the device memory NVML gave this process once readied (its CUDA context, the libraries'
    # workspaces, what the allocator kept): what it holds while the trial before it measures
    warm_vram_bytes: int | None = None


def touched_cuda() -> bool:
    import torch

    return torch.cuda.is_initialized()


def prebuild(request: PrebuildRequest) -> Prebuilt:
    """Build ``request`` on the CPU; never raises (the trial builds, and reports, as usual)."""
    from tuner.trial.build import build_on_host

    try:
        model, inputs, rng = build_on_host(request.workload, request.batch_size)
    except Exception as exc:  # noqa: BLE001 - the trial's own build says what is wrong
        return Prebuilt(request, note=f"pre-building failed ({type(exc).__name__}): built in "
                                      "the trial")
    if touched_cuda():
        return Prebuilt(request, note=CUDA_NOTE)
    return Prebuilt(request, model, inputs, rng)


def warm(prebuilt: Prebuilt, job_waiting: bool) -> str:
    """Ready the device with what was built, if the request asks (``warmed``); not where the
    model is missing or its job has already come (the trial readies it, with nothing to hide
    behind). Why it failed, or "": a process where it failed must not run the trial."""
    work = prebuilt.request.warm
    if work is None or prebuilt.model is None or prebuilt.inputs is None:
        return ""
    if job_waiting:
        prebuilt.warmed, prebuilt.warm_note = False, "device not readied: the job came first"
        return ""
    from tuner.trial.prewarm import room
    from tuner.trial.prewarm import warm as run_once

    try:
        crowded = room(work)
    except Exception as exc:  # noqa: BLE001 - CUDA cannot start: the trial will say why
        return f"device not readied before the trial ({type(exc).__name__})"
    if crowded:
        prebuilt.warmed, prebuilt.warm_note = False, crowded
        return ""
    failed = run_once(prebuilt.model, prebuilt.inputs, work)
    prebuilt.warmed = not failed
    if not failed:
        from tuner.trial.device import Device

        prebuilt.warm_vram_bytes = Device(work.device).process_memory_nvml()
    return failed


def take(prebuilt: Prebuilt, workload: Workload, batch_size: int
         ) -> tuple[tuple[Any, tuple[Any, ...]] | None, str]:
    """The pre-built model and inputs, on the CPU, if they are what the trial of ``workload``
    (the request's) at ``batch_size`` would build, with a note where they are not. Either way
    the process lets go of them."""
    from tuner.trial.build import torchvision_inputs

    model, inputs, rng = prebuilt.model, prebuilt.inputs, prebuilt.rng_after_model
    prebuilt.model = prebuilt.inputs = prebuilt.rng_after_model = None
    if model is None:
        return None, prebuilt.note
    if prebuilt.request.workload != workload:
        return None, "pre-built for another workload: built in the trial"
    if prebuilt.request.batch_size != batch_size:
        if rng is None:
            return None, (f"pre-built at batch size {prebuilt.request.batch_size}, not "
                          f"{batch_size}: built in the trial")
        import torch

        torch.set_rng_state(rng)
        inputs = torchvision_inputs(workload, batch_size)
    assert inputs is not None  # prebuild() stores the model and its inputs together
    return (model, inputs), ""
