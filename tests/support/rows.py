"""Made-up trial results (a finished one, a failed one) and the Parquet rows they become."""

from __future__ import annotations

import pandas as pd

from tuner.data import rows as data_rows
from tuner.data.rows import trial_row
from tuner.domain.records import Status, TrialResult
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload

WORKLOAD = Workload(model="resnet18", device="cuda")
FINGERPRINT = {"device_kind": "cuda", "gpu_name": "NVIDIA H200", "gpu_compute_capability": "9.0",
               "gpu_memory_bytes": 150_000_000_000, "driver": "580.1", "cuda": "13.0",
               "torch": "2.11.0", "triton": "3.5.0", "torchvision": "0.26.0", "python": "3.12.3",
               "tuner": "0.1.0", "host": "gpu-box", "cpu": "Xeon"}


def ok(p50: float, compile_s: float = 15.0, warmup_s: float = 1.0, vram: int = 2**30,
       correct: bool | None = True, stream: float | None = None) -> TrialResult:
    """A finished trial; back to back as fast as per request unless ``stream`` says."""
    return TrialResult(status=Status.OK, latency_ms_p50=p50, compile_s_cold=compile_s,
                       warmup_s=warmup_s, vram_bytes_steady_reserved=vram, correct=correct,
                       stream_ms_p50=p50 if stream is None else stream, fingerprint=FINGERPRINT)


def failed(status: Status = Status.COMPILE_ERROR) -> TrialResult:
    return TrialResult.failure(status, "it broke", stderr_tail="Traceback ...",
                               fingerprint=FINGERPRINT)


def frame(*trials: tuple[TrialConfig, TrialResult]) -> pd.DataFrame:
    return data_rows.frame(trial_row("s", i, config, WORKLOAD, result)
                         for i, (config, result) in enumerate(trials))


EAGER1, EAGER8 = TrialConfig("eager", 1), TrialConfig("eager", 8)


def inductor(bs: int, mode: str = "default", dynamic: bool | None = False) -> TrialConfig:
    return TrialConfig("inductor", bs, mode, dynamic)
