"""How the trial process classifies what went wrong."""

from __future__ import annotations

import pytest

from tests.support import ROOT


def test_a_host_out_of_memory_is_oom_not_a_compile_error():
    import torch

    from tuner.trial.failures import is_oom

    with pytest.raises(Exception) as raised:  # the CPU allocator's own error: no machine has 4 EiB
        torch.empty(2**62, dtype=torch.uint8)
    assert is_oom(raised.value), repr(raised.value)
    assert is_oom(RuntimeError("std::bad_alloc"))
    assert is_oom(OSError(12, "Cannot allocate memory"))
    assert not is_oom(RuntimeError("inductor: unsupported op"))


def test_the_noisy_flag_says_when_the_spread_is_wide():
    from tuner.domain.records import Status, TrialProtocol, TrialResult
    from tuner.trial.protocol import _fill_latency

    proto = TrialProtocol(noisy_iqr_ratio=0.10)
    steady, wide = TrialResult(status=Status.OK), TrialResult(status=Status.OK)
    _fill_latency(steady, [10.0, 10.1, 10.2, 9.9, 10.0, 10.1], 1.0, "t", proto)
    _fill_latency(wide, [10.0, 14.0, 7.0, 13.0, 8.0, 12.0], 1.0, "t", proto)
    assert steady.noisy is False and wide.noisy is True


def test_a_sticky_cuda_error_is_told_apart_from_an_oom_and_other_errors():
    import torch

    from tests.support.models import CUDA_ASSERT_TEXT
    from tuner.trial.failures import is_cuda_error, is_oom

    for text in (CUDA_ASSERT_TEXT, "CUDA error: an illegal memory access was encountered",
                 "Triton Error [CUDA]: unspecified launch failure"):
        assert is_cuda_error(RuntimeError(text)) and not is_oom(RuntimeError(text)), text
    if hasattr(torch, "AcceleratorError"):  # what torch 2.8+ raises for them
        assert is_cuda_error(torch.AcceleratorError("CUDA driver error: launch timed out"))
    assert is_oom(RuntimeError("CUDA error: out of memory"))  # the except blocks ask is_oom first
    assert not is_cuda_error(RuntimeError("inductor: unsupported op"))
    assert not is_cuda_error(RuntimeError("Found no NVIDIA driver on your system"))


def _trial(model: str, batch_size: int, shape_schedule=(), dtype: str = "float32"):
    """One eager trial run here, in this process: what the trial process would record."""
    import time

    from tuner.domain.config import TrialConfig
    from tuner.domain.records import TrialProtocol, TrialRequest
    from tuner.domain.workload import Workload
    from tuner.trial.protocol import run_trial

    request = TrialRequest(TrialConfig("eager", batch_size),
                           Workload(model=model, device="cpu", shape_schedule=shape_schedule,
                                    dtype=dtype),
                           TrialProtocol(min_calls=5, min_seconds=0.01, warmup_max_calls=20))
    return run_trial(request, time.perf_counter())


@pytest.mark.parametrize("model, shape_schedule, dtype, where", [
    ("tests.support.models:cuda_error_when_moved", (), "float32", "building the model on the device: "),
    ("tests.support.models:cuda_error_at_batch_2", (), "bfloat16", "float32 reference call: "),
    ("tests.support.models:cuda_error_when_cast", (), "bfloat16", "casting the model to bfloat16: "),
    ("tests.support.models:cuda_error_at_batch_2", (), "float32", "eager call: "),  # the eager reference
    ("tests.support.models:cuda_error_from_call_10", (), "float32", ""),  # warm-up or steady state
    ("tests.support.models:cuda_error_at_batch_2", (1, 2), "float32", "shape schedule: "),  # bs 2 in the replay
], ids=["placing", "float32-reference", "casting", "eager-reference", "measurement",
        "shape-schedule"])
def test_a_cuda_error_is_cuda_error_in_one_line_and_its_whole_text_goes_to_stderr(
        capfd, model, shape_schedule, dtype, where):
    from tuner.domain.records import Status

    r = _trial(model, 1 if shape_schedule else 2, shape_schedule, dtype)
    assert r.status is Status.CUDA_ERROR, r.message
    assert r.message == f"{where}RuntimeError: CUDA error: device-side assert triggered"
    # CUDA's advice goes to the trial's stderr, which the runner keeps as stderr_tail.
    err = capfd.readouterr().err
    assert "For debugging consider passing CUDA_LAUNCH_BLOCKING=1" in err and "Traceback" in err


def test_a_device_out_of_memory_while_casting_is_oom():
    from tuner.domain.records import Status

    r = _trial("tests.support.models:oom_when_cast", 2, dtype="bfloat16")
    assert r.status is Status.OOM
    assert r.message == ("casting the model to bfloat16: RuntimeError: CUDA out of memory. "
                         "Tried to allocate 2.00 GiB")


