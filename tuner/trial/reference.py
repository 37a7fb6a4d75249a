"""What eager gives once per workload, batch size and precision, kept in the study folder.

Before it compiles, a trial computes from eager: the FLOPs of one call (under
``torch.utils.flop_counter``), one eager call's time (``eager_reference_ms``) and the float32
output: for a precision other than float32, what its error is measured against
(``max_abs_error_vs_fp32``); for float32, eager's own output, which ``tuner check`` compares a
compiled output made elsewhere with.
Every trial of the same workload, batch size and precision (and memory format and
cudnn.benchmark: everything that changes the eager output) computes the same, so the first one
keeps them in ``references/<key>.pt`` of the study (:class:`tuner.domain.layout.StudyLayout`) and
later ones load them (the row's ``reference_reused``). The key holds a hash of the workload as the
config runs it, the batch size, and the torch, torchvision and CUDA versions and the device the
file was made with; the file also holds a checksum of the model's weights and inputs, and a
trial whose own differ (a factory that changed, or draws other random numbers) computes all
again and keeps its own.

Each trial still runs eager once, on its own inputs, and compares its compiled output with that
output, exactly as without the file; that call also readies cuDNN, cuBLAS and cudnn.benchmark's
choices before the first compiled call, as it always did, so ``compile_s_cold`` keeps its meaning.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from tuner.domain.workload import Workload
from tuner.files import write_bytes_atomic

FORMAT = 1
# A float32 output larger than this is not kept (a language model's logits can be gigabytes):
# such a workload computes its reference in every trial, as before.
KEEP_MAX_BYTES = 256 * 2**20


@dataclasses.dataclass
class Reference:
    flops_per_call: int | None
    eager_reference_ms: float | None
    float32_outputs: list[Any] | None  # the float32 output's tensors, on the CPU; None: not kept


def key(work: Workload, batch_size: int, fingerprint: dict[str, Any]) -> str:
    """The file name (without ``.pt``) of ``work`` (the workload as the config runs it) at
    ``batch_size`` on the machine of ``fingerprint``: readable, then a hash of everything."""
    made_with = {name: fingerprint.get(name) for name in
                 ("torch", "torchvision", "cuda", "gpu_name", "cpu", "device_kind")}
    text = json.dumps({"workload": work.to_dict(), "batch_size": batch_size, **made_with},
                      sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    layout = "-channels_last" if work.channels_last else ""
    return f"bs{batch_size}-{work.dtype}{layout}-{digest}"


class Store:
    """One trial's reference file: :meth:`load` it, or :meth:`save` what the trial computed.
    ``folder`` None: nothing is kept (a request made without a study folder)."""

    def __init__(self, folder: str | None, work: Workload, batch_size: int,
                 fingerprint: dict[str, Any]) -> None:
        self.path = None if folder is None else Path(folder) / f"{key(work, batch_size, fingerprint)}.pt"
        self.checksum: list[float] | None = None
        self.note = ""  # why a file there was not used, or why none was kept

    def load(self, model: Any, inputs: tuple[Any, ...]) -> Reference | None:
        """The kept reference, if there is one made from these very weights and inputs."""
        if self.path is None:
            return None
        self.checksum = checksum(model, inputs)
        if not self.path.exists() or self.checksum is None:
            return None
        import torch

        try:
            data = torch.load(self.path, map_location="cpu", weights_only=True)
            if data.get("format") != FORMAT:
                return None
        except Exception as exc:  # noqa: BLE001 - a damaged file is computed again and replaced
            self.note = f"eager reference file unreadable ({type(exc).__name__}): computed again"
            return None
        if data.get("checksum") != self.checksum:
            self.note = ("weights or inputs differ from those the kept eager reference was made "
                         "from: computed again")
            return None
        return Reference(data["flops_per_call"], data["eager_reference_ms"],
                         data["float32_outputs"])

    def save(self, float32_output: Any, flops_per_call: int | None,
             eager_reference_ms: float | None, is_float32: bool) -> None:
        """Keep what this trial computed (``float32_output``: its float32 output, eager's own
        where it runs float32; None where it could not have it) for the next trials."""
        if self.path is None or self.checksum is None:
            return
        import torch
        from torch.utils._pytree import tree_leaves

        tensors = None if float32_output is None else [
            t for t in tree_leaves(float32_output) if isinstance(t, torch.Tensor)]
        size = sum(t.numel() * t.element_size() for t in tensors or [])
        if size > KEEP_MAX_BYTES:
            self.note = (f"eager reference not kept: its float32 output is {size / 2**20:.0f} "
                         f"MiB (over {KEEP_MAX_BYTES // 2**20})")
            return
        if tensors is None and not is_float32:  # float32 was not to be had: computed each time
            return
        buffer = io.BytesIO()
        torch.save({"format": FORMAT, "checksum": self.checksum, "flops_per_call": flops_per_call,
                    "eager_reference_ms": eager_reference_ms, "float32_outputs": tensors}, buffer)
        try:
            write_bytes_atomic(self.path, buffer.getvalue())
        except OSError as exc:
            self.note = f"eager reference not kept: {exc}"


def checksum(model: Any, inputs: tuple[Any, ...]) -> list[float] | None:
    """Shapes and float64 sums of every weight, buffer and input: equal where the build made the
    same model and inputs. One reduction a tensor and one copy to the CPU; None where a tensor
    cannot be summed (the reference is then neither kept nor reused)."""
    import torch

    tensors = [*model.state_dict().values(), *inputs]
    try:
        sums = torch.stack([t.detach().sum(dtype=torch.float64) for t in tensors]).cpu().tolist()
    except (RuntimeError, TypeError):
        return None
    shapes = [float(d) for t in tensors for d in (t.dim(), *t.shape)]
    return [float(len(tensors)), *shapes, *sums]
