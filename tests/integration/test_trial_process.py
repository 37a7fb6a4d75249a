"""The worker end to end on the CPU: real processes, real torch.compile of tiny models,
and each failure kind produced for real."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tests.support.models import FAILING_BACKEND
from tests.support.processes import wait_until_gone
from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload
from tuner.launch.runner import ProcessRunner
from tuner.trial.protocol import run_trial

pytestmark = pytest.mark.slow
QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20)


def run(tmp_path, model, config, timeout_s=240, protocol=QUICK, shape_schedule=()):
    workload = Workload(model=model, device="cpu", shape_schedule=shape_schedule)
    request = TrialRequest(config, workload, protocol)
    return ProcessRunner(timeout_s=timeout_s).run(request, tmp_path)


def test_eager_trial_measures_everything(tmp_path):
    r = run(tmp_path, "tests.support.models:tiny_cnn", TrialConfig("eager", 2),
            protocol=dataclasses.replace(QUICK, measure_peak=True))
    assert r.status is Status.OK, r.stderr_tail
    assert r.import_s > 0 and r.build_s >= 0 and r.compile_s_cold > 0
    assert r.latency_ms_p50 > 0 and r.latency_ms_p90 >= r.latency_ms_p50
    assert len(r.latency_samples_ms) == r.measure_calls >= 5
    assert r.timer == "perf_counter_sync" and r.correct is True
    # Back to back as well: its own calls, timed between call starts.
    assert r.stream_ms_p50 > 0 and r.stream_ms_p90 >= r.stream_ms_p50
    assert r.stream_calls >= 5 and r.stream_timer == "perf_counter"
    assert r.host_rss_bytes_peak > 0 and r.vram_bytes_steady_reserved is None
    assert r.fingerprint["device_kind"] == "cpu" and r.fingerprint["torch"]
    assert (tmp_path / "result.json").exists()
    assert r.flops_per_call > 0 and r.peak_tflops_measured > 0  # asked for: measured
    assert r.ran_compiled is None  # nothing was to be compiled


def test_inductor_trial_compiles_and_matches_eager(tmp_path):
    r = run(tmp_path, "tests.support.models:tiny_cnn", TrialConfig("inductor", 2, "default", False))
    assert r.status is Status.OK, r.stderr_tail
    assert r.correct is True and r.max_abs_error is not None
    assert r.graph_breaks == 0 and r.unique_graphs >= 1 and r.recompiles == 0
    assert r.ran_compiled is True and r.eager_fallback_frames == 0 and r.recompile_limit_hits == 0
    assert r.flops_per_call > 0 and r.peak_tflops_measured is None  # not asked for


def test_graph_breaks_are_counted_with_reasons(tmp_path):
    r = run(tmp_path, "tests.support.models:graph_break", TrialConfig("inductor", 2, "default", False))
    assert r.status is Status.OK, r.stderr_tail
    assert r.graph_breaks >= 1 and r.graph_break_reasons
    assert r.unique_graphs >= 2


def test_broken_factory_is_a_workload_error(tmp_path):
    r = run(tmp_path, "tests.support.models:raises", TrialConfig("eager", 1))
    assert r.status is Status.WORKLOAD_ERROR
    assert "broken on purpose" in r.message


@pytest.mark.parametrize("model, said", [
    ("tests.support.models:meta_weights", "returned a model with weights on the meta device"),
    ("tests.support.models:meta_inputs", "returned inputs on the meta device"),
], ids=["weights", "inputs"])
def test_a_factory_that_returns_meta_tensors_is_a_workload_error(model, said):
    # Shapes without values (init_empty_weights): a one-line record, not a crash's traceback.
    # In this process: building fails before anything would need one of its own.
    request = TrialRequest(TrialConfig("eager", 2), Workload(model=model, device="cpu"), QUICK)
    r = run_trial(request, time.perf_counter())
    assert r.status is Status.WORKLOAD_ERROR, r.message
    assert r.message.startswith(f"factory {model} {said}")


def test_a_factory_that_calls_sys_exit_is_a_workload_error(tmp_path):
    # Was a crash, "worker exited with code 3 and no result", with nothing of why.
    r = run(tmp_path, "tests.support.models:exits", TrialConfig("eager", 1))
    assert r.status is Status.WORKLOAD_ERROR, (r.message, r.stderr_tail)
    assert r.message.startswith("factory tests.support.models:exits called sys.exit(3)")


def test_factory_returning_the_wrong_thing_is_a_workload_error(tmp_path):
    r = run(tmp_path, "tests.support.models:returns_wrong_thing", TrialConfig("eager", 1))
    assert r.status is Status.WORKLOAD_ERROR
    assert "must return (model, inputs)" in r.message


def test_process_that_aborts_is_a_crash(tmp_path):
    r = run(tmp_path, "tests.support.models:aborts", TrialConfig("eager", 1))
    assert r.status is Status.CRASH
    assert "SIGABRT" in r.message


def test_trial_past_its_deadline_is_killed_as_timeout_with_its_children(tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("TUNER_TEST_CHILD_PID_FILE", str(pid_file))
    # The process must reach the hang first (import torch, build, call): 1 s idle; 15 s, as in
    # tests/unit/launch/test_compile_budget.py, whose compile comes later still.
    r = run(tmp_path / "trial", "tests.support.models:spawns_and_hangs", TrialConfig("eager", 1),
            timeout_s=15)
    assert r.status is Status.TIMEOUT
    assert r.wall_s < 60
    # The whole process group dies: a child the trial started is not left running, orphaned.
    child = int(pid_file.read_text())
    assert wait_until_gone(child)



def test_output_that_differs_from_eager_is_wrong_result(tmp_path):
    r = run(tmp_path, "tests.support.models:differs_when_compiled",  # any backend; aot_eager is quick
            TrialConfig("aot_eager", 2, None, False))
    assert r.status is Status.WRONG_RESULT, (r.message, r.stderr_tail)
    assert r.correct is False


def test_an_infinity_only_the_compiled_output_has_is_a_wrong_result(tmp_path):
    # The finite values agree; an inf where eager is finite is still wrong.
    r = run(tmp_path, "tests.support.models:inf_when_compiled", TrialConfig("aot_eager", 2, None, False))
    assert r.status is Status.WRONG_RESULT, (r.message, r.stderr_tail)
    assert "infinities in different places" in r.message


def test_a_wrong_output_at_a_schedule_shape_is_a_wrong_result(tmp_path):
    # Right at the batch size it was built at; its recompile for batch size 4 is wrong.
    r = run(tmp_path, "tests.support.models:differs_at_other_shapes",
            TrialConfig("aot_eager", 2, None, False), shape_schedule=(2, 4, 2))
    assert r.status is Status.WRONG_RESULT, (r.message, r.stderr_tail)
    assert "at shape 4 of the schedule" in r.message and r.schedule_total_s > 0
    right = run(tmp_path / "eager", "tests.support.models:differs_at_other_shapes",
                TrialConfig("eager", 2), shape_schedule=(2, 4, 2))
    assert right.status is Status.OK, (right.message, right.stderr_tail)


@pytest.mark.parametrize("config", [TrialConfig("aot_eager", 2, None, False),
                                    TrialConfig("eager", 2)], ids=["compiled", "eager"])
def test_a_model_that_fails_in_eager_at_a_schedule_shape_is_a_workload_error(tmp_path, config):
    # Not the config's compile error: eager raises there too, so every config would.
    r = run(tmp_path, "tests.support.models:short_sequences_only", config,
            shape_schedule=((2, 32), (2, 128)))
    assert r.status is Status.WORKLOAD_ERROR, (r.message, r.stderr_tail)
    assert r.message.startswith("shape schedule: the model fails in eager at shape 2x128 of "
                                "the schedule: ValueError: sequence length 128 is more than 64")


@pytest.mark.parametrize("model, said", [
    ("tests.support.models:returns_unknown_type", "its output (_Output) holds no tensor that "
                                          "torch.utils._pytree sees"),
    ("tests.support.models:random_in_eager", "two eager calls on the same inputs give different "
                                     "outputs (max abs error"),
], ids=["unknown output type", "randomness"])
def test_a_model_whose_output_cannot_be_checked_is_a_workload_error(tmp_path, model, said):
    # Every config, eager too, would otherwise be unchecked (correct None) or a wrong result.
    r = run(tmp_path, model, TrialConfig("eager", 2))
    assert r.status is Status.WORKLOAD_ERROR, (r.message, r.stderr_tail)
    assert r.message.startswith("the model cannot be checked: ") and said in r.message
    if model.endswith("random_in_eager"):  # the tuner calls eval(): advice past it
        assert "model.eval(), which the tuner calls, does not turn off" in r.message
        assert "build the model in eval mode" not in r.message


def test_backend_that_fails_to_compile_is_a_compile_error(tmp_path):
    # A backend torch registers for its own tests: it raises while compiling a relu.
    r = run(tmp_path, "tests.support.models:tiny_cnn",
            TrialConfig("relu_compile_error_TESTING_ONLY", 2, None, False))
    assert r.status is Status.COMPILE_ERROR, (r.message, r.stderr_tail)
    assert "relu" in r.message.lower() or "relu" in r.stderr_tail.lower()


def test_backend_that_fails_under_suppress_errors_runs_eager_and_is_marked(tmp_path):
    # The factory sets suppress_errors: dynamo swallows the backend's error and runs eager.
    r = run(tmp_path, "tests.support.models:falls_back_to_eager",
            TrialConfig(FAILING_BACKEND, 2, None, False))
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.correct is True  # eager matches eager, of course
    assert r.ran_compiled is False and r.unique_graphs == 0
    assert r.eager_fallback_frames >= 1
    assert any("broken on purpose" in reason for reason in r.eager_fallback_reasons)


SCHEDULE = (1, 2, 4, 2, 1)


def test_shape_schedule_on_eager_fills_latency_per_size_without_recompiles(tmp_path):
    r = run(tmp_path, "tests.support.models:tiny_cnn", TrialConfig("eager", 2), shape_schedule=SCHEDULE)
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.schedule_batch_sizes == [1, 2, 4]
    assert len(r.schedule_latency_ms) == 3 and all(ms > 0 for ms in r.schedule_latency_ms)
    assert r.schedule_total_s > 0 and r.schedule_recompiles in (0, None)


def test_shape_schedule_recompiles_per_size_when_static_and_fewer_when_dynamic(tmp_path):
    # Recompiles are dynamo's (any backend); aot_eager spares the test inductor's C++ builds.
    static = run(tmp_path / "static", "tests.support.models:tiny_cnn",
                 TrialConfig("aot_eager", 2, None, False), shape_schedule=SCHEDULE)
    assert static.status is Status.OK, (static.message, static.stderr_tail)
    assert static.schedule_recompiles >= 2  # batch sizes 1 and 4 are new shapes
    assert static.schedule_recompile_s > 0 and static.schedule_total_s >= static.schedule_recompile_s
    assert static.schedule_batch_sizes == [1, 2, 4] and len(static.schedule_latency_ms) == 3
    dynamic = run(tmp_path / "dynamic", "tests.support.models:tiny_cnn",
                  TrialConfig("aot_eager", 2, None, True), shape_schedule=SCHEDULE)
    assert dynamic.status is Status.OK, (dynamic.message, dynamic.stderr_tail)
    print("schedule recompiles: static", static.schedule_recompiles, static.schedule_recompile_s,
          "dynamic", dynamic.schedule_recompiles, dynamic.schedule_recompile_s)
    assert dynamic.schedule_recompiles < static.schedule_recompiles


def test_shape_schedule_varies_the_sequence_length_of_a_factory_model(tmp_path):
    # Built at the factory's default length (64); 16 and 32 are new shapes for a static graph.
    r = run(tmp_path, "tuner.examples:text_encoder", TrialConfig("aot_eager", 2, None, False),
            shape_schedule=((2, 16), (2, 32), (2, 16)))
    assert r.status is Status.OK, (r.message, r.stderr_tail)
    assert r.schedule_shapes == ["2x16", "2x32"] and r.schedule_batch_sizes == [2, 2]
    assert len(r.schedule_latency_ms) == 2 and all(ms > 0 for ms in r.schedule_latency_ms)
    assert r.schedule_recompiles == 2  # one per new sequence length, none when it comes back


def test_a_cuda_error_at_one_batch_size_is_recorded_in_one_line_and_the_search_goes_on(tmp_path):
    """The eager reference at batch size 2 raises what a device-side assert raises (any device):
    that row is cuda_error with a one-line message, CUDA's advice is in its stderr_tail, and
    batch size 4, searched after it, is measured."""
    from click.testing import CliRunner

    from tuner.cli.app import main
    from tuner.data import files

    result = CliRunner().invoke(main, [
        "search", "--model", "tests.support.models:cuda_error_at_batch_2", "--device", "cpu",
        "--backend", "eager", "--batch-sizes", "2,4", "--confirm", "0", "--min-seconds", "0.05",
        "--min-calls", "5", "--timeout", "5m", "--studies-dir", str(tmp_path), "-q"])
    assert result.exit_code == 0, result.output
    line = "eager call: RuntimeError: CUDA error: device-side assert triggered"
    assert f"eager bs=2: cuda_error: {line}\n" in result.stdout
    df, _ = files.read(tmp_path / "models-cuda_error_at_batch_2-cpu")
    rows = df.set_index("batch_size")
    assert rows.loc[2, "status"] == "cuda_error" and rows.loc[2, "message"] == line
    assert "CUDA_LAUNCH_BLOCKING=1" in rows.loc[2, "stderr_tail"]
    assert rows.loc[4, "status"] == "ok" and rows.loc[4, "latency_ms_p50"] > 0


@pytest.mark.parametrize("prestart", [False, True], ids=["fresh", "prestarted"])
def test_a_gpus_workers_trial_process_is_shown_only_its_gpu(tmp_path, monkeypatch, prestart):
    """`tuner search --gpus`: the second worker's runner, made as that worker makes it, starts
    trial processes that see only the second of this process's GPUs."""
    from tests.support import workers
    from tuner.launch.runner import LaunchSettings, make_runner
    from tuner.study.fleet import Fleet
    from tuner.study.spec import StudySpec

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")  # this search is shown GPUs 4 and 6
    spec = StudySpec(name="pinned", workload=workers.WORKLOAD, space=workers.SPACE_SMALL,
                     root=tmp_path)
    fleet = Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=240, prestart=prestart))
    runner = make_runner(fleet.plan(1, fleet.gpus[1]).launch)
    try:
        # The factory raises, naming the CUDA_VISIBLE_DEVICES its trial process was given.
        r = runner.run(TrialRequest(TrialConfig("eager", 1),
                                    Workload(model="tests.support.models:reports_visible_gpus",
                                             device="cpu"), QUICK), tmp_path / "trial")
    finally:
        runner.close()
    assert r.status is Status.WORKLOAD_ERROR and r.prestarted is prestart
    assert r.message.endswith("RuntimeError: CUDA_VISIBLE_DEVICES='6'"), r.message