def test_a_cuda_error_wrapped_in_another_error_names_the_cuda_line(capfd):
    from tuner.domain.records import Status, TrialResult
    from tuner.trial.failures import cuda_failure

    class BackendCompilerFailed(Exception):
        pass

    wrapped = BackendCompilerFailed("backend='inductor' raised:\nRuntimeError: CUDA error: an "
                                    "illegal memory access was encountered\nCUDA kernel errors "
                                    "might be asynchronously reported at some other API call")
    r = cuda_failure(TrialResult(status=Status.OK), "", wrapped)
    assert r.status is Status.CUDA_ERROR
    assert r.message == ("BackendCompilerFailed: RuntimeError: CUDA error: an illegal memory "
                         "access was encountered")


def test_the_docs_list_every_status_a_row_can_have():
    import re

    from tuner.domain.records import Status

    page = (ROOT / "docs" / "measurement.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)` \| ", page, flags=re.MULTILINE))
    # interrupted leaves no row (docs/measurement.md says so below the table)
    assert {s.value for s in Status} - {Status.INTERRUPTED.value} <= listed


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux affinity")
def test_with_a_timing_cpu_the_steady_state_is_timed_on_that_core_and_the_row_says_so(
        monkeypatch):
    """TUNER_TIMING_CPU=N: the thread that launches runs on core N while it is timed, and
    nowhere else; afterwards it may run anywhere again. A core this process may not use is
    ignored (and the row says no core)."""
    import os

    from tuner.trial import affinity

    allowed = os.sched_getaffinity(0)
    core = max(allowed)
    seen = []
    real = affinity.timing_thread_on

    def spy(cpu):
        context = real(cpu)

        class Spy:
            def __enter__(self):
                value = context.__enter__()
                seen.append(os.sched_getaffinity(0))
                return value

            def __exit__(self, *exc):
                return context.__exit__(*exc)
        return Spy()

    from tuner.trial import host

    loop_cores = []
    real_loop = host.core_loop_ms

    def loop_spy():
        loop_cores.append(os.sched_getaffinity(0))
        return real_loop()

    monkeypatch.setattr(affinity, "timing_thread_on", spy)
    monkeypatch.setattr(host, "core_loop_ms", loop_spy)
    monkeypatch.setenv(affinity.TIMING_CPU_ENV, str(core))
    result = _trial("tests.support.models:tiny_cnn", 2)
    assert result.status.value == "ok" and result.timing_cpu == core
    assert seen == [{core}] and os.sched_getaffinity(0) == allowed
    # The core's speed is taken on the core that launched: before and after the timing.
    assert loop_cores == [{core}, {core}] and result.host_loop_ms > 0
    monkeypatch.setenv(affinity.TIMING_CPU_ENV, str(max(allowed) + 1000))
    assert _trial("tests.support.models:tiny_cnn", 2).timing_cpu is None


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux affinity")
@pytest.mark.parametrize("value, said", [
    ("abc", "TUNER_TIMING_CPU='abc': give a core number or fastest, or unset it"),
    ("Fastest", "TUNER_TIMING_CPU='Fastest': give a core number or fastest"),
    ("\u00b2", "give a core number or fastest"),
    ("{past}", "TUNER_TIMING_CPU={past}: this process may not run on core {past} (it may use "),
])
def test_a_timing_cpu_that_names_no_core_stops_the_run_before_any_trial(monkeypatch, value,
                                                                        said):
    # Each trial ignored it and ran unpinned (timing_cpu None), without a word.
    import os

    from tuner.errors import UserError
    from tuner.launch.runner import LaunchSettings, make_runner

    past = str(max(os.sched_getaffinity(0)) + 1000)
    monkeypatch.setenv("TUNER_TIMING_CPU", value.format(past=past))
    with pytest.raises(UserError) as err:
        make_runner(LaunchSettings(timeout_s=60))
    assert said.format(past=past) in str(err.value)
    for fine in ("fastest", str(min(os.sched_getaffinity(0))), ""):
        monkeypatch.setenv("TUNER_TIMING_CPU", fine)
        make_runner(LaunchSettings(timeout_s=60, prestart=False)).close()


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity")
                    or len(__import__("os").sched_getaffinity(0)) < 2, reason="2 cores, Linux")
def test_timing_cpu_fastest_times_the_steady_state_on_the_core_that_ran_the_loop_fastest(
        monkeypatch):
    """TUNER_TIMING_CPU=fastest: each core the process may use runs the loop in turn; the
    steady state is timed on the fastest, and the thread is free again afterwards."""
    import os

    from tuner.trial import affinity, host

    allowed = os.sched_getaffinity(0)
    fast = min(allowed)  # the first core probed: the last one probed must not just win
    probed = []

    def loop_ms(repeats=5):
        core = os.sched_getaffinity(0)
        probed.append(core)
        return 2.0 if core == {fast} else 5.0

    monkeypatch.setattr(host, "core_loop_ms", loop_ms)
    monkeypatch.setenv(affinity.TIMING_CPU_ENV, "fastest")
    result = _trial("tests.support.models:tiny_cnn", 2)
    assert result.status.value == "ok" and result.timing_cpu == fast
    assert [{c} for c in sorted(allowed)] == probed[:len(allowed)]  # each core, one at a time
    assert result.host_loop_ms == 2.0  # taken on the core it measured on
    assert os.sched_getaffinity(0) == allowed
    # The slow cores' figures are what a core other than the fastest would show.
    monkeypatch.setattr(host, "core_loop_ms", lambda repeats=5: 5.0 if os.sched_getaffinity(0)
                        == {fast} else 2.0)
    assert _trial("tests.support.models:tiny_cnn", 2).timing_cpu != fast


