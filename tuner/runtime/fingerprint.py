"""The hardware and software a measurement was made on.

Taken inside the trial process (the search process never touches CUDA) and stored on every
Parquet row and in the file metadata, so two studies can be compared from their files alone.
"""

from __future__ import annotations

import platform
import socket
from typing import Any

from tuner.domain.records import FINGERPRINT_FIELDS


def collect(device: str) -> dict[str, Any]:
    """Fingerprint of this process's machine; GPU fields are ``None`` on the CPU."""
    import torch

    from tuner.version import __version__

    fp: dict[str, Any] = dict.fromkeys(FINGERPRINT_FIELDS)
    fp.update(
        device_kind="cuda" if device.startswith("cuda") else "cpu",
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=platform.python_version(),
        tuner=__version__,
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
