"""Which knobs matter: parameter importances per batch size (``tuner show --importance``) and
the PNG files of ``tuner plot``, on synthetic studies written as real Parquet."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tests.support.synthetic import configs, write_study
from tuner.cli.app import main
from tuner.data import files
from tuner.data.importance import importances
from tuner.data.json_contract import JSON_SCHEMA
from tuner.data.select import eligible, pareto
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status
from tuner.render.plots import front_figure, write_plots
from tuner.version import __version__

PNG = b"\x89PNG\r\n\x1a\n"
THREE = ("eager", "inductor:default", "inductor:reduce-overhead")


def knob_configs() -> list[TrialConfig]:
    """Eager and inductor in two precisions, with and without epilogue fusion, at batch sizes
    1 and 8; ``dynamic`` searched at batch size 1 only."""
    out = []
    for bs in (1, 8):
        for dtype in ("float32", "bfloat16"):
            out.append(TrialConfig("eager", bs, dtype=dtype))
            for fusion in (True, False):
                for dynamic in ((False, True) if bs == 1 else (False,)):
                    out.append(TrialConfig("inductor", bs, "default", dynamic, dtype=dtype,
                                           options=(("epilogue_fusion", fusion),)))
    return out


def latency_ms(config: TrialConfig, number: int) -> float:
    """bfloat16 decides latency at batch size 1; epilogue fusion decides it at batch size 8,
    where every latency is 100 times larger. Computed across batch sizes mixed, the fast
    bfloat16 rows of batch size 1 would make dtype look decisive at 8 too."""
    if config.batch_size == 1:
        return (1.0 if config.dtype == "bfloat16" else 2.0) + 0.01 * number
    if config.backend == "eager":
        return 300.0 + number
    fused = dict(config.options)["epilogue_fusion"]
    return (100.0 if fused else 200.0) + (1.0 if config.dtype == "bfloat16" else 0.0)


@pytest.fixture(scope="module")
def knobs(tmp_path_factory) -> Path:
    trial_configs = knob_configs()
    return write_study(tmp_path_factory.mktemp("studies"), "knobs", trial_configs=trial_configs,
                       changes={c.key: {"latency_ms_p50": latency_ms(c, i)}
                                for i, c in enumerate(trial_configs)})


@pytest.fixture(scope="module")
def found(knobs):
    trials, _ = files.read(knobs)
    return {b.batch_size: b for b in importances(trials)}


def test_the_parameter_that_decides_latency_ranks_first_at_each_batch_size(found):
    assert next(iter(found[1].importances["latency"])) == "dtype"
    assert found[1].importances["latency"]["dtype"] > 0.9
    assert next(iter(found[8].importances["latency"])) == "opt_epilogue_fusion"
    assert sum(found[8].importances["latency"].values()) == pytest.approx(1.0)


def test_only_the_parameters_that_varied_at_that_batch_size_are_assessed(found):
    # mode (always default), channels_last and cudnn_benchmark (the workload's) never vary;
    # dynamic varies at batch size 1 only.
    assert found[1].parameters == ("backend", "dynamic", "dtype", "opt_epilogue_fusion")
    assert found[8].parameters == ("backend", "dtype", "opt_epilogue_fusion")
    assert set(found[8].importances["latency"]) == set(found[8].parameters)


def test_an_objective_without_spread_has_no_importances_and_says_why(found):
    # The fake runner gives every config of a batch size the same memory.
    assert found[1].skipped["memory"] == "every row has the same value"
    assert set(found[1].importances) == {"latency", "warmup"}


def test_a_tie_that_takes_in_every_row_leaves_the_rows_better_than_it_as_the_best(found):
    # Eager's short warm-up ties with none of the compiled rows, whose warm-ups all tie: the
    # best 5 rows, ties included, would be all 10. The two eager rows are the best instead.
    assert found[1].importances["warmup"]["backend"] == pytest.approx(1.0)


def test_an_option_that_changes_nothing_scores_nothing_though_eager_loses(tmp_path):
    # Every inductor config measures the same, eager is slower: only backend decides. Judged
    # across every row, each option's '-' on eager would stand in for "compiled" and score as
    # much as backend.
    trial_configs = [TrialConfig("eager", 1, channels_last=cl) for cl in (False, True)] + [
        TrialConfig("inductor", 1, "default", False, channels_last=cl,
                    options=(("epilogue_fusion", e), ("freezing", f)))
        for cl in (False, True) for e in (True, False) for f in (False, True)]
    study = write_study(tmp_path, "inert", trial_configs=trial_configs, changes={
        c.key: {"latency_ms_p50": 6.25 if c.backend == "eager" else 5.0} for c in trial_configs})
    (b,) = importances(files.read(study)[0])
    latency = b.importances["latency"]
    assert latency["backend"] == pytest.approx(1.0)
    assert latency["opt_epilogue_fusion"] == latency["opt_freezing"] == 0.0
    # The options are judged among the 8 inductor rows, and the output says so below the
    # header's "best 5" of all 10.
    assert b.judged_among == {"opt_epilogue_fusion": 8, "opt_freezing": 8}
    lines = CliRunner().invoke(main, ["show", str(study), "--importance"]).output.splitlines()
    assert "batch size 1: 10 verified rows, importance for being among the best 5" in lines
    assert ("  opt_epilogue_fusion, opt_freezing: judged among the 8 rows they apply to, the "
            "best 4 of them") in lines


def test_a_parameter_that_applies_to_too_few_rows_is_not_judged(tmp_path):
    # As studies/cpu-text-encoder: eager and three compiled rows, dynamic varying among them.
    trial_configs = [TrialConfig("eager", 1)] + [TrialConfig("inductor", 1, "default", d)
                                                 for d in (False, True, None)]
    (b,) = importances(files.read(write_study(tmp_path, "few", trial_configs=trial_configs))[0])
    assert b.unjudged == {"dynamic": "applies to 3 rows, too few to judge (at least 4)"}
    assert "dynamic" not in b.importances["latency"]
    out = CliRunner().invoke(main, ["show", str(tmp_path / "few"), "--importance"])
    assert "  dynamic: applies to 3 rows, too few to judge (at least 4)" in out.output.splitlines()


def test_a_batch_size_with_too_few_rows_or_parameters_says_so(tmp_path):
    few = write_study(tmp_path, "few", trial_configs=configs(
        batch_sizes=(1,), labels=("eager", "inductor:default")))
    (b,) = importances(files.read(few)[0])
    assert b.note == "2 verified rows, too few for importances (at least 4)"
    assert b.importances == {}
    one = write_study(tmp_path, "one", trial_configs=[
        TrialConfig("inductor", 1, "default", False, dtype=d)
        for d in ("float32", "bfloat16", "float16", "tf32")])
    (b,) = importances(files.read(one)[0])
    assert b.note == ("1 parameter varied (dtype), too few for importances (at least 2): "
                      "search more dimensions")


def test_one_verified_row_is_singular_in_the_note_and_the_plot_title(tmp_path):
    # "1 verified rows" in tuner show --importance, tuner plot's stderr and the front's title.
    single = write_study(tmp_path, "single", trial_configs=configs((1,), ("eager",)))
    out = CliRunner().invoke(main, ["show", str(single), "--importance"])
    assert out.exit_code == 0, out.output
    assert "batch size 1: 1 verified row, too few for importances (at least 4)" in \
        out.output.splitlines()
    trials = files.read(single)[0]
    fig = front_figure("single", 1, eligible(trials), set(pareto(trials)["trial_number"]), 0)
    assert fig.get_suptitle().startswith("single, batch size 1: 1 verified row; ")


def test_show_importance_prints_a_table_per_batch_size(knobs, tmp_path):
    out = CliRunner().invoke(main, ["show", str(knobs), "--importance"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = lines.index("batch size 8: 6 verified rows, importance for being among the best 3")
    assert lines[at + 1].split() == ["parameter", "latency", "memory", "warmup"]
    assert lines[at + 2].split()[:3] == ["opt_epilogue_fusion", "0.63", "-"]
    assert "  memory: every row has the same value" in lines
    few = write_study(tmp_path, "few", trial_configs=configs((1,), THREE))
    out = CliRunner().invoke(main, ["show", str(few), "--importance"])
    assert "batch size 1: 3 verified rows, too few for importances (at least 4)" in out.output


def test_show_importance_json(knobs):
    out = CliRunner().invoke(main, ["show", str(knobs), "--importance", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["study"] == "knobs" and "PedAnovaImportanceEvaluator" in data["evaluator"]
    assert data["objectives"]["latency"] == "latency_ms_p50"
    by_size = {b["batch_size"]: b for b in data["batch_sizes"]}
    assert list(by_size[1]["importances"]["latency"])[0] == "dtype"
    assert by_size[8]["best_rows"] == 3 and by_size[8]["note"] is None
    assert by_size[8]["skipped"]["memory"] == "every row has the same value"


def test_show_importance_refuses_all(knobs):
    out = CliRunner().invoke(main, ["show", str(knobs), "--importance", "--all"])
    assert out.exit_code == 1
    assert out.output == ("Error: --all and --importance are two different views: "
                          "give one of them\n")


def test_plot_writes_fronts_and_importances_as_png(knobs, tmp_path):
    out = CliRunner().invoke(main, ["plot", str(knobs), "--out", str(tmp_path / "new" / "p")])
    assert out.exit_code == 0, out.output
    names = ["knobs-pareto-bs1.png", "knobs-pareto-bs8.png", "knobs-importance-bs1.png",
             "knobs-importance-bs8.png"]
    assert out.stdout.splitlines() == [str(tmp_path / "new" / "p" / n) for n in names]
    for name in names:
        data = (tmp_path / "new" / "p" / name).read_bytes()
        assert data[:8] == PNG and len(data) > 10_000


def test_plot_defaults_to_the_study_folder_and_says_which_batch_sizes_have_no_bars(tmp_path):
    few = write_study(tmp_path, "few", trial_configs=configs((1,), THREE))
    out = CliRunner().invoke(main, ["plot", "few", "--studies-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{few / 'plots' / 'few-pareto-bs1.png'}\n"
    assert out.stderr == ("batch size 1: no importance plot: 3 verified rows, too few for "
                          "importances (at least 4)\n")
    assert (few / "plots" / "few-pareto-bs1.png").read_bytes()[:8] == PNG
    out = CliRunner().invoke(main, ["plot", str(few), "--json"])
    assert json.loads(out.stdout) == {
        "tuner_version": __version__, "schema": JSON_SCHEMA,
        "study": "few", "written": [str(few / "plots" / "few-pareto-bs1.png")], "no_pareto": [],
        "no_importance": [{"batch_size": 1,
                           "text": "3 verified rows, too few for importances (at least 4)"}]}


def test_plot_writes_inside_out_whatever_study_name_the_file_holds(tmp_path):
    # A file someone sent: its metadata names the study "../../escape".
    sent = write_study(tmp_path / "a" / "b", "sent", trial_configs=configs((1,), THREE),
                       meta={"study": "../../escape"})
    out = CliRunner().invoke(main, ["plot", str(sent), "--out", str(tmp_path / "a" / "b" / "p")])
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{tmp_path / 'a' / 'b' / 'p' / 'escape-pareto-bs1.png'}\n"
    assert sorted(p.name for p in tmp_path.rglob("*.png")) == ["escape-pareto-bs1.png"]


def test_plot_of_many_long_labels_marks_points_by_trial_number(tmp_path):
    """32 Pareto-optimal configs, each labelled with five inductor options: the points carry
    their trial number, a key below the panels their labels, and the panels keep their size."""
    names = ("coordinate_descent_tuning", "epilogue_fusion", "freezing", "shape_padding",
             "max_autotune")
    trial_configs = [TrialConfig("eager", 1)] + [
        TrialConfig("inductor", 1, "default", False, options=tuple(zip(names, values)))
        for values in itertools.product((True, False), repeat=len(names))]
    # Faster and larger in turn: every row is on the front.
    study = write_study(tmp_path, "long", trial_configs=trial_configs, changes={
        c.key: {"latency_ms_p50": 10.0 - 0.1 * i, "vram_bytes_steady_reserved": (1 + i) * 2**28}
        for i, c in enumerate(trial_configs)})
    trials, meta = files.read(study)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained_layout not applied", say
        write_plots(trials, meta, [], tmp_path / "plots")
    fig = front_figure("long", 1, eligible(trials), set(pareto(trials)["trial_number"]), 0)
    fig.savefig(tmp_path / "again.png")
    for ax in fig.axes:
        assert {t.get_text() for t in ax.texts} == {f"#{n}" for n in range(33)}
        assert ax.get_position().height > 0.3 and ax.get_position().width > 0.3
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    # named by what differs from the defaults known; max_autotune's is not known: its value
    assert key[:2] == ["#0  eager",
                       "#1  default +coordinate_descent_tuning +freezing max_autotune=True"]
    assert len(key) == 33 and all(re.fullmatch(r"#\d+  \S.{3,}", k) for k in key)


def test_plot_says_which_batch_sizes_have_no_front(tmp_path):
    """Batch size 8 has no row that finished and matched eager: no Pareto plot, in a line."""
    study = write_study(tmp_path, "half", trial_configs=configs((1, 8), THREE),
                        fail={"eager|bs=8": Status.OOM,
                              "inductor|default|dynamic=False|bs=8": Status.OOM},
                        changes={"inductor|reduce-overhead|dynamic=False|bs=8": {"correct": False}})
    out = CliRunner().invoke(main, ["plot", str(study), "--out", str(tmp_path / "p")])
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{tmp_path / 'p' / 'half-pareto-bs1.png'}\n"
    why = "no row finished and matched eager (1 not verified correct, 2 oom)"
    assert out.stderr.splitlines() == [
        "batch size 1: no importance plot: 3 verified rows, too few for importances "
        "(at least 4)",
        f"batch size 8: no Pareto plot: {why}",
        "batch size 8: no importance plot: 0 verified rows, too few for importances "
        "(at least 4)"]
    out = CliRunner().invoke(main, ["plot", str(study), "--out", str(tmp_path / "p"), "--json"])
    assert json.loads(out.stdout)["no_pareto"] == [{"batch_size": 8, "text": why}]


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_the_plots_of_a_committed_study_are_not_committed():
    """``tuner plot studies/cpu-text-encoder`` writes into studies/cpu-text-encoder/plots/."""
    out = subprocess.run(["git", "check-ignore", "-q", "studies/cpu-text-encoder/plots/x.png"],
                         cwd=ROOT, capture_output=True, text=True)
    if out.returncode == 128:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    assert out.returncode == 0, "studies/*/plots/ is not in .gitignore"


def test_plot_bad_input_is_a_one_line_error(knobs, tmp_path):
    runner = CliRunner()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    broken = write_study(tmp_path, "broken", trial_configs=configs((1,), THREE),
                         changes={label: {"correct": False} for label in THREE})
    for args, words in (([str(tmp_path / "missing")], "no such file"),
                        ([str(knobs), "--out", str(blocker / "plots")],
                         f"cannot write plots to {blocker / 'plots'}"),
                        ([str(broken)], "nothing to plot: study broken has no row that "
                                        "finished and matched eager")):
        out = runner.invoke(main, ["plot", *args])
        assert out.exit_code == 1, out.output
        assert out.output.startswith("Error: ") and words in out.output
        assert out.output.count("\n") == 1
    assert not (broken / "plots").exists()


def test_plot_without_matplotlib_is_a_one_line_error_that_writes_nothing(knobs, tmp_path,
                                                                          monkeypatch):
    # A dependency, but an environment installed with --no-deps can lack it: a traceback from
    # inside the first figure, after the plots folder was made.
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    out = CliRunner().invoke(main, ["plot", str(knobs), "--out", str(tmp_path / "plots")])
    assert out.exit_code == 1, out.output
    assert out.output.startswith("Error: tuner plot needs matplotlib") and \
        out.output.count("\n") == 1
    assert not (tmp_path / "plots").exists()
