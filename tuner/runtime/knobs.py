"""The process-wide torch settings a study's workload asks for, set before compiling: by the
trial process and by production code (:meth:`tuner.Recommendation.apply`) alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuner.domain.workload import Workload


def apply_global_knobs(workload: Workload) -> None:
    """Process-wide settings that must be in place before compiling (and in production):
    cudnn.benchmark on CUDA; for tf32, TF32 matmuls (and convolutions on CUDA). Other
    precisions leave the matmul precision as it is (a fresh trial process: "highest")."""
    import torch

    if workload.device.startswith("cuda"):
        torch.backends.cudnn.benchmark = workload.cudnn_benchmark
    if workload.dtype == "tf32":
        torch.set_float32_matmul_precision("high")
        if workload.device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
