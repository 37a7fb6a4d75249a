"""Trial overhead: eager references kept and reused across trials, models built by the
pre-started process, the phases a row records, the search's own time between trials, and
inductor's compile workers shared out among a fleet's workers."""

from __future__ import annotations

import dataclasses
import time

import pandas as pd
import pytest
import torch

from tests.support import workers
from tuner.data import files
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.launch import runner as runners
from tuner.launch.runner import LaunchSettings, ProcessRunner
from tuner.study import fleet as fleets
from tuner.study.search import Search
from tuner.study.spec import StudySpec
from tuner.trial import build, prebuild, prewarm, reference
from tuner.trial.device import Device
from tuner.trial.protocol import run_trial

QUICK = TrialProtocol(min_calls=5, min_seconds=0.01, warmup_max_calls=20)
TINY = Workload(model="tests.support.models:tiny_cnn", device="cpu")


def trial(config: TrialConfig, workload: Workload = TINY, references=None, prebuilt=None):
    """One trial run here, in this process: what the trial process would record."""
    request = TrialRequest(config, workload, QUICK,
                           references=None if references is None else str(references))
    return run_trial(request, time.perf_counter(), prebuilt)


# -- eager references kept in the study folder ---------------------------------------------------
def test_the_second_trial_of_a_batch_size_and_precision_reuses_the_first_ones_reference(tmp_path):
    config = TrialConfig("eager", 2, dtype="bfloat16")
    first, second = trial(config, references=tmp_path), trial(config, references=tmp_path)
    key = reference.key(config.applied_to(TINY), 2, first.fingerprint)
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.pt"]
    assert (first.reference_reused, second.reference_reused) == (False, True)
    for r in (first, second):
        assert r.status is Status.OK and r.correct is True and r.eager_reference_s >= 0
    # The same FLOPs, eager time and error against float32, without computing them again.
    assert second.flops_per_call == first.flops_per_call > 0
    assert second.eager_reference_ms == first.eager_reference_ms
    assert second.max_abs_error_vs_fp32 == first.max_abs_error_vs_fp32 > 0
    # Another precision is another reference; no study folder, nothing kept.
    assert trial(TrialConfig("eager", 2), references=tmp_path).reference_reused is False
    assert trial(config).reference_reused is None and len(list(tmp_path.iterdir())) == 2


def test_a_reference_made_from_other_weights_or_inputs_is_computed_again(tmp_path):
    config = TrialConfig("eager", 2)
    trial(config, references=tmp_path)
    (path,) = tmp_path.iterdir()
    kept = torch.load(path, weights_only=True)
    kept["checksum"][-1] += 1.0  # as if the factory now drew other inputs
    torch.save(kept, path)
    again = trial(config, references=tmp_path)
    assert again.reference_reused is False and again.status is Status.OK
    assert again.reuse_note.startswith("weights or inputs differ")
    assert trial(config, references=tmp_path).reference_reused is True  # kept afresh


def test_the_reference_key_changes_with_whatever_changes_the_eager_output():
    fp = {"torch": "2.11.0", "cuda": "13.0", "gpu_name": "NVIDIA H200"}
    work = Workload(model="resnet18", device="cuda")
    key = reference.key(work, 8, fp)
    assert key.startswith("bs8-float32-") and key == reference.key(work, 8, dict(fp))
    others = [reference.key(work, 16, fp), reference.key(work, 8, {**fp, "torch": "2.12.0"}),
              reference.key(work, 8, {**fp, "gpu_name": "NVIDIA A100"}),
              *(reference.key(Workload(model="resnet18", device="cuda", **change), 8, fp)
                for change in ({"dtype": "bfloat16"}, {"channels_last": True},
                               {"cudnn_benchmark": False}, {"image_size": 64}, {"seed": 1}))]
    assert len({key, *others}) == len(others) + 1


# -- models built by the pre-started process --------------------------------------------------
def test_a_prebuilt_model_is_exactly_what_the_trial_would_build(tmp_path):
    work = Workload(model="resnet18", device="cpu", image_size=32)
    for made_for, asked in ((4, 4), (1, 4)):  # a torchvision model serves any batch size
        made, note = prebuild.take(prebuild.prebuild(prebuild.PrebuildRequest(work, made_for)),
                                   work, asked)
        model, inputs = build.to_device(work, *made)
        fresh_model, fresh_inputs = build.build_float32(work, asked)
        assert note == "" and inputs[0].shape[0] == asked
        assert all(torch.equal(a, b) for a, b in zip(inputs, fresh_inputs))
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                     fresh_model.state_dict().values()))


