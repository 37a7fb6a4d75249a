"""``Recommendation.apply`` of a regional config, where it decides without compiling: the model
must have the blocks the study compiled (the compile itself: tests/integration/test_regional.py)."""

from __future__ import annotations

import warnings

import pytest

from tests.support.models import TinyCNN
from tests.support.synthetic import write_study
from tuner.domain.config import TrialConfig
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.use.recommend import recommend


def test_apply_refuses_a_model_without_the_blocks_the_study_compiled(tmp_path):
    regional = TrialConfig("inductor", 1, "default", False, compile_scope="regional")
    study = write_study(tmp_path, "stack", workload=Workload(
        model="tests.support.models:three_blocks", device="cpu"),
        trial_configs=[TrialConfig("eager", 1), regional])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # measured by the fake runner on its made-up machine
        rec = recommend(study)
    assert rec.config == regional
    model = TinyCNN().eval()
    with pytest.raises(UserError) as exc:
        rec.apply(model)
    assert str(exc.value) == (
        "apply: study 'stack' compiled the blocks of its model regionally, but the model "
        "(TinyCNN) has no submodule of class Block to compile regionally: pass the model the "
        "study measured")
    assert all(getattr(m, "_compiled_call_impl", None) is None for m in model.modules())
