"""Compile health that cannot hide: each case produced for real by dynamo in this process
(recompiles, recompile-limit hits, a backend that fails under ``suppress_errors``), plus how the
counters of older torch releases are read. The trial process reads the same :func:`compile_health`.
"""

from __future__ import annotations

import time
import types

import pytest
import torch

from tuner.trial import checks, device
from tuner.trial.health import Health, compile_health, health_from, reset_compile_health

# dynamo's name for the per-frame limit: ``recompile_limit`` since torch 2.7, before that
# ``cache_size_limit``.
LIMIT = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"


@pytest.fixture
def clean_dynamo():
    reset_compile_health()
    yield
    reset_compile_health()


def sin_plus_one(x):
    return x.sin() + 1


def call_with_lengths(fn, *lengths: int) -> None:
    for n in lengths:
        fn(torch.randn(n))


@pytest.mark.slow
def test_a_shape_change_is_a_recompile_with_its_reason(clean_dynamo):
    fn = torch.compile(sin_plus_one, backend="eager", dynamic=False)
    call_with_lengths(fn, 2, 3)
    health = compile_health()
    assert health.recompiles == 1 and "size mismatch" in health.recompile_reasons[0]
    assert health.unique_graphs == 2 and health.ran_compiled
    assert health.recompile_limit_hits == 0 and health.eager_fallback_frames == 0


@pytest.mark.slow
def test_a_recompile_refused_at_the_limit_is_counted_with_its_reason(clean_dynamo):
    fn = torch.compile(sin_plus_one, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(**{LIMIT: 1}):
        call_with_lengths(fn, 2, 3, 4)
    health = compile_health()
    assert health.recompile_limit_hits == 1
    assert LIMIT in health.recompile_limit_reasons[0]
    assert "size mismatch" in health.recompile_limit_reasons[0]
    # Only the first shape was compiled; the refusal is not also counted as a failed frame.
    assert health.unique_graphs == 1 and health.eager_fallback_frames == 0


@pytest.mark.slow
def test_a_backend_that_fails_under_suppress_errors_is_a_frame_that_fell_back(clean_dynamo):
    def failing_backend(gm, example_inputs):
        raise RuntimeError("this backend is broken on purpose")

    fn = torch.compile(sin_plus_one, backend=failing_backend)
    x = torch.randn(4)
    with torch._dynamo.config.patch(suppress_errors=True):
        out = fn(x)
    assert torch.equal(out, sin_plus_one(x))  # it ran, eagerly
    health = compile_health()
    assert health.eager_fallback_frames == 1
    assert "broken on purpose" in health.eager_fallback_reasons[0]
    assert health.unique_graphs == 0 and health.ran_compiled is False


def test_reset_forgets_what_was_counted(clean_dynamo):
    torch._dynamo.utils.counters["stats"]["unique_graphs"] += 3
    reset_compile_health()
    assert compile_health() == health_from({}, [])


# -- the records of other torch releases ----------------------------------------------------------

def metric(**fields):
    return types.SimpleNamespace(**fields)


def test_limit_hits_on_an_older_torch_without_compilation_records():
    counters = {"frames": {"total": 3, "ok": 1}, "stats": {"unique_graphs": 1},
                "unimplemented": {"cache_size_limit reached": 1}}
    health = health_from(counters, [])
    assert health.recompile_limit_hits == 1
    assert health.recompile_limit_reasons == ["cache_size_limit"]
    assert health.eager_fallback_frames == 1  # the other frame that did not compile


def test_records_with_fewer_fields_and_cudagraph_skip_reasons():
    metrics = [
        metric(fail_type=None),  # a torch whose records lack most fields
        metric(fail_type="Unsupported", fail_reason="accumulated_cache_size_limit reached",
               recompile_reason="0/0: tensor 'x' size mismatch"),
        metric(fail_type=None, cudagraph_skip_reason="skipping cudagraphs due to mutated inputs"),
        metric(fail_type=None, cudagraph_skip_reason="skipping cudagraphs due to mutated inputs"),
    ]
    health = health_from({"stats": {"unique_graphs": 2}, "inductor": {"cudagraph_skips": 3}},
                         metrics)
    assert health.recompile_limit_hits == 1
    assert health.recompile_limit_reasons == [
        "accumulated_cache_size_limit: 0/0: tensor 'x' size mismatch"]
    assert health.recompiles == 1 and health.eager_fallback_frames == 0
    assert health.cudagraph_skips == 3
    assert health.cudagraph_skip_reasons == ["skipping cudagraphs due to mutated inputs"]


def test_no_compiled_graph_means_it_did_not_run_compiled():
    assert Health(0, [], 0, 0, [], 0, 0).ran_compiled is False
    assert Health(0, [], 1, 0, [], 0, 0).ran_compiled is True


@pytest.mark.slow
def test_peak_matmul_rate_is_measured_on_the_cpu():
    assert checks.peak_matmul_tflops("cpu") > 0


def test_flops_of_a_call_and_none_when_they_cannot_be_counted():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    assert checks.flops_per_call(lambda: a @ b) == 2 * 8 * 16 * 4

    def broken():
        raise RuntimeError("no")

    assert checks.flops_per_call(broken) is None
    # Nothing counted (here: elementwise only) is not a model that does no work.
    assert checks.flops_per_call(lambda: a.relu()) is None


def test_nvml_peak_keeps_the_highest_sample_while_open_and_nothing_without_cuda():
    values = iter([100, 300, 200] + [150] * 1000)
    with device.NvmlPeak(lambda: next(values), interval_s=0.001) as peak:
        deadline = time.monotonic() + 30
        while peak.peak != 300 and time.monotonic() < deadline:  # the thread samples 300
            time.sleep(0.001)
    assert peak.peak == 300
    with device.Device("cpu").nvml_peak() as none:
        pass
    assert none.peak is None
    with device.NvmlPeak(lambda: None, interval_s=0.001) as hidden:  # NVML shows no process
        pass
    assert hidden.peak is None