def test_a_pre_started_trial_with_a_prebuilt_model_records_what_a_fresh_one_does():
    config = TrialConfig("eager", 2)
    fresh = trial(config)
    prebuilt = prebuild.prebuild(prebuild.PrebuildRequest(TINY, 2))
    prebuilt.left_s = 0.25  # still building when the trial was handed over
    ahead = trial(config, prebuilt=prebuilt)
    assert (ahead.status, ahead.correct, ahead.flops_per_call) == \
        (fresh.status, fresh.correct, fresh.flops_per_call) == (Status.OK, True, fresh.flops_per_call)
    assert (fresh.prebuilt, ahead.prebuilt, ahead.reuse_note) == (None, True, "")
    assert ahead.build_s >= 0.25  # what was left of the build is the trial's build time
    assert prebuilt.model is None  # the process let go of its copy


def test_a_factory_model_prebuilt_at_another_batch_size_is_built_in_the_trial():
    r = trial(TrialConfig("eager", 2), prebuilt=prebuild.prebuild(prebuild.PrebuildRequest(TINY, 8)))
    assert r.status is Status.OK and r.correct is True and r.prebuilt is False
    assert r.reuse_note == "pre-built at batch size 8, not 2: built in the trial"


def test_a_factory_that_touches_cuda_while_prebuilt_is_built_in_the_trial(monkeypatch):
    monkeypatch.setattr(prebuild, "touched_cuda", lambda: True)  # as torch.cuda.is_initialized()
    prebuilt = prebuild.prebuild(prebuild.PrebuildRequest(TINY, 2))
    assert prebuilt.model is None and prebuilt.note == prebuild.CUDA_NOTE
    r = trial(TrialConfig("eager", 2), prebuilt=prebuilt)
    assert r.status is Status.OK and r.correct is True
    assert r.prebuilt is False and r.reuse_note == prebuild.CUDA_NOTE


def test_the_runner_prebuilds_the_batch_size_it_ran_least_recently():
    runner = ProcessRunner(timeout_s=10, prestart=True)
    guesses = [runner._next_build(TrialRequest(TrialConfig("eager", bs), TINY)).batch_size
               for bs in (1, 32, 1, 32, 8, 1)]
    assert guesses == [1, 1, 32, 1, 1, 32]


@pytest.mark.slow
def test_pre_started_processes_get_prebuilt_models_and_every_phase_is_recorded(tmp_path,
                                                                              monkeypatch):
    refs = str(tmp_path / "references")
    request = TrialRequest(TrialConfig("eager", 2), TINY, QUICK, references=refs)
    runner = ProcessRunner(timeout_s=240, prestart=True)
    monkeypatch.setattr(runners.prewarm, "expected", lambda config, work: work)
    try:
        first, second = (runner.run(request, tmp_path / str(n)) for n in range(2))
    finally:
        runner.close()
    fresh = ProcessRunner(timeout_s=240).run(request, tmp_path / "fresh")
    for r in (first, second, fresh):
        assert r.status is Status.OK and r.correct is True, r.stderr_tail
        assert r.launch_s >= 0 and r.eager_reference_s >= 0 and r.process_s > r.import_s
        assert r.wall_s >= r.launch_s + r.process_s
    assert (first.prebuilt, second.prebuilt, fresh.prebuilt) == (None, True, None)
    assert (first.reference_reused, second.reference_reused) == (False, True)
    # The device is readied on CUDA only (tuner.trial.prewarm); asked here, the CPU is used.
    assert (first.prewarmed, second.prewarmed, fresh.prewarmed) == (None, True, None)


# -- the device readied by the pre-started process --------------------------------------------
GPU_WORK = Workload(model="resnet50", device="cuda")


