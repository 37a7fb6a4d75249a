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
