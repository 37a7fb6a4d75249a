"""Which GPUs a process sees, and the environment that shows a trial only one."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from tuner.domain.workload import CUDA_DEVICE
from tuner.errors import UserError


def visible_gpus() -> int:
    """How many CUDA GPUs torch sees here (after CUDA_VISIBLE_DEVICES); 0 without CUDA.
    Counting does not create a CUDA context."""
    import torch

    return torch.cuda.device_count()


# The way out where no GPU is seen: for `tuner search`, which has --device, and for the commands
# that join a study made for CUDA (worker, confirm), which cannot change its device.
NO_GPU_FIX = "use --device cpu, or run on a machine with an NVIDIA driver and a CUDA build of torch"
NO_GPU_FIX_JOINED = ("run it on a machine with a GPU (an NVIDIA driver and a CUDA build of "
                     "torch), or make a new study with `tuner search --device cpu`")


def check_device(device: str, where: str, fix: str = NO_GPU_FIX) -> None:
    """A one-line error, before any trial, for a CUDA device this process cannot see: without
    it every trial would start, crash on the missing driver, and the search would exit 0.
    ``where`` names what asked for the device (``--device cuda``, ``study 'x' runs on cuda``);
    ``fix`` says what to do with no GPU, in the options of the command that asked. The GPUs are
    counted (which imports torch, seconds) only for a CUDA device."""
    if not re.fullmatch(CUDA_DEVICE, device):
        return  # cpu, or a name validate() reports as unknown
    available = visible_gpus()
    if available == 0:
        raise UserError(f"{where}, but torch sees no CUDA GPU on this machine "
                        f"(torch.cuda.is_available() is False): {fix}")
    index = int(device.partition(":")[2] or 0)
    if index >= available:
        raise UserError(f"{where}, but there is no GPU {index}: torch sees {available} "
                        f"(cuda:0-cuda:{available - 1})")


def check_worker_gpu(study: str, device: str, gpu: int | None) -> None:
    """A one-line error for a worker (``tuner worker``) whose study or ``--gpu`` this host
    cannot serve. It imports torch to count the GPUs: a fleet's workers skip it, their parent
    checked."""
    check_device(device, f"study {study!r} runs on {device}", NO_GPU_FIX_JOINED)
    if gpu is not None:
        if device != "cuda":
            raise UserError(f"study {study!r} runs on {device}; --gpu shows a worker's trials "
                            "one GPU, as cuda: drop --gpu" + (
                                " (or make a study with `tuner search --device cuda`)"
                                if device.startswith("cuda") else ""))
        choose_gpus(str(gpu), visible_gpus())  # a one-line error for a GPU that is not there


def listed_gpus(text: str) -> list[int] | None:
    """``--gpus`` as the indices it lists (``0,1``), in order, without counting the GPUs (which
    imports torch, seconds); None for ``all``. :func:`choose_gpus` checks them against the GPUs
    there are."""
    text = text.strip().lower()
    if text == "all":
        return None
    gpus: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()):  # "²".isdigit(), but int("²") fails
            raise UserError(f"--gpus {text!r}: give GPU indices such as 0,1, or all")
        if int(item) not in gpus:
            gpus.append(int(item))
    return gpus


def choose_gpus(text: str, available: int) -> list[int]:
    """``--gpus`` as GPU indices: ``all``, or a comma-separated list such as ``0,1``."""
    if available == 0:
        raise UserError("--gpus needs CUDA GPUs and torch sees none on this machine: "
                        "drop --gpus to search on the CPU")
    listed = listed_gpus(text)
    if listed is None:
        return list(range(available))
    for gpu in listed:
        if gpu >= available:
            raise UserError(f"--gpus: there is no GPU {gpu}; torch sees {available} "
                            f"(0-{available - 1})")
    return listed


def pin(gpu: int, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment that shows a trial only GPU ``gpu``, counted among the GPUs this process
    sees: an existing CUDA_VISIBLE_DEVICES (indices or UUIDs) is respected."""
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return {"CUDA_VISIBLE_DEVICES": str(gpu)}
    visible = [v.strip() for v in environ["CUDA_VISIBLE_DEVICES"].split(",") if v.strip()]
    if gpu >= len(visible):
        raise UserError(f"--gpu {gpu}: CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']!r} "
                        f"shows this process {len(visible)} GPU(s)")
    return {"CUDA_VISIBLE_DEVICES": visible[gpu]}