def test_asked_the_next_process_readies_the_device_beside_a_compile_that_does_not_time_kernels(
        monkeypatch):
    monkeypatch.setenv(prewarm.PREWARM_ENV, "1")
    runner = ProcessRunner(timeout_s=10, prestart=True)

    def warm(config, workload=GPU_WORK):
        return runner._next_build(TrialRequest(config, workload)).warm

    default = TrialConfig("inductor", 8, "default", False, dtype="bfloat16", channels_last=True)
    # In the precision and memory format of the trial beside it: the next one's most likely.
    assert warm(default) == Workload(model="resnet50", device="cuda", dtype="bfloat16",
                                     channels_last=True)
    request = prebuild.PrebuildRequest(GPU_WORK, 8, warm=warm(default))
    assert prebuild.PrebuildRequest.from_dict(request.to_dict()) == request
    assert warm(TrialConfig("inductor", 8, "reduce-overhead", False)) == GPU_WORK
    # Not beside a compile that times kernels on the GPU, nor beside an eager trial (nothing to
    # hide behind), nor on the CPU.
    assert warm(TrialConfig("inductor", 8, "max-autotune-no-cudagraphs", False)) is None
    assert warm(TrialConfig("inductor", 8, "default", False,
                            options={"coordinate_descent_tuning": True})) is None
    assert warm(TrialConfig("inductor", 8, "default", False,
                            options={"coordinate_descent_tuning": False})) == GPU_WORK
    assert warm(TrialConfig("eager", 8)) is None
    assert warm(TrialConfig("inductor", 8, "default", False), TINY) is None
    # Not where the search varies cudnn.benchmark: a cuDNN plan kept with it off would serve a
    # next trial that has it on.
    assert warm(TrialConfig("inductor", 8, "default", False, cudnn_benchmark=True)) is None
    # On unless told not to (TUNER_PREWARM=0): the GPU's work of a readied trial was the
    # same as its control's (benchmarks/prewarm_fidelity.py measures it).
    monkeypatch.delenv(prewarm.PREWARM_ENV)
    assert warm(default) == dataclasses.replace(GPU_WORK, dtype="bfloat16", channels_last=True)
    monkeypatch.setenv(prewarm.PREWARM_ENV, "0")
    assert warm(default) is None


def test_the_device_is_readied_only_while_half_its_memory_is_free(monkeypatch):
    """The trial beside may need far more than it holds while it compiles: a crowded device is
    not readied (the trial says why, and the process keeps its place), a roomy one is."""
    gib = 2**30
    assert prewarm.room(GPU_WORK, lambda device: (100 * gib, 140 * gib)) == ""
    assert prewarm.room(GPU_WORK, lambda device: (30 * gib, 140 * gib)) == (
        "device not readied: 30.0 of 140.0 GiB free beside the trial before it (under 50%)")
    assert prewarm.room(TINY, lambda device: (0, 1)) == ""  # the CPU: nothing to guard

    model, inputs, _ = build.build_on_host(TINY, 2)
    ran = []
    monkeypatch.setattr(prewarm, "warm", lambda *a: ran.append(a) or "")
    # what NVML gives the process once readied: the trial it runs next records it
    monkeypatch.setattr(Device, "process_memory_nvml", lambda self: 600 * 2**20)
    for note in ("device not readied: crowded", ""):
        monkeypatch.setattr(prewarm, "room", lambda work, note=note: note)
        built = prebuild.Prebuilt(prebuild.PrebuildRequest(TINY, 2, warm=TINY), model, inputs, None)
        assert prebuild.warm(built, job_waiting=False) == ""  # no fresh start either way
        assert (built.warmed, built.warm_note) == ((False, note) if note else (True, ""))
        assert built.warm_vram_bytes == (None if note else 600 * 2**20)
        r = trial(TrialConfig("eager", 2), prebuilt=built)
        assert r.prewarmed is built.warmed and r.prewarm_vram_bytes_nvml == built.warm_vram_bytes
    assert len(ran) == 1


def test_readying_the_device_leaves_the_model_and_the_process_settings_as_they_were():
    model, inputs, _ = build.build_on_host(TINY, 2)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    torch.set_float32_matmul_precision("highest")
    for dtype in ("bfloat16", "tf32"):
        work = Workload(model=TINY.model, device="cpu", dtype=dtype, channels_last=True)
        assert prewarm.warm(model, inputs, work) == ""
        assert torch.get_float32_matmul_precision() == "highest"  # tf32 set "high" meanwhile
    after = model.state_dict()
    assert all(torch.equal(before[n], after[n]) and after[n].dtype == before[n].dtype
               and after[n].is_contiguous() for n in before)


