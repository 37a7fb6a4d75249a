"""The command line as a user meets it: results on stdout, progress on stderr, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support import ROOT
from tests.support.cli import STUDY, assert_one_line_error, invoke, search_args
from tests.support.json_contract import assert_contract
from tuner.cli.app import main
from tuner.cli.options import Duration
from tuner.data import files, select
from tuner.domain import layout

pytestmark = pytest.mark.usefixtures("fake_cli")


@pytest.fixture(scope="module")
def study(tmp_path_factory, fake_cli_for_module):
    """One finished study, shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("studies")
    result = invoke(*search_args(root))
    assert result.exit_code == 0, result.output
    return root, result


# -- search -------------------------------------------------------------------------------------

def test_search_prints_the_table_on_stdout_and_progress_on_stderr(study):
    root, result = study
    assert "batch size 1: Pareto-optimal configs" in result.stdout
    assert "batch size 8: Pareto-optimal configs" in result.stdout
    assert "batch size 8: default is 1.25x faster than eager" in result.stdout
    assert "[1/" not in result.stdout and "running" not in result.stdout
    assert "running eager bs=1 ..." in result.stderr
    # of the configs in the space, and the trial's own number, as its row and trials/<N>/ have it
    trial = {r["label"] + f" bs={r['batch_size']}": r["trial_number"]
             for _, r in pd.read_parquet(root / STUDY / layout.TRIALS_FILE).iterrows()}
    assert f"[4/4] trial {trial['inductor:default bs=8']} default bs=8: " \
        in result.stderr and "stopped: every config" in result.stderr
    assert "p50" not in result.stderr.split("stopped:")[1]  # the table is not on stderr
    for name in (layout.TRIALS_FILE, layout.PARETO_FILE):
        assert (root / STUDY / name).exists()


