"""Warm starts without compiling: what ``Recommendation.apply`` and its snippet decide (which
torch, which file) on a fake study. With real compiles: tests/integration/test_warm_start.py."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import tuner
from tests.support.models import TinyCNN
from tuner.data import files
from tuner.domain import layout
from tuner.domain.records import TrialProtocol, TrialRequest
from tuner.domain.space import SearchSpace, TrialConfig
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.runtime import artifacts, fingerprint
from tuner.study.search import Search
from tuner.study.spec import StudySpec
from tuner.use.environment import MismatchWarning

# With a compile budget every first call is watched by the runner, which never needs to kill it.
QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20,
                      compile_timeout_s=600.0)
HAS_ARTIFACTS = artifacts.supported()


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
        "missing" in rec.describe(width=400)  # a line wide enough for the whole path
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
