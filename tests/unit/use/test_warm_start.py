"""Warm starts: finalists re-measured warm and from saved compile artifacts, and
``Recommendation.apply`` loading those artifacts in production. Real compiles on the CPU are
marked slow; what apply decides (which torch, which file) is tested without compiling."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from types import SimpleNamespace

import pytest
import torch

import tuner
from tests.support import ROOT
from tests.support.models import TinyCNN
from tuner.data import files
from tuner.domain import layout
from tuner.domain.records import TrialProtocol, TrialRequest
from tuner.domain.space import SearchSpace, TrialConfig
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.launch.runner import ProcessRunner
from tuner.runtime import artifacts, fingerprint
from tuner.study import finalists
from tuner.study.search import Search
from tuner.study.spec import StudySpec
from tuner.use.environment import MismatchWarning

# With a compile budget every first call is watched by the runner, which never needs to kill it.
QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20,
                      compile_timeout_s=600.0)
HAS_ARTIFACTS = artifacts.supported()


# -- real compiles on the CPU --------------------------------------------------------------------
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.skipif(not HAS_ARTIFACTS, reason="this torch has no save_cache_artifacts")
def test_apply_loads_the_artifacts_so_the_first_call_hits_the_compile_cache(cpu_study, tmp_path):
    spec, _, _ = cpu_study
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    # A fresh process with an empty inductor cache: a cache hit can only come from the file.
    script = textwrap.dedent(f"""
        import json, torch, tuner
        from torch._dynamo.utils import counters
        from tests.support.models import slow_in_eager

        rec = tuner.recommend({str(spec.directory)!r}, batch_size=2)
        assert rec.config.compiled, rec.row
        model, x = slow_in_eager(2)
        compiled = rec.apply(model.eval())
        with torch.no_grad():
            compiled(x)
        print(json.dumps({{"hits": counters["inductor"]["fxgraph_cache_hit"],
                          "misses": counters["inductor"]["fxgraph_cache_miss"],
                          "aot_hits": counters["aot_autograd"]["autograd_cache_hit"]}}))
    """)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
           "TRITON_CACHE_DIR": str(cache / "triton")}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts == {"hits": 1, "misses": 0, "aot_hits": 1}, done.stderr[-2000:]


# -- what apply decides, without compiling ---------------------------------------------------------
@pytest.fixture
def fake_study(tmp_path, monkeypatch):
    """A fake study whose finalists have (fake) artifacts files, saved by this torch."""
    space = SearchSpace(backends=("eager", "inductor"), modes=("default",), dynamic=(False,),
                        batch_sizes=(1,))
    spec = StudySpec(name="fake", workload=Workload(model="resnet18", device="cpu"), space=space,
                     root=tmp_path, confirm_repeats=2)
    runner = FakeRunner(torch_version=torch.__version__)
    Search(spec, runner).run()
    # This process looks like the machine the fake study ran on.
    made_on = runner.run(TrialRequest(TrialConfig("eager", 1), spec.workload), tmp_path)
    monkeypatch.setattr(fingerprint, "collect", lambda device: made_on.fingerprint)
    return spec.directory


def recommend(study):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MismatchWarning)  # the fake ran on "cuda"
        return tuner.recommend(study, batch_size=1)


def test_the_recommendation_names_its_artifacts_and_the_snippet_loads_them(fake_study):
    rec = recommend(fake_study)
    assert rec.config.label == "inductor:default"
    assert rec.artifacts_path == (fake_study / layout.artifacts_relative(rec.config.key)).resolve()
    assert rec.to_dict()["artifacts"] == str(rec.artifacts_path)
    assert rec.to_dict()["artifacts_found"] is True
    snippet = rec.snippet()
    assert f"ARTIFACTS = Path({str(rec.artifacts_path)!r})" in snippet
    assert f"ARTIFACTS_TORCH = {torch.__version__!r}" in snippet
    assert "torch.compiler.load_cache_artifacts(ARTIFACTS.read_bytes())" in snippet
    assert snippet.index("load_cache_artifacts") < snippet.index("return torch.compile(")
    compile(snippet, "snippet", "exec")
    assert "warm start" in rec.describe() and "s warm" in rec.describe()


def test_the_snippet_says_when_it_cannot_warm_start(fake_study):
    # Pasted elsewhere without its artifacts file, the snippet compiles cold and says so.
    rec = recommend(fake_study)
    snippet = rec.snippet()
    namespace: dict = {}
    exec(compile(snippet, "snippet", "exec"), namespace)
    rec.artifacts_path.unlink()
    with pytest.warns(UserWarning, match=r"no warm start: .* is missing; the first call "
                                         "compiles cold"):
        namespace["compile_model"](torch.nn.Linear(4, 2).eval())
    # Saved by another torch: that, not a list of what might be wrong.
    other = snippet.replace(f"ARTIFACTS_TORCH = {torch.__version__!r}", "ARTIFACTS_TORCH = '2.0.0'")
    assert other != snippet
    rec.artifacts_path.write_bytes(b"saved by 2.0.0")
    exec(compile(other, "snippet", "exec"), namespace)
    with pytest.warns(UserWarning, match=r"no warm start: .* was saved by torch 2\.0\.0 and "
                                         f"this is {re.escape(torch.__version__)}; the first "
                                         "call compiles cold"):
        namespace["compile_model"](torch.nn.Linear(4, 2).eval())


def test_the_snippet_says_when_torch_cannot_read_the_artifacts(fake_study):
    # As apply does: torch returns None for bytes it cannot read (the fake's), and logs only.
    if not artifacts.supported():
        pytest.skip("this torch has no load_cache_artifacts")
    rec = recommend(fake_study)
    assert rec.artifacts_found
    namespace: dict = {}
    exec(compile(rec.snippet(), "snippet", "exec"), namespace)
    # The file is there, saved by this torch: it could not be read (torch said why), and that
    # is all the warning says ("missing or unreadable, or saved by torch X and this is X").
    with pytest.warns(UserWarning, match=r"no warm start: .* could not be read \(torch logged "
                                         r"why\); the first call compiles cold"):
        namespace["compile_model"](torch.nn.Linear(4, 2).eval())


def test_apply_skips_artifacts_of_another_torch_with_a_warning(fake_study):
    df, meta = files.read(fake_study)
    df["artifacts_torch"] = df["artifacts_torch"].where(df["artifacts_torch"].isna(), "2.0.0")
    files.export(fake_study, df, meta)
    rec = recommend(fake_study)
    with pytest.warns(MismatchWarning, match=r"saved by torch 2\.0\.0, this process runs torch"):
        assert rec.load_artifacts() is False
    with pytest.warns(MismatchWarning, match="first call compiles cold"):
        compiled = rec.apply(TinyCNN().eval())
    assert compiled is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", MismatchWarning)
        rec.apply(TinyCNN().eval(), warm_start=False)  # asked not to: no warning


def test_apply_warns_when_the_file_is_gone_or_unreadable(fake_study):
    rec = recommend(fake_study)
    # The fake's bytes are not artifacts torch can load.
    if artifacts.supported():
        with pytest.warns(MismatchWarning, match="load_cache_artifacts failed"):
            assert rec.load_artifacts() is False
    rec.artifacts_path.unlink()
    with pytest.warns(MismatchWarning, match="is missing"):
        assert rec.load_artifacts() is False
    assert "load_cache_artifacts" not in rec.snippet()
    # tuner recommend says so too, rather than name a file apply() cannot load
    assert f"none: the study saved compile artifacts for it, but {rec.artifacts_path} is " \
        "missing" in rec.describe()
    assert f"apply() loads {rec.artifacts_path}" not in rec.describe()
    assert rec.to_dict()["artifacts_found"] is False


def test_a_study_without_artifacts_applies_as_before(tmp_path):
    from tests.support.synthetic import write_study

    study = write_study(tmp_path, "old")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MismatchWarning)
        rec = tuner.recommend(study, batch_size=1)
    assert rec.artifacts_path is None and rec.load_artifacts() is False
    assert "load_cache_artifacts" not in rec.snippet()


def test_the_no_warm_start_warning_points_at_the_callers_line(fake_study):
    # Whether from apply or load_artifacts itself: the user's line, to see and to filter by module.
    rec = recommend(fake_study)
    rec.artifacts_path.unlink()
    for call in (rec.load_artifacts, lambda: rec.apply(torch.nn.Linear(4, 2).eval())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert [w.filename for w in caught] == [__file__], [str(w.message) for w in caught]


def test_a_snippet_written_without_the_artifacts_file_says_it_compiles_cold(fake_study):
    # A study folder copied without its artifacts/: the snippet left the warm start out without
    # a word, though the table said the file was missing.
    rec = recommend(fake_study)
    rec.artifacts_path.unlink()
    snippet = recommend(fake_study).snippet()
    assert "load_cache_artifacts" not in snippet
    assert (f"# No warm start: the study saved compile artifacts for this config, but\n"
            f"# {rec.artifacts_path} is missing; copy the study folder's artifacts/ along\n"
            in snippet)
    compile(snippet, "snippet", "exec")
