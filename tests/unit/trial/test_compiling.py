"""What the trial compiles (:func:`tuner.trial.compiling.compiled_model`) and the eager model it
checks against after that. Nothing is called compiled here, so nothing compiles: the real
regional compile is tests/integration/test_regional.py's."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.support.models import Block, TinyCNN, TinyStack
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialResult
from tuner.domain.workload import Workload
from tuner.trial.compiling import compiled_model, eager_model
from tuner.trial.failures import TrialStopped

REGIONAL = TrialConfig("inductor", 2, "default", False, compile_scope="regional")
STACK = Workload(model="tests.support.models:three_blocks")


def test_a_regional_config_compiles_the_blocks_in_place_and_records_them():
    model, result = TinyStack(), TrialResult(Status.OK)
    assert compiled_model(model, REGIONAL, STACK, result) is model
    assert (result.region_class, result.regions_compiled) == ("Block", 3)
    assert [name for name, m in model.named_modules()
            if getattr(m, "_compiled_call_impl", None) is not None] == [
        "blocks.0", "blocks.1", "blocks.2"]
    whole = compiled_model(model, TrialConfig("inductor", 2, "default", False), STACK,
                           TrialResult(Status.OK))
    assert whole is not model and whole._orig_mod is model  # torch.compile's wrapper


def test_a_model_without_repeated_blocks_ends_the_trial_as_a_compile_error_saying_why():
    result = TrialResult(Status.OK)
    with pytest.raises(TrialStopped) as stopped:
        compiled_model(TinyCNN(), REGIONAL, Workload(model="tests.support.models:tiny_cnn"), result)
    record = stopped.value.record
    assert record.status is Status.COMPILE_ERROR
    assert record.message == (
        "compile_scope regional: the model (TinyCNN) has no repeated blocks to compile (no "
        "nn.ModuleList or nn.Sequential of two or more blocks of one class); "
        "tests.support.models:tiny_cnn.regional_block = BlockClass names the block to compile")


class _Marked(Block):
    """A Block whose output is +100 when dynamo traces it: compiled, it differs from eager."""

    def forward(self, x):
        return super().forward(x) + (100.0 if torch.compiler.is_compiling() else 0.0)


def test_the_eager_reference_of_a_regional_model_runs_its_compiled_blocks_eagerly():
    model = nn.Sequential(_Marked(4), _Marked(4))
    x = torch.randn(2, 4)
    before = model(x)
    compiled_model(model, REGIONAL, STACK, TrialResult(Status.OK))
    assert torch.equal(eager_model(model, REGIONAL)(x), before)
