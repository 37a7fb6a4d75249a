"""The knob studies a GPU call records (benchmarks/knob_catalogue.py, benchmarks/record_knobs.py):
the designs' spaces as the tuner reads them, what a torch without a knob leaves out, and one
call that searches, stops before its limit, resumes, and gives back only the kept files. The
searches run the real command line in this process, FakeRunner behind it."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from benchmarks import knob_catalogue as catalogue
from benchmarks import knob_plan, record_knobs
from benchmarks.knob_catalogue import TorchSettings
from tests.support.knob_search import MODES, OPTIONS, SETTINGS, in_process, record
from tuner.cli.app import main as tuner_main
from tuner.domain.space_file import read_space_file
from tuner.errors import UserError


def test_a_cnn_grid_is_two_modes_times_five_knobs_plus_eager_with_torchs_value_first():
    plans, said = catalogue.grid("resnet50", [16], "g", SETTINGS)
    assert said == [] and len(plans) == 1
    space = plans[0].space
    assert len(space.configs()) == 66  # 2 eager (two formats) + 2 modes x 2**5
    assert space.modes == ("default", "reduce-overhead") and space.channels_last == (False, True)
    assert dict(space.options) == {"benchmark_combo_kernel": (False,),
                                   "combo_kernels": (False, True),
                                   "conv_1x1_as_mm": (False, True), "freezing": (False, True),
                                   "layout_optimization": (True, False)}
    assert plans[0].path == "benchmarks/landscapes/g"


def test_a_text_grid_searches_dynamic_instead_of_the_memory_format():
    space = catalogue.grid("tuner.examples:text_transformer", [1], "t", SETTINGS)[0][0].space
    assert space.dynamic == (False, True) and space.channels_last == ()
    assert len(space.configs()) == 65


def test_the_space_file_reads_back_as_the_plans_space(tmp_path):
    plans = catalogue.screen("resnet50", [1, 16], "s", SETTINGS, "all")[0]
    tma = next(p for p in plans if p.candidate == "persistent_tma_matmul")
    path = tmp_path / "space.toml"
    path.write_text(tma.toml())
    read = read_space_file(path)
    assert read.batch_sizes == (1, 16) and read.modes == ("reduce-overhead",)
    assert dict(read.inductor_options or ()) == dict(tma.space.options)
    assert dict(tma.space.options)["max_autotune_gemm_backends"] == ("ATEN,TRITON",)  # one value


def test_a_screen_arm_is_eager_the_base_and_the_base_with_the_knob():
    plans, said = catalogue.screen("resnet50", [16], "s", SETTINGS)
    arms = {p.candidate: p for p in plans}
    assert set(arms) == {c.name for c in catalogue.CATALOGUE if not c.slow}
    assert said == []
    labels = [c.label for c in arms["cudagraph_trees"].space.configs()]
    assert labels == ["eager", "inductor:reduce-overhead triton.cudagraph_trees=True",
                      "inductor:reduce-overhead triton.cudagraph_trees=False"]
    slow = {p.candidate: p for p in catalogue.screen("resnet50", [16], "s", SETTINGS, "slow")[0]}
    assert [c.label for c in slow["max_autotune_without_cdt"].space.configs()][1:] == [
        "inductor:max-autotune coordinate_descent_tuning=True",
        "inductor:max-autotune coordinate_descent_tuning=False"]
    assert all(p.slow for p in slow.values())


def test_what_this_torch_lacks_or_the_model_cannot_use_is_left_out_with_a_line():
    older = TorchSettings("2.9.0", {k: v for k, v in OPTIONS.items() if k != "combo_kernels"},
                          MODES)
    plans, said = catalogue.screen("tuner.examples:text_transformer", [1], "s", older)
    assert "combo_kernels" not in {p.candidate for p in plans}
    assert said == ["skipped channels_last: not for a text model",
                    "skipped combo_kernels: torch 2.9.0 has no inductor option combo_kernels",
                    "skipped conv_1x1_as_mm: not for a text model",
                    "skipped layout_optimization: not for a text model"]
    newer = TorchSettings("3.0", {**OPTIONS, "freezing": True}, MODES)
    assert catalogue.grid("resnet50", [1], "g", newer)[1] == [
        "skipped freezing: torch 3.0 sets freezing=true in reduce-overhead already"]


@pytest.mark.parametrize(("knobs", "words"), [
    (["gemm_search"], "gemm_search compiles for minutes"),
    (["frezing"], "unknown candidate 'frezing'"),
    (["gemm_search_aten", "persistent_tma_matmul"], "compiles for minutes")])
def test_a_grid_of_a_slow_or_unknown_knob_is_refused(knobs, words):
    with pytest.raises(UserError, match=words):
        catalogue.grid("resnet50", [1], "g", SETTINGS, knobs)


def test_the_default_name_holds_the_model_batch_sizes_and_gpu():
    assert catalogue.default_name("tuner.examples:text_transformer", [1, 16],
                                  catalogue.gpu_short("NVIDIA H100 80GB HBM3")) == \
        "text_transformer-bf16-bs1-16-h100"
    assert catalogue.gpu_short("NVIDIA H200") == "h200" and catalogue.gpu_short(None) == "cpu"


def test_a_call_records_a_grid_and_gives_back_only_the_kept_files(tmp_path, fake_cli, capsys):
    calls: list[list[str]] = []
    code, out = record(tmp_path, tmp_path / "repo", calls, "--design", "grid",
                       "--knobs", "freezing")
    assert code == 0 and len(calls) == 1 and calls[0][:3] == ["-m", "tuner", "search"]
    assert "--compile-timeout" in calls[0] and calls[0][calls[0].index("--min-seconds") + 1] == "1"
    name = "benchmarks/landscapes/resnet50-bf16-bs1-h100"
    with tarfile.open(out) as tar:
        assert sorted(tar.getnames()) == sorted([
            f"{name}/design.json", f"{name}/study.db", f"{name}/trials.parquet",
            f"{name}/pareto.parquet", f"{name}.parquet"])  # whole: the landscape for replay
        tar.extractall(tmp_path / "repo", filter="data")
    trials = pd.read_parquet(tmp_path / "repo" / f"{name}.parquet")
    assert len(trials) == 5  # eager + 2 modes x freezing both ways
    design = json.loads((tmp_path / "repo" / name / "design.json").read_text())
    assert design["settings"]["torch"] == "2.11.0" and design["left_out"] == []
    assert capsys.readouterr().out.strip().endswith(f"{name}: every config measured")
    # The next call, on the repository holding what this one gave back: nothing left to run.
    assert record(tmp_path, tmp_path / "repo", calls, "--design", "grid", "--knobs",
                  "freezing")[0] == 0
    assert len(calls) == 1


def test_a_call_starts_no_search_whose_trial_could_run_past_its_limit(tmp_path, fake_cli, capsys):
    calls: list[list[str]] = []
    code, out = record(tmp_path, tmp_path / "repo", calls, "--arms", "freezing",
                       "--limit-min", "1")  # 40 s left, and a trial may take 90 s
    assert code == 0 and calls == []
    text = capsys.readouterr().out
    screen = "benchmarks/screens/resnet50-bf16-bs1-h100"
    assert re.search(rf"^stopped before {screen}/freezing: 0\.\d min left, and one of its "
                     r"trials may take 1\.5$", text, re.M)
    assert text.strip().endswith("not whole yet, run the same command again: freezing 0/3")
    with tarfile.open(out) as tar:
        assert tar.getnames() == [f"{screen}/design.json"]


def test_a_carried_arm_is_resumed_where_the_last_call_stopped(tmp_path, fake_cli):
    calls: list[list[str]] = []
    repo = tmp_path / "repo"
    # A call that measured the arm's first two trials (eager and its base) before it stopped.
    screen = "benchmarks/screens/resnet50-bf16-bs1-h100"
    plan = catalogue.screen("resnet50", [1], "resnet50-bf16-bs1-h100", SETTINGS, ["freezing"])[0][0]
    space = tmp_path / "space.toml"
    space.write_text(plan.toml())
    CliRunner().invoke(tuner_main, ["search", "--model", "resnet50", "--dtype", "bfloat16",
                                    "--device", "cuda", "--space", str(space), "--name",
                                    "freezing", "--studies-dir", str(repo / screen), "--confirm",
                                    "0", "--min-seconds", "1", "--compile-timeout", "5m",
                                    "--trials", "2", "-q"])
    carried = set(pd.read_parquet(repo / screen / "freezing" / "trials.parquet")["trial_number"])
    assert len(carried) == 2
    code, out = record(tmp_path, repo, calls, "--arms", "freezing")
    assert code == 0 and len(calls) == 1
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    trials = pd.read_parquet(tmp_path / "back" / screen / "freezing" / "trials.parquet")
    assert len(trials) == 3 and carried < set(trials["trial_number"])  # the third measured now


def test_a_plan_call_goes_on_to_the_next_unit_and_a_later_call_starts_where_it_stopped(
        tmp_path, fake_cli, capsys):
    # Two small units: the freezing screen at batch size 1, then at 2 (3 configs each).
    units = [knob_plan.Unit("screen", "resnet50", (bs,), "freezing") for bs in (1, 2)]
    first, second = (f"benchmarks/screens/resnet50-bf16-bs{bs}-h100" for bs in (1, 2))
    calls: list[list[str]] = []
    out = tmp_path / "out" / "knobs.tgz"

    def call(repo: Path) -> list[str]:
        assert record_knobs.main(
            ["--design", "plan", "--work", str(tmp_path / "work"), "--repo", str(repo),
             "--out", str(out)], search=in_process(calls), settings=SETTINGS, gpu="h100",
            units=units) == 0
        with tarfile.open(out) as tar:
            tar.extractall(repo, filter="data")  # what a session commits
            # the units with a study measured in this call
            return sorted({n.split("/")[2] for n in tar.getnames() if n.endswith(".parquet")})

    # A unit left not whole (here its search measured nothing) stops the call there: the
    # plan's order holds, and the next call starts with that unit again.
    failed: list[list[str]] = []
    assert record_knobs.main(
        ["--design", "plan", "--work", str(tmp_path / "failed"), "--repo", str(tmp_path / "none"),
         "--out", str(out)], search=lambda args, timeout_s: failed.append(list(args)) or 1,
        settings=SETTINGS, gpu="h100", units=units) == 0
    assert len(failed) == 1
    assert capsys.readouterr().out.strip().endswith(
        f"{first}: not whole yet, run the same command again: freezing 0/3")
    # One call, time enough: the first unit, then the second.
    assert call(tmp_path / "fresh") == [first.split("/")[2], second.split("/")[2]]
    text = capsys.readouterr().out
    assert text.index(f"{first}: every config measured") < \
        text.index(f"{second}: every config measured")
    # A repository whose first unit an earlier call finished: this call records the second.
    repo = tmp_path / "repo"
    record(tmp_path, repo, calls, "--arms", "freezing")
    with tarfile.open(tmp_path / "out" / "knobs.tgz") as tar:
        tar.extractall(repo, filter="data")
    capsys.readouterr()
    searches = len(calls)
    assert call(repo) == [second.split("/")[2]] and len(calls) == searches + 1
    text = capsys.readouterr().out
    assert first not in text and f"{second}: every config measured" in text
    assert len(pd.read_parquet(repo / second / "freezing" / "trials.parquet")) == 3
    # And then nothing is left to run.
    assert call(repo) == [] and len(calls) == searches + 1
    assert capsys.readouterr().out.strip() == "every unit of the plan is whole"
