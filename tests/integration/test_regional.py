"""Regional compilation for real on the CPU: a trial process that compiles each of a tiny
model's three identical blocks (one compiled graph, reused), and ``Recommendation.apply`` of a
regional config compiling those blocks and nothing else."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.support.models import TinyStack
from tests.support.synthetic import write_study
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.workload import Workload
from tuner.launch.runner import ProcessRunner
from tuner.trial.health import reset_compile_health
from tuner.use.recommend import recommend

pytestmark = pytest.mark.slow
QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20)
STACK = Workload(model="tests.support.models:three_blocks", device="cpu")


def test_a_regional_trial_compiles_each_block_and_matches_eager(tmp_path):
    config = TrialConfig("inductor", 2, "default", False, compile_scope="regional")
    r = ProcessRunner(timeout_s=240).run(TrialRequest(config, STACK, QUICK), tmp_path)
    assert r.status is Status.OK, r.stderr_tail
    assert r.correct is True and r.max_abs_error is not None
    assert (r.region_class, r.regions_compiled) == ("Block", 3)
    # One graph for three blocks: torch compiled the block once and reused it.
    assert r.unique_graphs == 1 and r.graph_breaks == 0 and r.ran_compiled is True
    assert r.compile_s_cold > 0 and r.cache_start == "cold" and r.latency_ms_p50 > 0


def test_apply_of_a_regional_recommendation_compiles_only_the_blocks(tmp_path):
    # aot_eager: a real dynamo compile, without inductor's code generation (seconds)
    regional = TrialConfig("aot_eager", 1, None, False, compile_scope="regional")
    study = write_study(tmp_path, "stack", workload=STACK, trial_configs=[
        TrialConfig("eager", 1), regional],
        changes={regional.key: {"regions_compiled": 3, "latency_ms_p50": 1.0}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # measured by the fake runner on its made-up machine
        rec = recommend(study)
    assert rec.config == regional
    model = TinyStack().eval()
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        expected = model(x)
        reset_compile_health()
        applied = rec.apply(model)
        got = applied(x)
    from torch._dynamo.utils import counters

    assert applied is model  # compiled in place, the rest of it eager
    compiled = [name for name, m in model.named_modules()
                if getattr(m, "_compiled_call_impl", None) is not None]
    assert compiled == ["blocks.0", "blocks.1", "blocks.2"]
    # dynamo compiled one frame, the block's forward, once for the three of them
    assert counters["frames"]["ok"] == 1 and counters["stats"]["unique_graphs"] == 1
    assert torch.allclose(got, expected, atol=1e-6)
