"""The hardware and software a measurement was made on.

Taken inside the trial process (the search process never touches CUDA) and stored on every
Parquet row and in the file metadata, so two studies can be compared from their files alone.
"""

from __future__ import annotations

import platform
import socket
from typing import Any

FIELDS = ("device_kind", "gpu_name", "gpu_compute_capability", "gpu_memory_bytes", "driver",
          "cuda", "torch", "triton", "torchvision", "python", "tuner", "host", "cpu")


def collect(device: str) -> dict[str, Any]:
    """Fingerprint of this process's machine; GPU fields are ``None`` on the CPU."""
    import torch

    import tuner

    fp: dict[str, Any] = dict.fromkeys(FIELDS)
    fp.update(
        device_kind="cuda" if device.startswith("cuda") else "cpu",
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=platform.python_version(),
        tuner=tuner.__version__,
        host=socket.gethostname(),
        cpu=_cpu_name(),
        triton=_version("triton"),
        torchvision=_version("torchvision"),
    )
    if fp["device_kind"] == "cuda":
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        fp.update(gpu_name=props.name, gpu_compute_capability=f"{props.major}.{props.minor}",
                  gpu_memory_bytes=int(props.total_memory), driver=_driver_version())
    return fp


def describe(fp: dict[str, Any]) -> str:
    """One line for humans: ``NVIDIA H200 (sm 9.0), torch 2.11.0, CUDA 13.0``."""
    if fp.get("device_kind") == "cuda":
        where = f"{fp.get('gpu_name')} (cc {fp.get('gpu_compute_capability')})"
    else:
        where = f"CPU {fp.get('cpu') or ''}".strip()
    extra = f", CUDA {fp['cuda']}" if fp.get("cuda") and fp.get("device_kind") == "cuda" else ""
    return f"{where}, torch {fp.get('torch')}{extra}, host {fp.get('host')}"


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - NVML is optional; fall back to the kernel module's file
        try:
            with open("/proc/driver/nvidia/version") as f:
                first = f.readline()
            return next((w for w in first.split() if w[:1].isdigit() and "." in w), None)
        except OSError:
            return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