def test_a_device_not_readied_is_said_and_the_trial_readies_it_itself():
    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("broken on purpose")

    assert prewarm.warm(Broken(), (torch.ones(1),), TINY) == \
        "device not readied before the trial (RuntimeError)"
    asked = prebuild.PrebuildRequest(TINY, 2, warm=TINY)
    late = prebuild.prebuild(asked)
    prebuild.warm(late, job_waiting=True)  # its job came first: nothing to hide behind
    r = trial(TrialConfig("eager", 2), prebuilt=late)
    assert r.status is Status.OK and r.prebuilt is True and r.prewarmed is False
    assert r.reuse_note == "device not readied: the job came first"
    unasked = prebuild.prebuild(prebuild.PrebuildRequest(TINY, 2))
    prebuild.warm(unasked, job_waiting=False)
    assert trial(TrialConfig("eager", 2), prebuilt=unasked).prewarmed is None


@pytest.mark.slow
def test_a_process_whose_readying_failed_starts_afresh_and_its_trial_runs_clean(tmp_path):
    """The readying trips what a device-side assert raises (at batch size 2, the size it was
    built for): the process replaces itself with a fresh one, which runs the trial at batch
    size 1 with nothing built ahead, as a fresh process would."""
    work = Workload(model="tests.support.models:cuda_error_at_batch_2", device="cpu")
    runner = ProcessRunner(timeout_s=240, prestart=True)
    try:
        runner.start_spare(prebuild.PrebuildRequest(work, 2, warm=work))
        runner._spare.let_build()  # no trial beside it
        # The job only once the process is ready (here: started afresh and imported), or
        # it would find its job waiting and not ready the device at all.
        deadline = time.monotonic() + 200
        while not runner._spare.ready.exists():
            assert time.monotonic() < deadline, "the pre-started process never got ready"
            time.sleep(0.01)
        r = runner.run(TrialRequest(TrialConfig("eager", 1), work, QUICK), tmp_path)
    finally:
        runner.close()
    assert r.status is Status.OK and r.correct is True, r.stderr_tail
    assert r.prestarted is True and (r.prebuilt, r.prewarmed) == (None, None)
    assert "device not readied before the trial (RuntimeError); this process starts afresh" in \
        (tmp_path / "trial.log").read_text()


# -- the search's own time between trials ----------------------------------------------------
def test_each_trial_after_the_first_records_the_searchs_time_before_it(tmp_path):
    spec = StudySpec(name="s", workload=workers.WORKLOAD, space=workers.SPACE_SMALL,
                     root=tmp_path)
    fake = FakeRunner()
    Search(spec, fake).run()
    assert {r.references for r in fake.requests} == {str(tmp_path / "s" / "references")}
    df = files.read(tmp_path / "s")[0].sort_values("trial_number")
    between = df["tuner_overhead_s"].tolist()
    assert pd.isna(between[0]) and all(0 <= s < 30 for s in between[1:])


# -- inductor's compile workers, shared out among a fleet's workers ---------------------------
def test_each_worker_of_a_two_gpu_fleet_gives_its_trials_half_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(fleets.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.delenv(runners.COMPILE_THREADS_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = StudySpec(name="f", workload=workers.WORKLOAD, space=workers.SPACE_SMALL,
                     root=tmp_path)
    fleet = fleets.Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=60))
    for index, gpu in enumerate(fleet.gpus):
        plan = fleets.WorkerPlan.from_json(fleet.plan(index, gpu).to_json())  # as the worker reads it
        trial_env = runners.make_runner(plan.launch)._env()  # every trial process's environment
        assert trial_env[runners.COMPILE_THREADS_ENV] == "8"
        assert trial_env["CUDA_VISIBLE_DEVICES"] == str(gpu)
    assert fleets.compile_threads(1) == 16 and fleets.compile_threads(64) == 1
    # A search on its own leaves inductor to choose; a user's own setting wins over the fleet's.
    assert runners.COMPILE_THREADS_ENV not in runners.make_runner(LaunchSettings(60)).env
    monkeypatch.setenv(runners.COMPILE_THREADS_ENV, "3")
    assert runners.make_runner(fleet.plan(0, 0).launch)._env()[runners.COMPILE_THREADS_ENV] == "3"
