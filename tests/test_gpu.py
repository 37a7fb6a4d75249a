"""Real trials on a CUDA device (run on the H200: scripts/gpu_check.sh)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tuner.launch.runner import ProcessRunner  # noqa: E402
from tuner.spec.records import Status, TrialProtocol, TrialRequest  # noqa: E402
from tuner.spec.space import TrialConfig  # noqa: E402
from tuner.spec.workload import Workload  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

QUICK = TrialProtocol(min_calls=20, min_seconds=0.3)


def run(tmp_path, config, model="tests.models:tiny_cnn", **workload):
    wl = Workload(model=model, device="cuda", **workload)
    return ProcessRunner(timeout_s=300).run(TrialRequest(config, wl, QUICK), tmp_path)


@pytest.mark.parametrize("config", [
    TrialConfig("eager", 8),
    TrialConfig("inductor", 8, "default", False),
    TrialConfig("inductor", 8, "reduce-overhead", False),
], ids=lambda c: c.label)
def test_cuda_trial_measures_latency_and_memory(tmp_path, config):
    r = run(tmp_path, config)
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.timer == "perf_counter_sync" and r.stream_timer == "cuda_event"
    assert r.fingerprint["device_kind"] == "cuda" and r.fingerprint["gpu_name"]
    assert r.latency_ms_p50 > 0 and len(r.latency_samples_ms) >= 20
    # A request waits for its result; back to back, the next launch overlaps the GPU's work.
    assert r.stream_ms_p50 > 0 and r.stream_calls >= 20
    assert r.stream_ms_p50 <= r.latency_ms_p50 * 1.05
    for name in ("vram_bytes_baseline", "vram_bytes_compile_allocated",
                 "vram_bytes_compile_reserved", "vram_bytes_steady_allocated",
                 "vram_bytes_steady_reserved"):
        assert getattr(r, name) is not None and getattr(r, name) >= 0, name
    assert r.vram_bytes_steady_reserved >= r.vram_bytes_steady_allocated
    assert r.correct is True


def test_bf16_torchvision_model_on_cuda(tmp_path):
    r = run(tmp_path, TrialConfig("inductor", 4, "default", False), model="resnet18",
            dtype="bfloat16", image_size=64)
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.correct in (True, None)


def test_prestarted_cuda_trials_run_and_record_nvml_during_compile(tmp_path):
    """Pre-started processes (the default on CUDA) import torch without CUDA and then run
    their trial on the GPU; NVML shows the process's memory during compile and at the end."""
    runner = ProcessRunner(timeout_s=300, prestart=True)
    wl = Workload(model="tests.models:tiny_cnn", device="cuda")
    try:
        results = [runner.run(TrialRequest(config, wl, QUICK), tmp_path / str(i))
                   for i, config in enumerate([TrialConfig("eager", 8),
                                               TrialConfig("inductor", 8, "reduce-overhead", False)])]
    finally:
        runner.close()
    for r in results:
        assert r.status is Status.OK, (r.message, r.stderr_tail)
        assert r.prestarted is True and r.stream_timer == "cuda_event" and r.correct is True
        if r.vram_bytes_process_nvml is not None:  # NVML shows this machine's processes
            assert r.vram_bytes_compile_process_nvml > 0
