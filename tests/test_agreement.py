"""``show``, ``recommend`` and ``compare`` read a study by the same rules: the same columns, the
same eligible rows, and a compiled config within noise of eager is never called faster."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tuner.cli.app import main
from tuner.data import files
from tuner.render import study as report
from tuner.use.compare import compare
from tuner.use.recommend import recommend

from .synthetic import configs, write_study

# FakeRunner at batch size 1: eager 6.25 ms, inductor:default 5.0 ms. Re-measured in fresh
# processes, their 95% intervals overlap: within noise of each other.
WITHIN_NOISE = {
    "eager": {"latency_ms_p50_ci_low": 4.8, "latency_ms_p50_ci_high": 6.6,
              "latency_ms_p50_repeats": [6.25, 5.0, 6.5]},
    "inductor:default": {"latency_ms_p50_ci_low": 4.7, "latency_ms_p50_ci_high": 6.4,
                         "latency_ms_p50_repeats": [5.0, 6.2, 4.8]},
}


pytestmark = pytest.mark.filterwarnings("ignore::tuner.use.environment.MismatchWarning")


@pytest.fixture
def study(tmp_path):
    return write_study(tmp_path, "noisy", trial_configs=configs((1,), ("eager", "inductor:default")),
                       columns=WITHIN_NOISE)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_show_recommend_and_compare_all_choose_eager_within_noise(study, tmp_path):
    verdict = report.verdicts(files.read(study)[0])[1]
    assert verdict.startswith("compiling does not measurably pay") and verdict.endswith("Use eager.")
    shown = invoke("show", str(study))
    assert shown.exit_code == 0 and "Use eager." in shown.stdout

    rec = recommend(study, batch_size=1)
    assert rec.config.label == "eager" and rec.within_noise == ("inductor:default",)
    cli = json.loads(invoke("recommend", str(study), "--batch-size", "1", "--json").stdout)
    assert cli["label"] == "eager"

    other = write_study(tmp_path, "other", trial_configs=configs((1,), ("eager", "inductor:default")))
    latency = [b for b in compare([study, other]).best
               if b.objective == "latency" and b.study == "A"]
    assert [b.label for b in latency] == ["eager"]


def test_without_intervals_the_faster_compiled_config_wins_everywhere(tmp_path):
    study = write_study(tmp_path, "once", trial_configs=configs((1,), ("eager", "inductor:default")))
    assert report.verdicts(files.read(study)[0])[1].startswith("batch size 1: inductor:default is")
    assert recommend(study, batch_size=1).config.label == "inductor:default"
    other = write_study(tmp_path, "other", trial_configs=configs((1,), ("eager", "inductor:default")))
    assert [b.label for b in compare([study, other]).best
            if b.objective == "latency" and b.study == "A"] == ["inductor:default"]


def test_an_unchecked_row_is_eligible_nowhere(tmp_path):
    study = write_study(tmp_path, "unchecked",
                        trial_configs=configs((1,), ("eager", "inductor:default")),
                        changes={"inductor:default": {"correct": None}})
    trials, _ = files.read(study)
    shown = invoke("show", str(study), "--json")
    assert [r["label"] for r in json.loads(shown.stdout)["pareto"]] == ["eager"]
    assert recommend(study, batch_size=1).config.label == "eager"
    assert 1 not in report.verdicts(trials)  # nothing compiled to judge