def test_search_json_is_pure_json_on_stdout(tmp_path):
    result = invoke(*search_args(tmp_path, "--json"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["study"] == STUDY and data["trials"] == 4 and data["failed"] == 0
    assert {row["batch_size"] for row in data["pareto"]} == {1, 8}
    assert [v["batch_size"] for v in data["verdicts"]] == [1, 8]
    assert_contract(data)
    assert "running" in result.stderr


def test_quiet_search_prints_nothing_on_stderr(tmp_path):
    result = invoke(*search_args(tmp_path, "-q"))
    assert result.exit_code == 0 and result.stderr == ""
    assert "Pareto-optimal" in result.stdout


def test_search_again_resumes_and_measures_nothing_new(study):
    root, _ = study
    result = invoke(*search_args(root))
    assert result.exit_code == 0, result.output
    assert "  running " not in result.stderr
    assert "0 new trials, 4 in the study" in result.stderr


def test_counts_of_one_are_singular(tmp_path):
    # "1 configs in the space, target 1 trials", "reached 1 trials; 1 new trials", and the
    # table's header "..., 1 trials"; more than one keeps its s (the tests above).
    result = invoke(*search_args(tmp_path, "--trials", "1", "--confirm", "0", backend="eager",
                                 mode=None, batch_sizes="1"))
    assert result.exit_code == 0, result.output
    assert ": 1 config in the space, target 1 trial; progress below" in result.stderr
    assert "stopped: reached 1 trial; 1 new trial, 1 in the study; " in result.stderr
    assert result.stdout.splitlines()[0].endswith(" on cpu, 1 trial")


@pytest.mark.parametrize("options, words", [
    ({"model": "resnet19"}, ["unknown model 'resnet19'", "resnet18"]),
    ({"model": "tests.support.models:no_such_factory"}, ["no callable 'no_such_factory'"]),
    ({"model": "tests.support.models:tiny_cn"}, ["no callable 'tiny_cn' (did you mean tiny_cnn?)"]),
    ({"model": "tests.support.modles:tiny_cnn"}, ["cannot import 'tests.support.modles'",
                                          "(did you mean tests.support.models?)"]),
    ({"backend": "warp-drive"}, ["unknown backend 'warp-drive'"]),
    ({"mode": "ludicrous"}, ["unknown mode 'ludicrous'"]),
    ({"mode": "reduce-overhead"}, ["needs a CUDA device"]),
    ({"backend": "eager"}, ["--mode applies to the inductor backend"]),
    ({"batch_sizes": "0"}, ["batch size '0'"]),
    ({"batch_sizes": "a,1"}, ["batch size 'a'"]),
    ({"dynamic": "maybe"}, ["--dynamic 'maybe'"]),
    ({"shape_schedule": "0,a"}, ["shape schedule entry '0'"]),
    ({"shape_schedule": "1,a"}, ["shape schedule entry 'a'"]),
    ({"shape_schedule": "1,-8"}, ["shape schedule entry '-8'"]),
    ({"budget": "soon"}, ["cannot read duration 'soon'"]),
    ({"budget": "1h1h"}, ["cannot read duration '1h1h'"]),  # was 2 h
    ({"budget": "30s30m"}, ["cannot read duration '30s30m'"]),  # was 30 m 30 s
    ({"budget": "0"}, ["duration '0'", "more than zero"]),
    ({"timeout": "0s"}, ["duration '0s'", "more than zero"]),
], ids=lambda v: ",".join(f"{k}={o}" for k, o in v.items()) if isinstance(v, dict) else "")
def test_bad_input_is_a_one_line_error_and_creates_nothing(tmp_path, options, words):
    result = invoke(*search_args(tmp_path, **options))
    assert_one_line_error(result, *words)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("storage", [False, True], ids=["default-storage", "own-storage"])
def test_studies_dir_under_a_regular_file_is_a_one_line_error(tmp_path, storage):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = search_args(tmp_path, studies_dir=str(blocker / "studies"))
    if storage:  # the Parquet files still go under --studies-dir
        args += ("--storage", f"sqlite:///{tmp_path / 'study.db'}")
    result = invoke(*args)
    assert_one_line_error(result, "cannot write to", "--studies-dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_studies_dir_is_a_one_line_error(tmp_path):
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    try:
        result = invoke(*search_args(readonly))
    finally:
        readonly.chmod(0o700)
    assert_one_line_error(result, "cannot write to", "--studies-dir")


def test_resume_with_another_space_is_a_one_line_error(study):
    root, _ = study
    result = invoke(*search_args(root, batch_sizes="1,8,32"))
    assert_one_line_error(result, "another search space", "--batch-sizes: study has [1, 8]")


def test_a_dimension_searched_on_one_side_only_is_told_with_both_value_lists(tmp_path):
    # Searched false,true, asked true alone: the study is not "false" (its workload's first
    # value), and not searching dtype is its one value, not "none".
    assert invoke(*search_args(tmp_path, "--channels-last", "false,true")).exit_code == 0
    assert_one_line_error(invoke(*search_args(tmp_path, "--channels-last", "true")),
                          "another search space", "--channels-last: study has false,true, "
                          "asked true)")
    assert_one_line_error(invoke(*search_args(tmp_path, "--channels-last", "false,true",
                                              "--dtype", "float32,bfloat16")),
                          "--dtype: study has float32, asked float32,bfloat16)")


def test_resume_with_another_shape_schedule_is_a_one_line_error(study):
    root, _ = study
    result = invoke(*search_args(root, shape_schedule="1,8,1"))
    assert_one_line_error(result, "another workload", "--shape-schedule")


# -- show ---------------------------------------------------------------------------------------

def test_show_prints_the_pareto_table(study):
    root, searched = study
    result = invoke("show", str(root / STUDY))
    assert result.exit_code == 0, result.output
    assert result.stdout == searched.stdout  # the same report as the end of the search
    assert result.stderr == ""


def test_show_finds_a_study_by_name_under_studies_dir(study):
    root, _ = study
    by_name = invoke("show", STUDY, "--studies-dir", str(root))
    assert by_name.exit_code == 0, by_name.output
    assert by_name.stdout == invoke("show", str(root / STUDY / layout.TRIALS_FILE)).stdout


def test_show_json(study):
    root, _ = study
    result = invoke("show", str(root / STUDY), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    front = select.pareto(files.read(root / STUDY)[0])
    assert [row["trial_number"] for row in data["pareto"]] == list(front["trial_number"])
    every = json.loads(invoke("show", str(root / STUDY), "--json", "--all").stdout)
    assert len(every["pareto"]) == 4


def test_show_on_a_file_that_is_not_a_study_is_a_one_line_error(tmp_path):
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}), other)
    assert_one_line_error(invoke("show", str(other)), "not a tuner study file")
    assert_one_line_error(invoke("show", str(tmp_path / "missing")), "no such file")


# -- help ---------------------------------------------------------------------------------------

def test_every_command_has_help_with_an_example():
    assert main.commands
    for name, command in main.commands.items():
        assert "Example" in (command.help or ""), name
        for flag in ("--help", "-h"):
            result = invoke(name, flag)
            assert result.exit_code == 0, (name, flag, result.output)
            assert "Example" in result.stdout and "Usage:" in result.stdout


def test_top_level_help():
    for flag in ("--help", "-h"):
        result = invoke(flag)
        assert result.exit_code == 0 and "tuner search" in result.stdout
        for name in main.commands:
            assert name in result.stdout


@pytest.mark.parametrize("module", ["tuner", "tuner.cli.app"])
def test_python_dash_m_tuner_is_the_command_line(module):
    # python -m tuner.cli.app (the entry point's module) printed nothing and exited 0
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"Usage: python -m {module}" in proc.stdout
    assert all(name in proc.stdout for name in main.commands)


def test_every_command_summary_fits_the_command_list():
    listed = invoke("--help").stdout.split("Commands:\n")[1].splitlines()
    for name, command in main.commands.items():
        line = next(line for line in listed if line.split()[0] == name)
        # click cuts a summary it makes from the help with "..."; a long one wraps.
        assert line.split(None, 1)[1] == command.short_help, line
        assert command.short_help.endswith(".") and not command.short_help.endswith("...")


def test_durations_show_a_duration_metavar_with_examples():
    durations = {(name, opt) for name, command in main.commands.items() for p in command.params
                 if isinstance(p.type, Duration) for opt in p.opts}
    assert {("search", "--budget"), ("search", "--timeout")} <= durations
    for name, opt in durations:
        shown = " ".join(invoke(name, "--help").stdout.split())
        assert f"{opt} DURATION" in shown, (name, opt)
        assert re.search(rf"{opt} DURATION .{{0,80}}?\be\.g\. \d+[hms]", shown), (name, opt)


def test_every_command_prints_json_with_json():
    for name, command in main.commands.items():
        assert "--json" in {o for p in command.params for o in p.opts}, name


def test_show_lists_the_shape_schedule_replay_of_every_trial(tmp_path):
    result = invoke(*search_args(tmp_path, name="sched", shape_schedule="1,8,1",
                                 dynamic="false,true"))
    assert result.exit_code == 0, result.stderr
    shown = invoke("show", str(tmp_path / "sched"))
    assert "shape schedule 1,8,1 replayed" in shown.stdout
    table = shown.stdout.split("counted apart):\n")[1].splitlines()
    assert "1 ms" in table[0] and "8 ms" in table[0]
    rows = [line for line in table[1:] if line.strip() and line.split()[0].isdigit()]
    assert len(rows) == 6  # eager + inductor default dynamic=False/True, at 2 batch sizes
    data = json.loads(invoke("show", str(tmp_path / "sched"), "--json").stdout)["shape_schedule"]
    assert len(data) == 6
    assert {tuple(s["shape"] for s in r["shapes"]) for r in data} == {("1", "8")}
    static = [r for r in data if r["label"] == "inductor:default" and r["batch_size"] == 1]
    assert static[0]["recompiles"] == 1  # the fake runner's: one new shape, one recompile


def test_a_sequence_length_for_a_torchvision_model_is_a_one_line_error(tmp_path):
    result = invoke(*search_args(tmp_path, shape_schedule="1x64"))
    assert_one_line_error(result, "1x64", "only a factory model takes")


def test_ctrl_c_before_a_search_begins_exits_130_with_one_line_not_aborted(tmp_path, monkeypatch):
    # The first seconds of a search (checks, importing torch) are before its own Ctrl-C
    # handler: click said "Aborted!" and exited 1 there, as if the search had failed.
    from tuner.launch import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "make_runner", interrupted)
    result = invoke(*search_args(tmp_path))
    assert result.exit_code == 130, result.output
    # CliRunner names the program "main"; the installed command, "tuner"
    assert re.fullmatch(r"stopped by Ctrl-C \(\w+ search\)", result.stderr.strip()), result.stderr


def test_a_search_records_what_this_torch_runs_for_the_options_it_searches(tmp_path, fake_cli):
    # The names of show, recommend and compare come from it, without importing torch there.
    result = invoke(*search_args(tmp_path, "--inductor-option", "freezing=true,false",
                                 batch_sizes="1"))
    assert result.exit_code == 0, result.stderr
    trials, meta = files.read(tmp_path / STUDY)
    assert meta["option_defaults"] == {"default": {"freezing": False}}  # torch 2.14.1's
    assert sorted(trials["name"]) == ["default", "default +freezing", "eager"]
    assert re.search(r"^\[\d/3\] trial \d default \+freezing bs=1: ", result.stderr, re.M)
    assert "  running default +freezing bs=1 ..." in result.stderr


def test_show_names_configs_without_importing_torch():
    study = str(ROOT / "studies" / "h200-resnet50-bf16-extended")
    code = ("import sys; from tuner.cli.app import main; "
            f"main(['show', {study!r}, '--wide'], standalone_mode=False); "
            "print('torch' in sys.modules)")
    piped = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # 120 columns
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=piped)
    assert "reduce-overhead +channels_last -epilogue_fusion +freezing -shape_padding" in out.stdout
    assert out.stdout.splitlines()[-1] == "False"
