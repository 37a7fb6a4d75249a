"""Real trials on a CUDA device (run on the H200: scripts/gpu_check.sh)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.support import ROOT  # noqa: E402
from tuner.domain.records import Status, TrialProtocol, TrialRequest  # noqa: E402
from tuner.domain.space import TrialConfig  # noqa: E402
from tuner.domain.workload import Workload  # noqa: E402
from tuner.launch.runner import ProcessRunner  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

QUICK = TrialProtocol(min_calls=20, min_seconds=0.3)


def run(tmp_path, config, model="tests.support.models:tiny_cnn", **workload):
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
    # tiny_cnn is launch-bound, so there is little to overlap, and the two p50s come from
    # separate loops: on the H200 back to back read up to 8 % above (eager, 0.111 against
    # 0.103 ms, 2026-12-01). A stream time that counted each call twice would still fail.
    assert r.stream_ms_p50 > 0 and r.stream_calls >= 20
    assert r.stream_ms_p50 <= r.latency_ms_p50 * 1.25
    for name in ("vram_bytes_baseline", "vram_bytes_compile_allocated",
                 "vram_bytes_compile_reserved", "vram_bytes_steady_allocated",
                 "vram_bytes_steady_reserved"):
        assert getattr(r, name) is not None and getattr(r, name) >= 0, name
    assert r.vram_bytes_steady_reserved >= r.vram_bytes_steady_allocated
    assert r.correct is True


def test_gpu_time_is_the_kernels_own_time_below_what_a_request_waits(tmp_path, monkeypatch):
    """TUNER_GPU_TIME=1 on CUDA: the profiler's kernel time a call, positive and no more than
    the p50 a request waits (which adds the host's launches and the synchronize)."""
    from tuner.trial.contract import GPU_TIME_ENV

    monkeypatch.setenv(GPU_TIME_ENV, "1")
    r = run(tmp_path, TrialConfig("inductor", 8, "default", False))
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.gpu_time_ms is not None and 0 < r.gpu_time_ms <= r.latency_ms_p50


def test_bf16_torchvision_model_on_cuda(tmp_path):
    r = run(tmp_path, TrialConfig("inductor", 4, "default", False), model="resnet18",
            dtype="bfloat16", image_size=64)
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.correct in (True, None)


def test_prestarted_cuda_trials_run_and_record_nvml_during_compile(tmp_path, monkeypatch):
    """Pre-started processes (the default on CUDA) import torch without CUDA and then run
    their trial on the GPU; NVML shows the process's memory during compile and at the end."""
    monkeypatch.setenv("TUNER_PREWARM", "1")  # the default, whatever the caller has (tuner.trial.prewarm)
    runner = ProcessRunner(timeout_s=300, prestart=True)
    wl = Workload(model="tests.support.models:tiny_cnn", device="cuda")
    try:
        results = [runner.run(TrialRequest(config, wl, QUICK), tmp_path / str(i))
                   for i, config in enumerate([TrialConfig("eager", 8),
                                               TrialConfig("inductor", 8, "reduce-overhead", False),
                                               TrialConfig("inductor", 8, "default", False)])]
    finally:
        runner.close()
    for r in results:
        assert r.status is Status.OK, (r.message, r.stderr_tail)
        assert r.prestarted is True and r.stream_timer == "cuda_event" and r.correct is True
        if r.vram_bytes_process_nvml is not None:  # NVML shows this machine's processes
            assert r.vram_bytes_compile_process_nvml > 0
    # The second process built the model on the CPU before its request, CUDA untouched (a
    # model built with CUDA started would have been dropped, with a note).
    assert results[1].prebuilt is True and results[1].reuse_note == ""
    # The third process ran the model once on the GPU while the second trial compiled
    # (tuner.trial.prewarm); the second's was not asked to, beside an eager trial.
    assert (results[1].prewarmed, results[2].prewarmed) == (None, True), results[2].reuse_note


# -- faults at one batch size: recorded, and the other batch sizes measured ----------------------

@pytest.mark.parametrize("model, status, words", [
    ("tests.support.models:oom_at_batch_2", "oom", "out of memory"),
    ("tests.support.models:device_assert_at_batch_2", "cuda_error", "device-side assert triggered"),
], ids=["oom", "device-side-assert"])
def test_a_fault_at_one_batch_size_is_recorded_and_the_others_are_measured(tmp_path, model,
                                                                           status, words):
    """Eager at batch size 2 runs out of GPU memory, or hits a device-side assert (a gather
    index out of range), in a real CUDA kernel: that row says so in one line, batch size 2's
    inductor config is recorded as not run, and batch sizes 1 and 4 are measured, eager and
    inductor. Five trial processes, two cold compiles of a tiny model."""
    from click.testing import CliRunner

    from tuner.cli.app import main
    from tuner.data import files

    result = CliRunner().invoke(main, [
        "search", "--model", model, "--device", "cuda", "--backend", "eager,inductor",
        "--mode", "default", "--dynamic", "false", "--batch-sizes", "1,2,4", "--confirm", "0",
        "--min-seconds", "0.1", "--min-calls", "20", "--timeout", "5m", "--prestart",
        "--inductor-option", "none",
        "--studies-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "batch size 2 is skipped from here on" in result.stderr
    df, _ = files.read(tmp_path / f"models-{model.split(':')[1]}-cuda")
    rows = {(r["backend"], int(r["batch_size"])): r for _, r in df.iterrows()}
    assert sorted(rows) == sorted((b, bs) for b in ("eager", "inductor") for bs in (1, 2, 4))
    failed = rows[("eager", 2)]
    assert failed["status"] == status, (failed["message"], failed["stderr_tail"])
    assert failed["message"].startswith("eager call: ") and words in failed["message"]
    assert "\n" not in failed["message"]
    if status == "cuda_error":  # CUDA's advice is kept, beside the message
        assert "CUDA_LAUNCH_BLOCKING" in failed["stderr_tail"]
    skipped = rows[("inductor", 2)]
    assert skipped["status"] == "workload_error"
    assert skipped["message"].startswith("not run: at batch size 2 the model fails")
    for key in [(b, bs) for b in ("eager", "inductor") for bs in (1, 4)]:
        row = rows[key]
        assert row["status"] == "ok" and row["correct"], (key, row["message"], row["stderr_tail"])
        assert row["latency_ms_p50"] > 0
    assert (df[df["backend"] == "inductor"]["status"] == "ok").sum() == 2


def test_a_cuda_graph_config_on_a_shape_schedule_is_not_charged_its_recording(tmp_path):
    """reduce-overhead on a schedule of batch sizes: each new shape recompiles and records a
    CUDA graph on its first calls; its latency is taken once warm, so it stays in the order of
    the trial's own steady state, while its first call (the recompile) is counted apart."""
    from tuner.domain.workload import parse_shapes

    r = run(tmp_path, TrialConfig("inductor", 8, "reduce-overhead", False),
            shape_schedule=parse_shapes("8,32,4,32"))
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.schedule_shapes == ["8", "32", "4"]
    figures = zip(r.schedule_shapes, r.schedule_latency_ms, r.schedule_first_call_s,
                  r.schedule_shape_recompiles)
    for shape, latency_ms, first_call_s, recompiles in figures:
        assert 0 < latency_ms < 20 * r.latency_ms_p50, (shape, latency_ms, r.latency_ms_p50)
        if shape != "8":  # a new shape: its recompile and recording are not its latency
            assert recompiles >= 1
            assert first_call_s * 1e3 > 10 * latency_ms, (shape, first_call_s, latency_ms)


# -- a fleet on a real GPU -----------------------------------------------------------------------

def test_search_gpus_measures_on_the_gpu_with_its_worker_started_before_the_study(tmp_path):
    """`tuner search --gpus 0`: the worker starts (and starts its template) before the parent
    has checked the model and made the study, joins once told, and its trials run pinned to
    that GPU from processes the template forked."""
    import subprocess
    import sys

    from tuner.data import files

    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "search", "--model", "tests.support.models:tiny_cnn",
         "--backend", "eager,inductor", "--mode", "default", "--batch-sizes", "8",
         "--inductor-option", "none", "--gpus", "0", "--confirm", "0", "--min-seconds", "0.3",
         "--studies-dir", str(tmp_path), "--name", "fleet"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gpu0 " in proc.stderr and "one worker per GPU (0)" in proc.stderr
    df, meta = files.read(tmp_path / "fleet")
    assert len(df) == 2 and (df["status"] == "ok").all(), df[["config_key", "status", "message"]]
    assert df["prestarted"].all() and meta["workload"]["device"] == "cuda"


# -- a recommended CUDA-graph config in production code --------------------------------------------

def test_the_snippet_of_a_cuda_graph_config_runs_and_its_note_is_true(tmp_path):
    """`tuner recommend --format python` for reduce-overhead (studies/h200-resnet18, batch
    size 1), pasted as it is: it compiles and infers; an output kept past the next call is
    overwritten, as its note says, and a clone is not."""
    import warnings

    from tests.support.models import tiny_cnn
    from tuner.use.recommend import recommend

    study = ROOT / "studies" / "h200-resnet18"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # another torch than the study's, maybe
        rec = recommend(study, batch_size=1)
    assert rec.config.mode == "reduce-overhead" and rec.cuda_graphs
    source = rec.snippet()
    assert "cudagraph_mark_step_begin" in source
    namespace: dict = {}
    exec(compile(source, "snippet.py", "exec"), namespace)  # noqa: S102 - our own output
    model, x = tiny_cnn(1)
    model, x = model.cuda().eval(), x.cuda()
    compiled = namespace["compile_model"](model)
    with torch.no_grad():
        expected = model(x)
        kept = [namespace["infer"](compiled, x) for _ in range(3)]
        with pytest.raises(RuntimeError, match="overwritten"):
            kept[0].sum().item()
        cloned = [namespace["infer"](compiled, x).clone() for _ in range(3)]
    for out in cloned:
        torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-3)
