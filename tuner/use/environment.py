"""Is this process the machine a study measured? Its GPU and its memory, driver, CUDA, triton
(which writes inductor's GPU kernels), torch and Python, checked; on the CPU, its CPU, torch and
Python."""

from __future__ import annotations

from typing import Any

from tuner.render.text import describe_fingerprint


class MismatchWarning(UserWarning):
    """What runs now differs from what the study measured (machine, torch, dtype, device)."""


# -- environment -------------------------------------------------------------------------------
def environment_mismatch(study_fp: dict[str, Any], device: str,
                         current: dict[str, Any] | None = None) -> list[str]:
    """How this process's machine and software differ from ``study_fp``; empty if they match.

    ``current`` defaults to :func:`tuner.runtime.fingerprint.collect`, called lazily: CUDA is touched
    only when the study ran on CUDA and this process has it.
    """
    if not any(v is not None for v in study_fp.values()):
        return ["the study records no fingerprint, so it cannot be checked against this machine"]
    if current is None:
        current = _current_fingerprint(device, study_fp.get("device_kind") == "cuda")
    # Python: dynamo rewrites its bytecode, which each minor version changes (3.11 vs 3.12);
    # GPU memory: one GPU name comes in several sizes, and a MIG slice is named as its GPU.
    fields = ["device_kind", "torch", "python"]
    if study_fp.get("device_kind") == "cuda" and current.get("device_kind") == "cuda":
        fields += ["gpu_name", "gpu_memory_bytes", "driver", "cuda", "triton"]
    elif study_fp.get("device_kind") != "cuda":
        fields += ["cpu"]
    differ = [f for f in fields if study_fp.get(f) is not None
              and _compared(f, study_fp.get(f)) != _compared(f, current.get(f))]
    if not differ:
        return []
    words = {"device_kind": "device", "gpu_name": "GPU", "cpu": "CPU", "python": "Python",
             "gpu_memory_bytes": "GPU memory"}
    detail = ", ".join(f"{words.get(f, f)} {_shown(f, study_fp.get(f))} vs "
                       f"{_shown(f, current.get(f))}" for f in differ)
    return [f"measured on {_where(study_fp)}, but this process runs on {_where(current)} "
            f"({detail}); the numbers may not hold here"]


def _compared(field: str, value: Any) -> Any:
    """What of a fingerprint's field counts: Python's minor version (3.12.1 is 3.12.3 to
    dynamo), the rest as recorded."""
    if field == "python" and isinstance(value, str):
        return ".".join(value.split(".")[:2])
    return value


def _shown(field: str, value: Any) -> Any:
    if field == "gpu_memory_bytes" and isinstance(value, (int, float)):
        return f"{value / 2**30:.1f} GiB"
    return value


def _current_fingerprint(device: str, study_on_cuda: bool) -> dict[str, Any]:
    import torch

    from tuner.runtime import fingerprint

    if study_on_cuda and torch.cuda.is_available():
        return fingerprint.collect(device if device.startswith("cuda") else "cuda")
    return fingerprint.collect("cpu")


def _where(fp: dict[str, Any]) -> str:
    text = describe_fingerprint(fp)
    return text + (f", driver {fp['driver']}" if fp.get("driver") else "")
