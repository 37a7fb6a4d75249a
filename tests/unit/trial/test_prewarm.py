"""Readying the device leaves the process's torch settings as a fresh process has them, so a
trial compiles under the cache keys production's ``apply()`` will look its artifacts up by."""

from __future__ import annotations

import pytest
import torch

from tuner.domain.workload import Workload
from tuner.trial import build, prewarm

MATMUL = torch.backends.cuda.matmul


@pytest.fixture
def fresh_settings():
    """A fresh process's matmul settings (fp32_precision "none", as inductor's FX-graph cache
    key reads it), put back as they were after the test."""
    saved = (MATMUL.fp32_precision, torch.backends.cudnn.fp32_precision,
             torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark)
    MATMUL.fp32_precision = "none"
    torch.backends.cudnn.fp32_precision = "none"
    yield
    (MATMUL.fp32_precision, torch.backends.cudnn.fp32_precision) = saved[:2]
    torch.set_float32_matmul_precision(saved[2])
    torch.backends.cudnn.benchmark = saved[3]


@pytest.mark.parametrize("dtype", ["bfloat16", "tf32", "float32"])
def test_readying_leaves_the_settings_inductor_keys_its_cache_on(fresh_settings, dtype):
    before = prewarm._knobs()
    assert before["backends.cuda.matmul.fp32_precision"] == "none"
    work = Workload(model="tests.support.models:tiny_cnn", device="cpu", dtype=dtype)
    model, inputs = build.build(work, 2)
    assert prewarm.warm(model, inputs, work) == ""
    # Assigning allow_tf32 its own value turned fp32_precision "none" into "ieee": the trial
    # then compiled under another FX-graph key than apply() in a fresh process.
    assert MATMUL.fp32_precision == "none"
    assert prewarm._knobs() == before
