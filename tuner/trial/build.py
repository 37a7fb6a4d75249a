"""Build a workload in the trial process: the model and inputs on the device, seeded, knobs set."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.domain.records import NO_CUDA_FOR_FACTORY
from tuner.domain.workload import Shape, Workload, load_factory, shape_batch, tensor_dtype

if TYPE_CHECKING:
    import torch

class WorkloadError(Exception):
    """The model or its factory is broken (raised in the worker, reported as bad input)."""


def build(workload: Workload, batch_size: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Build the model and inputs on the device, seeded, in eval mode, in the workload's dtype
    and memory format.

    Raises :class:`WorkloadError` when the model or factory is broken.
    """
    return finish(workload, *build_float32(workload, batch_size))


def build_float32(workload: Workload,
                  batch_size: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model and inputs on the device in float32, contiguous: the reference precision
    (what another precision's error is measured against); :func:`finish` casts them."""
    model, inputs, _ = build_on_host(workload, batch_size)
    return to_device(workload, model, inputs)


def build_on_host(workload: Workload, batch_size: int
                  ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], torch.Tensor | None]:
    """The model (in eval mode) and inputs as the factory or torchvision makes them, on the
    CPU, seeded; for a torchvision model also the random state its weights left, from which
    :func:`torchvision_inputs` draws the inputs of any batch size (a pre-built model serves
    them all: :mod:`tuner.trial.prebuild`)."""
    import torch

    torch.manual_seed(workload.seed)
    if workload.is_factory:
        model, inputs = _call_factory(workload, batch_size)
        return model.eval(), inputs, None
    import torchvision

    try:
        model = torchvision.models.get_model(workload.model, weights=None)
    except Exception as exc:  # noqa: BLE001
        raise WorkloadError(f"cannot build {workload.model}: {type(exc).__name__}: {exc}") from exc
    after_model = torch.get_rng_state()
    vary_zero_weights(model, workload.seed)
    return model.eval(), torchvision_inputs(workload, batch_size), after_model


def vary_zero_weights(model: torch.nn.Module, seed: int) -> list[str]:
    """Draw from N(0, 0.02) each layer weight that torchvision starts at zero, and return their
    names. The ViTs start their classifier head at zero, so with random weights their output is
    its bias, the same for every input, and a compiled config's output checked against eager's
    would be checked against a constant. Their own generator: the inputs' draws stay as they
    were. What a layer's weights hold does not change what a call costs."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    varied = []
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.endswith("weight") and weight.dim() >= 2 and not weight.any():
                weight.normal_(0.0, 0.02, generator=generator)
                varied.append(name)
    return varied


def to_device(workload: Workload, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]
              ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """What :func:`build_on_host` made, on the workload's device in float32, contiguous."""
    import torch

    model = model.to(device=torch.device(workload.device), dtype=torch.float32)
    return model, place_inputs(workload, inputs, "float32", channels_last=False)


def finish(workload: Workload, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]
           ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The float32 model and inputs of :func:`build_float32` cast to the workload's dtype and
    memory format; the model in place (no second copy of its weights)."""
    import torch

    model = model.to(dtype=getattr(torch, tensor_dtype(workload.dtype)))
    if workload.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model, place_inputs(workload, inputs)


def build_inputs(workload: Workload, shape: Shape) -> tuple[torch.Tensor, ...]:
    """Inputs alone for another shape of the schedule, seeded and placed as :func:`build`
    places them; the model is not rebuilt (a factory's model is dropped)."""
    import torch

    torch.manual_seed(workload.seed)
    if workload.is_factory:
        seq_len = None if isinstance(shape, int) else shape[1]
        return place_inputs(workload, _call_factory(workload, shape_batch(shape), seq_len)[1])
    return place_inputs(workload, torchvision_inputs(workload, shape_batch(shape)))


def _call_factory(workload: Workload, batch_size: int,
                  seq_len: int | None = None) -> tuple[Any, tuple[Any, ...]]:
    factory = load_factory(workload.model, error=WorkloadError)
    try:
        made = factory(batch_size) if seq_len is None else factory(batch_size, seq_len)
    except Exception as exc:  # noqa: BLE001
        if _asked_for_missing_cuda(exc):
            raise WorkloadError(_no_cuda_message(workload, exc)) from exc
        raise WorkloadError(f"factory {workload.model} raised {type(exc).__name__}: {exc}") from exc
    except SystemExit as exc:  # the trial's record, not a worker gone without one
        raise WorkloadError(f"factory {workload.model} called sys.exit({exc.code!r}): a factory "
                            "returns (model, inputs) and leaves the process running") from None
    return _check_factory_result(workload.model, made)


def _asked_for_missing_cuda(exc: Exception) -> bool:
    """Whether a factory raised for asking for CUDA where there is none ("Found no NVIDIA
    driver", "Torch not compiled with CUDA enabled", "No CUDA GPUs are available")."""
    import torch

    text = str(exc).lower()
    return not torch.cuda.is_available() and any(said in text for said in _NO_CUDA_SAID)


# What torch says when CUDA is asked for where there is none; any error naming CUDA is not one
# (a factory's own message may mention CUDA_VISIBLE_DEVICES, say).
_NO_CUDA_SAID = ("found no nvidia driver", "torch not compiled with cuda enabled",
                 "no cuda gpus are available", "cuda driver initialization failed")


def _no_cuda_message(workload: Workload, exc: Exception) -> str:
    """The error of a factory that asked for CUDA where there is none: the same at every batch
    size, so the search stops with it (tuner.study.broken.refusal)."""
    said = str(exc).strip().split(". ")[0].splitlines()[0] if str(exc).strip() else ""
    return (f"factory {workload.model} {NO_CUDA_FOR_FACTORY} ({type(exc).__name__}: {said}): "
            "a factory returns its model and inputs on the CPU and the tuner moves them to "
            f"--device {workload.device}; nothing was measured")


def torchvision_inputs(workload: Workload, batch_size: int) -> tuple[torch.Tensor, ...]:
    """A torchvision model's inputs, drawn from the random state as it is."""
    import torch

    size = workload.image_size
    return (torch.randn(batch_size, 3, size, size),)


def place_inputs(workload: Workload, inputs: tuple[torch.Tensor, ...],
                 dtype_name: str | None = None,
                 channels_last: bool | None = None) -> tuple[torch.Tensor, ...]:
    """Move inputs to the device; cast floating-point ones to the dtype; channels_last if asked
    (4-D inputs only: the others have no such format)."""
    import torch

    device = torch.device(workload.device)
    dtype = getattr(torch, tensor_dtype(dtype_name or workload.dtype))
    channels_last = workload.channels_last if channels_last is None else channels_last

    def place(t: torch.Tensor) -> torch.Tensor:
        t = t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
        if channels_last and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        return t

    return tuple(place(t) for t in inputs)


def _check_factory_result(spec: str, made: Any) -> tuple[Any, tuple[Any, ...]]:
    import torch

    if not (isinstance(made, tuple) and len(made) == 2):
        raise WorkloadError(f"factory {spec} must return (model, inputs), got {type(made).__name__}")
    model, inputs = made
    if not isinstance(model, torch.nn.Module):
        raise WorkloadError(f"factory {spec} returned {type(model).__name__} as the model; "
                            "expected a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not (isinstance(inputs, (tuple, list)) and inputs
            and all(isinstance(t, torch.Tensor) for t in inputs)):
        raise WorkloadError(f"factory {spec} must return a tensor or a tuple of tensors as inputs")
    if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
        raise WorkloadError(f"factory {spec} returned a model with weights on the meta device "
                            "(shapes, no values: say, built under init_empty_weights or "
                            "torch.device('meta')): build it with real weights on the CPU, or "
                            "call model.to_empty(device='cpu') and initialise them")
    if any(t.is_meta for t in inputs):
        raise WorkloadError(f"factory {spec} returned inputs on the meta device (shapes, no "
                            "values): return real tensors on the CPU, e.g. torch.randn(...)")
    return model, tuple(inputs)
