"""What ``tuner check`` concludes from what its process saw, and the first call's warning in
production, without compiling: a made-up study (the fake runner) and made-up records and cache
counters. The real processes are tests/integration/test_check.py's."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest
import torch

import tuner
from tests.support.cli import invoke
from tests.support.json_contract import assert_contract
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.runtime import artifacts
from tuner.study.search import Search
from tuner.study.spec import StudySpec
from tuner.use.check import Check, CheckRecord
from tuner.use.recommend import first_call

HIT = CheckRecord(trial_number=1, label="inductor:default", device="cpu", compiled=True,
                  torch=torch.__version__, artifacts_loaded=True,
                  artifacts_entries={"inductor": 1, "aot_autograd": 1}, artifacts_load_s=0.1,
                  first_call_s=2.0, counted=True, fxgraph_hits=1, aot_hits=1, correct=True,
                  max_abs_error=1e-7, tolerance=1e-3, reference="study", latency_ms_p50=0.5,
                  calls=30)


@pytest.fixture
def rec(tmp_path):
    space = SearchSpace(backends=("eager", "inductor"), modes=("default",), dynamic=(False,),
                        batch_sizes=(1,))
    spec = StudySpec(name="fake", workload=Workload(model="resnet18", device="cpu"), space=space,
                     root=tmp_path, confirm_repeats=2)
    Search(spec, FakeRunner(torch_version=torch.__version__)).run()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = tuner.recommend(spec.directory, batch_size=1)
    return dataclasses.replace(made, mismatch=())  # the fake "ran" on a GPU: as if here


def test_a_warm_start_with_the_studys_output_passes(rec):
    found = Check(rec, HIT)
    assert found.passed and found.reasons() == []
    lines = found.lines()
    assert lines[0] == (f"study fake: trial {rec.trial_number} default at batch size "
                        "1 on cpu")
    assert lines[1].startswith(f"artifacts: {rec.artifacts_path} from ")
    assert "compile artifacts are code" in lines[1] and "written 20" in lines[1]
    assert lines[2].startswith("warm start: yes: loaded 1 aot_autograd entry, 1 inductor entry "
                               "in 0.10 s; first call: 1 graph from the cache, 0 graphs "
                               "compiled, in 2.0 s (the study's first call: cold ")
    assert lines[3] == ("output: matches the study's eager output (max abs error 1e-07, "
                        "tolerance 0.001 of the output's scale)")
    assert lines[4].startswith("latency: p50 0.500 ms per request (study ")
    # The study measured it in three processes: their range says what a difference is worth.
    p50s = [float(v) for v in rec.row["latency_ms_p50_repeats"]]
    assert len(p50s) == 3
    assert f"; its 3 processes {min(p50s):.3f}-{max(p50s):.3f} ms, this one outside them)" \
        in lines[4]
    inside = Check(rec, dataclasses.replace(HIT, latency_ms_p50=sorted(p50s)[1])).lines()[4]
    assert inside.endswith("ms, this one within them), over 30 calls")
    assert lines[-1] == "verdict: warm start and output as the study's"
    data = found.to_dict()
    assert data["passed"] is True and data["tuner_version"] == tuner.__version__
    json.dumps(data)


def test_a_miss_says_why(rec):
    said = "apply: no warm start from study 'fake': it is missing; the first call compiles cold"
    missed = dataclasses.replace(HIT, artifacts_loaded=False, artifacts_entries={},
                                 fxgraph_hits=0, fxgraph_misses=1, warnings=[said])
    found = Check(rec, missed)
    assert not found.passed and found.reasons() == [said]
    assert f"missed: {said}" in found.lines()
    assert found.lines()[-1] == "verdict: FAILED: no warm start"
    # Loaded, but the first call compiled, or dynamo compiled again later
    keys = dataclasses.replace(HIT, fxgraph_misses=1)
    assert Check(rec, keys).reasons() == [
        "the first call compiled 1 FX graph(s) after the artifacts were loaded: their cache "
        "keys did not match"]
    again = dataclasses.replace(HIT, recompiles=2, recompile_reasons=["size of L['x'] changed"])
    assert Check(rec, again).reasons() == [
        "dynamo recompiled 2 time(s) after the first call: size of L['x'] changed"]
    # Another machine than the study's is named with the miss
    elsewhere = dataclasses.replace(rec, mismatch=("measured on CPU X, torch 2.0.0, but ...",))
    assert Check(elsewhere, keys).reasons()[-1] == "measured on CPU X, torch 2.0.0, but ..."


def test_an_output_unlike_the_studys_fails(rec):
    wrong = dataclasses.replace(HIT, correct=False, reference_note="max abs error 1 at output "
                                                                    "scale 0.5")
    found = Check(rec, wrong)
    assert found.warm_started and not found.passed
    assert found.reasons() == ["the output differs from the study's eager reference: max abs "
                               "error 1 at output scale 0.5"]
    assert found.lines()[-1] == "verdict: FAILED: output not as the study's"


def test_a_process_that_wrote_nothing_fails_with_its_reason(rec):
    found = Check(rec, None, "the check process ended with exit code 1 and no record: boom")
    assert found.reasons() == ["the check process ended with exit code 1 and no record: boom"]
    assert found.to_dict()["check"] is None


def test_the_json_keeps_the_contract(rec):
    for found in (Check(rec, HIT), Check(rec, None, "no record")):
        data = found.to_dict()
        assert_contract(data)
        assert data["study"] == "fake" and data["batch_size"] == 1


def test_check_refuses_what_recommend_refuses(rec):
    result = invoke("check", str(rec.path.parent), "--max-latency-ms", "0.000001")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and "--max-latency-ms" in result.stderr


def test_the_first_call_warns_once_when_it_compiled_after_loading(monkeypatch):
    counts = iter([artifacts.CacheCounts(), artifacts.CacheCounts(fxgraph_misses=1)])
    monkeypatch.setattr(artifacts, "cache_counts", lambda: next(counts))
    model = torch.nn.Linear(4, 2)
    first_call.watch(model, "s", 2, "a.bin")
    with pytest.warns(first_call.WarmStartMissed) as caught:
        model(torch.randn(3, 4))
    assert [str(w.message) for w in caught] == [
        "first call: no warm start from study 's': it compiled 1 graph after the artifacts of "
        "a.bin were loaded: their cache keys did not match (its inputs have batch size 3, the "
        "study's config 2)"]
    assert caught[0].filename == __file__  # the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(torch.randn(3, 4))  # once: the watch ended with the first call
    assert issubclass(tuner.WarmStartMissed, tuner.MismatchWarning)
    assert issubclass(tuner.WarmStartMissed, UserWarning)


def test_a_first_call_that_found_everything_says_nothing(monkeypatch):
    counts = iter([artifacts.CacheCounts(), artifacts.CacheCounts(fxgraph_hits=1, aot_hits=1)])
    monkeypatch.setattr(artifacts, "cache_counts", lambda: next(counts))
    model = torch.nn.Linear(4, 2)
    first_call.watch(model, "s", 2, "a.bin")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(torch.randn(2, 4))
