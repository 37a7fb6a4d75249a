"""One quick real trial on the GPU with every optional measurement on (peak matmul, FLOPs,
CUDA graphs): proves the worker's CUDA paths in well under a minute.

    python3 scripts/gpu_smoke.py            (PYTHONPATH set as in scripts/gpu_check.sh)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tuner.launch.runner import ProcessRunner
from tuner.domain.records import TrialProtocol, TrialRequest
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload

FIELDS = ("status", "message", "latency_ms_p50", "latency_ms_p90", "compile_s_cold", "correct",
          "flops_per_call", "achieved_tflops", "peak_tflops_measured", "ran_compiled",
          "cudagraph_skips", "vram_bytes_steady_allocated", "vram_bytes_steady_reserved",
          "vram_bytes_process_nvml")

for config in (TrialConfig("inductor", 8, "reduce-overhead", False),):
    request = TrialRequest(config, Workload("tests.support.models:tiny_cnn", device="cuda"),
                           TrialProtocol(min_calls=20, min_seconds=0.3, measure_peak=True))
    result = ProcessRunner(timeout_s=120).run(request, Path(tempfile.mkdtemp()))
    print(config.label, {f: getattr(result, f, None) for f in FIELDS})
    if not result.ok:
        print(result.stderr_tail[-3000:])
