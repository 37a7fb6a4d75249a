"""``tuner check`` end to end on the CPU, and the warning the first call after ``apply`` gives
in production: one real study of a tiny model whose compiled finalist saved its compile
artifacts, checked in real fresh processes as it is, without its artifacts, with its eager
reference tampered, and called at another batch size than the study's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.support import ROOT
from tests.support.cli import invoke
from tuner.domain.records import TrialProtocol
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.launch.runner import ProcessRunner
from tuner.runtime import artifacts
from tuner.study import finalists
from tuner.study.search import Search
from tuner.study.spec import StudySpec

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not artifacts.supported(),
                                 reason="this torch has no save_cache_artifacts")]
QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20,
                      compile_timeout_s=600.0)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A real study whose compiled config is recommended (its eager sleeps) and was measured
    once more, which saved its compile artifacts."""
    spec = StudySpec(name="tiny", workload=Workload(model="tests.support.models:slow_in_eager",
                                                    device="cpu"),
                     space=SearchSpace(backends=("eager", "inductor"), modes=("default",),
                                       dynamic=(False,), batch_sizes=(2,)),
                     protocol=QUICK, root=tmp_path_factory.mktemp("studies"))
    search = Search(spec, ProcessRunner(timeout_s=240))
    df = search.run().trials
    finalists.confirm(search.study, search.claims.storage, spec, search.runner,
                      df[df["backend"] != "eager"], 1)
    search.export()
    return spec.directory


def copy_of(study, tmp_path):
    """The study folder without its trials' caches: a copy a user could be given."""
    return shutil.copytree(study, tmp_path / "tiny", ignore=shutil.ignore_patterns("cache"))


def check(folder):
    result = invoke("check", str(folder), "--batch-size", "2", "--json")
    return result, json.loads(result.stdout)


def test_a_study_that_warm_starts_here_passes(study):
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


def test_a_study_without_its_artifacts_misses_and_says_why(study, tmp_path):
    folder = copy_of(study, tmp_path)
    for saved in (folder / "artifacts").iterdir():
        saved.unlink()
    result = invoke("check", str(folder), "--batch-size", "2")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert any(line.startswith("warm start: no: nothing loaded") for line in lines), lines
    assert any(line.startswith("missed: ") and "is missing" in line for line in lines), lines
    assert any(line.startswith("output: matches") for line in lines), lines
    assert lines[-1] == "verdict: FAILED: no warm start"


def test_an_output_unlike_the_studys_eager_reference_fails(study, tmp_path):
    folder = copy_of(study, tmp_path)
    (kept,) = (folder / "references").glob("*.pt")
    data = torch.load(kept, weights_only=True)
    data["float32_outputs"] = [t + 1.0 for t in data["float32_outputs"]]
    torch.save(data, kept)
    result, found = check(folder)
    assert result.exit_code == 1
    assert found["warm_started"] is True and found["matches"] is False
    assert found["check"]["reference"] == "study" and found["check"]["correct"] is False
    assert [r for r in found["reasons"] if "differs from the study's eager reference" in r]


def test_the_first_call_says_when_it_compiled_despite_the_artifacts(study, tmp_path):
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
