"""Warm starts, end to end on the CPU with real compiles: finalists re-measured warm and from
saved compile artifacts, ``Recommendation.apply`` loading those artifacts in a fresh process,
``tuner check`` on the study as it is, without its artifacts and with its eager reference
tampered, and the warning the first call after ``apply`` gives in production. One real study of
a tiny model serves them all (what apply decides without compiling: tests/unit/use)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from tests.support import ROOT
from tests.support.cli import invoke
from tuner.domain import layout
from tuner.domain.records import TrialProtocol
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.launch.runner import ProcessRunner
from tuner.runtime import artifacts
from tuner.study import finalists
from tuner.study.search import Search
from tuner.study.spec import StudySpec

pytestmark = pytest.mark.slow
# With a compile budget every first call is watched by the runner, which never needs to kill it.
QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20,
                      compile_timeout_s=600.0)
HAS_ARTIFACTS = artifacts.supported()
needs_artifacts = pytest.mark.skipif(not HAS_ARTIFACTS,
                                     reason="this torch has no save_cache_artifacts")


# -- the study, and its finalists measured again --------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_study(tmp_path_factory):
    """A real study of a tiny model whose compiled config is a sure finalist (its eager sleeps),
    searched, then that finalist measured twice more (the eager one is left out for time; the
    search's own confirmation is tested with the fake runner)."""
    spec = StudySpec(name="tiny", workload=Workload(model="tests.support.models:slow_in_eager",
                                                    device="cpu"),
                     space=SearchSpace(backends=("eager", "inductor"), modes=("default",),
                                       dynamic=(False,), batch_sizes=(2,)),
                     protocol=QUICK, root=tmp_path_factory.mktemp("studies"))
    search = Search(spec, ProcessRunner(timeout_s=240))
    df = search.run().trials
    finalists.confirm(search.study, search.claims.storage, spec, search.runner,
                      df[df["backend"] != "eager"], 2)
    return spec, search, SimpleNamespace(trials=search.export().trials)


def test_a_compiled_finalist_is_measured_warm_and_from_artifacts(cpu_study):
    spec, search, summary = cpu_study
    row = summary.trials.set_index("label").loc["inductor:default"]
    assert row["status"] == "ok", row["message"]
    records = finalists.repeats_of(search.study, search.claims.storage)[int(row["trial_number"])]
    assert [r["kind"] for r in records] == (["warm", "artifacts"] if HAS_ARTIFACTS
                                            else ["warm", "warm"])
    assert all(r["status"] == "ok" for r in records), records
    # What each first call started from, as each trial found its caches: the search's trial
    # an empty cache, the next process the trial's kept one, the third the saved artifacts.
    assert row["cache_start"] == "cold"
    assert [r["cache_start"] for r in records] == [r["kind"] for r in records]
    assert not list(spec.directory.rglob("compiling.json"))  # each compile mark was taken down
    # The second process compiled from the trial's cache: inductor's FX-graph cache hit.
    assert records[0]["fxgraph_cache_hits"] >= 1 and records[0]["fxgraph_cache_misses"] == 0
    assert 0 < row["compile_s_warm"] < row["compile_s_cold"]
    assert len(row["latency_ms_p50_repeats"]) == 3
    assert row["latency_ms_p50_ci_low"] <= row["latency_ms_p50_ci_high"]
    assert row["rank_within_noise"] >= 1
    assert spec.layout.trial_cache(int(row["trial_number"])).is_dir()
    if not HAS_ARTIFACTS:
        return
    # The third started from the saved artifacts on an empty cache, and hit them too.
    assert records[0]["artifacts_bytes"] > 0
    assert records[1]["artifacts_load_s"] > 0 and records[1]["fxgraph_cache_hits"] >= 1
    assert records[1]["fxgraph_cache_misses"] == 0
    assert row["compile_s_artifacts"] > 0
    assert row["artifacts_file"] == layout.artifacts_relative(row["config_key"])
    assert (spec.directory / row["artifacts_file"]).stat().st_size == records[0]["artifacts_bytes"]
    assert row["artifacts_torch"] == torch.__version__
    eager = summary.trials.set_index("label").loc["eager"]
    assert pd_isna(eager["artifacts_file"]) and pd_isna(eager["compile_s_warm"])


def pd_isna(value) -> bool:
    import pandas as pd

    return value is None or pd.isna(value)



# -- tuner check, and the first call's warning ---------------------------------------------------

def copy_of(study, tmp_path):
    """The study folder without its trials' caches: a copy a user could be given."""
    return shutil.copytree(study, tmp_path / "tiny", ignore=shutil.ignore_patterns("cache"))


def check(folder):
    result = invoke("check", str(folder), "--batch-size", "2", "--json")
    return result, json.loads(result.stdout)


@needs_artifacts
def test_a_study_that_warm_starts_here_passes(cpu_study):
    study = cpu_study[0].directory
    result, found = check(study)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert found["passed"] is True and found["reasons"] == []
    record = found["check"]
    # From the file on empty caches: every graph found, none compiled.
    assert record["artifacts_loaded"] is True
    assert record["artifacts_entries"]["inductor"] >= 1
    assert record["fxgraph_hits"] >= 1 and record["fxgraph_misses"] == 0
    assert record["aot_misses"] == 0 and record["recompiles"] == 0
    assert all(isinstance(record[k], int) for k in ("fxgraph_hits", "fxgraph_misses", "calls"))
    assert record["warnings"] == []
    # Against the eager output the study kept, not one made here.
    assert record["correct"] is True and record["reference"] == "study"
    assert record["latency_ms_p50"] > 0 and record["calls"] >= 30
    assert found["artifacts"]["torch"] == torch.__version__
    assert "are code" in found["artifacts"]["note"]
    assert found["tuner_version"] and found["study_compile_s"]["cold"] > 0


@needs_artifacts
def test_a_study_without_its_artifacts_and_unlike_its_reference_fails_and_says_why(cpu_study,
                                                                                     tmp_path):
    # One fresh process for both faults (each costs a cold compile here): the artifacts deleted
    # and the eager reference the study kept tampered with.
    study = cpu_study[0].directory
    folder = copy_of(study, tmp_path)
    for saved in (folder / "artifacts").iterdir():
        saved.unlink()
    (kept,) = (folder / "references").glob("*.pt")
    data = torch.load(kept, weights_only=True)
    data["float32_outputs"] = [t + 1.0 for t in data["float32_outputs"]]
    torch.save(data, kept)
    result, found = check(folder)
    assert result.exit_code == 1 and found["passed"] is False
    assert found["warm_started"] is False and found["matches"] is False
    assert found["check"]["reference"] == "study" and found["check"]["correct"] is False
    assert [r for r in found["reasons"] if "differs from the study's eager reference" in r]
    assert [r for r in found["reasons"] if "is missing" in r], found["reasons"]
    assert found["check"]["artifacts_loaded"] is False


@needs_artifacts
def test_the_first_call_says_when_it_compiled_despite_the_artifacts(cpu_study, tmp_path):
    study = cpu_study[0].directory
    # Production code, in a fresh process on empty caches: the artifacts load, but the model is
    # called at batch size 3 where the study measured 2; the first call says so, once.
    script = textwrap.dedent(f"""
        import warnings, torch, tuner
        from tests.support.models import slow_in_eager

        rec = tuner.recommend({str(study)!r}, batch_size=2)
        model, x = slow_in_eager(3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = rec.apply(model.eval())
            assert not caught, [str(w.message) for w in caught]
            with torch.no_grad():
                compiled(x)
                compiled(x)
        for w in caught:
            print(w.category.__name__, w.filename == "<string>", w.message)
    """)
    cache = tmp_path / "empty"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
           "TRITON_CACHE_DIR": str(cache / "triton")}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.strip().splitlines()
    assert len(said) == 1, said
    assert said[0].startswith("WarmStartMissed True first call: no warm start from study 'tiny': "
                              "it compiled 1 graph after the artifacts of "), said
    assert "its inputs have batch size 3, the study's config 2" in said[0]
