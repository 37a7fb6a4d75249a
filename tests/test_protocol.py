"""How the trial process classifies what went wrong."""

from __future__ import annotations

import pytest


def test_a_host_out_of_memory_is_oom_not_a_compile_error():
    import torch

    from tuner.trial.protocol import _is_oom

    with pytest.raises(Exception) as raised:  # the CPU allocator's own error: no machine has 4 EiB
        torch.empty(2**62, dtype=torch.uint8)
    assert _is_oom(raised.value), repr(raised.value)
    assert _is_oom(RuntimeError("std::bad_alloc"))
    assert _is_oom(OSError(12, "Cannot allocate memory"))
    assert not _is_oom(RuntimeError("inductor: unsupported op"))


def test_the_noisy_flag_says_when_the_spread_is_wide():
    from tuner.spec.records import Status, TrialProtocol, TrialResult
    from tuner.trial.protocol import _fill_latency

    proto = TrialProtocol(noisy_iqr_ratio=0.10)
    steady, wide = TrialResult(status=Status.OK), TrialResult(status=Status.OK)
    _fill_latency(steady, [10.0, 10.1, 10.2, 9.9, 10.0, 10.1], 1.0, "t", proto)
    _fill_latency(wide, [10.0, 14.0, 7.0, 13.0, 8.0, 12.0], 1.0, "t", proto)
    assert steady.noisy is False and wide.noisy is True