def test_a_failure_of_many_lines_is_one_line_in_the_row_and_whole_on_stderr(capfd):
    """An inductor error wraps the real one in lines of context: the row's message keeps the
    first and the last line, and the whole text goes to stderr (the row's stderr_tail)."""
    from tuner.domain.records import Status, TrialResult
    from tuner.trial.failures import fail

    text = ("BackendCompilerFailed: backend='inductor' raised:\n"
            "  while compiling the graph of forward\n\n"
            "RuntimeError: C++ compile error: g++ not found")
    result = fail(TrialResult(status=Status.OK), Status.COMPILE_ERROR, text)
    assert result.message == ("BackendCompilerFailed: backend='inductor' raised: ... "
                              "RuntimeError: C++ compile error: g++ not found")
    assert "while compiling the graph of forward" in capfd.readouterr().err
    assert fail(TrialResult(status=Status.OK), Status.OOM, "out of memory").message == \
        "out of memory"


def test_gpu_time_is_recorded_only_when_asked_and_a_profiler_failure_leaves_the_trial_ok(
        monkeypatch):
    """TUNER_GPU_TIME=1: the row has the GPU's own time a call; unset, the profiler never runs
    (its start-up would be every trial's overhead); where it fails the trial is still measured
    and the cell is blank."""
    from tuner.trial import contract
    from tuner.trial.device import Device

    asked = []

    def profiled(self, fn, calls=10):
        asked.append(calls)
        fn()
        return 1.25

    monkeypatch.setattr(Device, "gpu_time_ms", profiled)
    assert _trial("tests.support.models:tiny_cnn", 2).gpu_time_ms is None and asked == []
    monkeypatch.setenv(contract.GPU_TIME_ENV, "1")
    result = _trial("tests.support.models:tiny_cnn", 2)
    assert result.status.value == "ok" and result.gpu_time_ms == 1.25
    assert asked == [contract.GPU_TIME_CALLS]

    def broken(self, fn, calls=10):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(Device, "gpu_time_ms", broken)
    result = _trial("tests.support.models:tiny_cnn", 2)
    assert result.status.value == "ok" and result.gpu_time_ms is None
    assert result.latency_ms_p50 > 0


def test_there_is_no_gpu_time_off_cuda():
    from tuner.trial.device import Device

    assert Device("cpu").gpu_time_ms(lambda: None, 10) is None


def test_an_eager_output_of_nan_alone_is_unchecked_and_says_so():
    # Nothing finite to compare: correctness unknown, and the note says why (the report quotes
    # it); with some finite values left, the check compares those.
    import torch

    from tuner.trial.checks import compare_outputs

    nan = torch.full((2, 4), float("nan"))
    check = compare_outputs(nan.clone(), nan, "float32")
    assert check.correct is None
    assert check.note == "no finite output values to compare: eager gives 8 NaN values"
    some = torch.tensor([[1.0, float("nan")]])
    check = compare_outputs(some.clone(), some, "float32")
    assert check.correct is True
    assert check.note == "eager output has 1 NaN values (compared NaN-aware)"


def test_an_eager_output_that_is_one_value_everywhere_says_the_check_shows_little():
    # A ViT whose classifier head starts at zero gives its bias for every input: a compiled
    # config that computed anything before the head would still match it.
    import torch

    from tuner.trial.checks import compare_outputs

    zeros = torch.zeros(4, 10)
    check = compare_outputs(zeros.clone(), zeros, "bfloat16")
    assert check.correct is True and check.max_abs_error == 0.0
    assert check.note == ("eager's output is 0 everywhere, so the check against it shows little "
                          "(does a layer start at zero?)")
    varied = torch.arange(40.0).reshape(4, 10)
    assert compare_outputs(varied.clone(), varied, "float32").note == ""


def test_a_torchvision_vit_built_with_random_weights_gives_outputs_that_vary():
    # torchvision starts the ViTs' head at zero: their output was 0 for every input, and every
    # row of a vit study had max_abs_error 0.
    import torch

    from tuner.domain.workload import Workload
    from tuner.trial.build import build_on_host

    model, inputs, _ = build_on_host(Workload(model="vit_b_16", device="cpu"), 2)
    with torch.no_grad():
        out = model(*inputs)
    assert out.std() > 0 and not torch.equal(out[0], out[1])
    assert float(model.heads.head.weight.detach().std()) == pytest.approx(0.02, rel=0.1)
    assert not model.class_token.any()  # only the layers' weights: as torchvision has it
