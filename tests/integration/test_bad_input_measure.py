"""Bad input to the commands that measure (search, worker, confirm: tuner/cli/measure.py): each
gets a one-line ``Error:`` (naming only options of the command that was run) and a non-zero exit,
and records nothing. The same for every command at once: test_bad_input.py."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.cli import STUDY, assert_one_line_error, fingerprint, invoke, search_args
from tuner.domain.records import Status
from tuner.fake import FakeRunner

pytestmark = pytest.mark.usefixtures("fake_cli")


@pytest.fixture(scope="module")
def root(tmp_path_factory, fake_cli_for_module) -> Path:
    """A studies folder with one finished study (fake runner), its finalists confirmed once."""
    root = tmp_path_factory.mktemp("studies")
    result = invoke(*search_args(root, "--confirm", "1"))
    assert result.exit_code == 0, result.stderr
    return root


def fake_runner_failing(monkeypatch, **fail: Status) -> None:
    """Every runner the CLI makes is a FakeRunner whose configs (by label) end as ``fail``."""
    from tuner.launch import runner as runners

    failing = {label.replace("_", ":"): status for label, status in fail.items()}
    monkeypatch.setattr(runners, "make_runner",
                        lambda settings, shared_cache=None: FakeRunner(fail=failing))


# -- 1: a factory model the worker or confirm run cannot import ---------------------------------

MODULE = "tuner_test_model_only_there"  # a module on no path but its own folder's


def test_worker_and_confirm_refuse_a_factory_model_they_cannot_import(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the commands add their folder to it
    made_in, elsewhere, studies = tmp_path / "made-in", tmp_path / "elsewhere", tmp_path / "s"
    made_in.mkdir()
    elsewhere.mkdir()
    (made_in / f"{MODULE}.py").write_text("from tests.support.models import tiny_cnn as make\n")
    # The study is made in the model's folder, one of its two configs measured.
    monkeypatch.chdir(made_in)
    result = invoke(*search_args(studies, "--trials", "1", model=f"{MODULE}:make",
                                 batch_sizes="1"))
    assert result.exit_code == 0, result.stderr
    # Then joined from another folder, where the module is not to be found.
    sys.path.remove(str(made_in))
    monkeypatch.delitem(sys.modules, MODULE)
    importlib.invalidate_caches()
    monkeypatch.chdir(elsewhere)
    study = f"{MODULE}-make-cpu"
    before = fingerprint(studies)
    for command, args in (("worker", ["--study", study, "--studies-dir", str(studies)]),
                          ("confirm", [str(studies / study)])):
        assert_one_line_error(invoke(command, *args), f"cannot import '{MODULE}'",
                              f"the model {MODULE}:make of study '{study}'",
                              f"run `tuner {command}` from the folder the study was made in")
        assert fingerprint(studies) == before
    # From the folder it was made in, the worker measures the other config.
    monkeypatch.chdir(made_in)
    result = invoke("worker", "--study", study, "--studies-dir", str(studies))
    assert result.exit_code == 0, result.stderr
    assert "1 new trial, 2 in the study" in result.stderr


# -- 2: nothing to confirm -----------------------------------------------------------------------

def test_confirm_of_a_study_where_no_trial_finished_ok_is_a_one_line_error(tmp_path, monkeypatch):
    fake_runner_failing(monkeypatch, eager=Status.CRASH)
    result = invoke(*search_args(tmp_path, "--confirm", "0", "-q"))
    assert_one_line_error(result, "the model cannot run at any batch size")  # but the study stays
    before = fingerprint(tmp_path)
    assert_one_line_error(invoke("confirm", str(tmp_path / STUDY)), "nothing to confirm",
                          f"no trial of study '{STUDY}' finished ok",
                          f"tuner show {tmp_path / STUDY} --all")
    assert fingerprint(tmp_path) == before


# -- 3: a CUDA study on a machine without a GPU ---------------------------------------------------

def test_worker_and_confirm_of_a_cuda_study_suggest_only_what_they_can_do(tmp_path, monkeypatch):
    from tests.support import workers
    from tuner.launch import gpus

    workers.create(tmp_path, "on-cuda", storage=None, space=workers.SPACE_SMALL)
    monkeypatch.setattr(gpus, "visible_gpus", lambda: 0)
    for args in (["worker", "--study", "on-cuda", "--studies-dir", str(tmp_path)],
                 ["confirm", str(tmp_path / "on-cuda")]):
        result = invoke(*args)
        assert_one_line_error(result, "study 'on-cuda' runs on cuda", "torch sees no CUDA GPU",
                              "run it on a machine with a GPU",
                              "make a new study with `tuner search --device cpu`")
        assert "use --device" not in result.stderr


# -- 4: each command's message names its own arguments --------------------------------------------

def test_a_renamed_study_folder_gets_the_name_to_give_it_back(root, tmp_path):
    shutil.copytree(root / STUDY, tmp_path / "renamed")
    for args in (["confirm", str(tmp_path / "renamed")],
                 ["worker", "--study", "renamed", "--studies-dir", str(tmp_path)]):
        result = invoke(*args)
        assert_one_line_error(result, f"holds study '{STUDY}', not 'renamed'",
                              f"rename the folder back to {STUDY}")
        assert "check --study" not in result.stderr


def test_confirm_of_a_parquet_file_asks_for_its_study_folder(root):
    result = invoke("confirm", str(root / STUDY / "trials.parquet"))
    assert_one_line_error(result, "is a file", f"give the study folder it is in ({root / STUDY})")
    assert "--name" not in result.stderr


@pytest.mark.parametrize("given", [STUDY, f"{STUDY}/trials.parquet"])
def test_worker_given_a_path_gets_the_study_and_studies_dir_it_means(root, given):
    result = invoke("worker", "--study", str(root / given))
    assert_one_line_error(result, "--study takes a study's name",
                          f"give --study {STUDY} --studies-dir {root}")
    assert "--name" not in result.stderr


def test_confirm_of_a_study_not_in_its_storage_names_study_not_the_worker_option(root):
    result = invoke("confirm", "nope", "--storage", f"sqlite:///{root / STUDY / 'study.db'}")
    assert_one_line_error(result, "no study 'nope'", f"it holds '{STUDY}'", "check STUDY")
    assert "--study" not in result.stderr


# -- 5: confirm --repeats -----------------------------------------------------------------------

def test_confirm_repeats_that_are_no_number_name_repeats(root):
    result = invoke("confirm", str(root / STUDY), "--repeats", "x")
    assert_one_line_error(result, "--repeats 'x'", "e.g. --repeats 3")
    assert "--confirm" not in result.stderr


# -- 7: a --timeout no trial can finish within ---------------------------------------------------

def test_a_timeout_shorter_than_the_timing_it_must_hold_is_refused(tmp_path):
    result = invoke(*search_args(tmp_path, timeout="0.01s"))
    assert_one_line_error(result, "--timeout 0.01 s leaves no trial time to finish",
                          "2 s each (--min-seconds)")
    assert list(tmp_path.iterdir()) == []


def test_a_compile_budget_not_below_the_timeout_is_warned_about(tmp_path):
    # A compile past --timeout ends as timeout, which skips none of its mode's other configs.
    result = invoke(*search_args(tmp_path, "--compile-timeout", "10m", "--confirm", "0",
                                 timeout="90s"))
    assert result.exit_code == 0, result.output
    assert ("warning: --compile-timeout 600 s is not below --timeout 90 s: a long compile "
            "ends as timeout, not compile_timeout") in result.stderr
    fine = invoke(*search_args(tmp_path / "b", "--compile-timeout", "30s", "--confirm", "0",
                               timeout="90s"))
    assert fine.exit_code == 0 and "warning" not in fine.stderr
    # A worker joining the study (5-minute budget by default) with a shorter --timeout said
    # nothing.
    worker = invoke("worker", "--study", STUDY, "--studies-dir", str(tmp_path / "b"),
                    "--timeout", "4m", "--trials", "1")
    assert worker.exit_code == 0, worker.output
    assert ("warning: --compile-timeout 30 s (study 'resnet18-cpu') is not below --timeout") \
        not in worker.stderr
    worker = invoke("worker", "--study", STUDY, "--studies-dir", str(tmp_path / "b"),
                    "--timeout", "20s", "--trials", "1")
    assert worker.exit_code == 0, worker.output
    assert ("warning: --compile-timeout 30 s (study 'resnet18-cpu') is not below --timeout "
            "20 s: a long compile ends as timeout, not compile_timeout") in worker.stderr
    assert "give this worker a --timeout above it" in worker.stderr


def test_trials_that_all_time_out_are_not_blamed_on_the_model(tmp_path, monkeypatch):
    fake_runner_failing(monkeypatch, eager=Status.TIMEOUT)
    result = invoke(*search_args(tmp_path, "--confirm", "0", "-q"))
    assert_one_line_error(result, "no trial finished within --timeout at any batch size",
                          "raise --timeout")
    assert "cannot run" not in result.stderr


@pytest.mark.slow
def test_a_real_timeout_says_how_long_it_was(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "search", "--model", "tests.support.models:tiny_cnn", "--device",
         "cpu", "--backend", "eager", "--batch-sizes", "1", "--min-seconds", "0", "--timeout",
         "0.01s", "--confirm", "0", "--no-prestart", "-q", "--studies-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("Error: no trial finished within --timeout at any batch size")
    assert "no result after 0.01 s (--timeout)" in done.stderr


@pytest.mark.slow
def test_a_factory_that_asks_for_cuda_on_a_machine_without_it_is_one_line_after_one_trial(
        tmp_path):
    # It was a workload_error at each batch size, each a trial and a line saying the batch size
    # is skipped, and then a long error repeating torch's message once a batch size.
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "search", "--model", "tests.support.models:touches_cuda",
         "--device", "cpu", "--backend", "eager,inductor", "--mode", "default", "--batch-sizes",
         "1,2,4", "--confirm", "0", "-q", "--studies-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("Error: factory tests.support.models:touches_cuda asked for "
                                  "CUDA on a machine without CUDA ("), done.stderr
    assert "moves them to --device cpu; nothing was measured" in done.stderr
    study = tmp_path / "models-touches_cuda-cpu"
    url = f"sqlite:///{(study / 'study.db').resolve()}"
    import optuna

    ran = [t for name in optuna.get_all_study_names(storage=url)
           for t in optuna.load_study(study_name=name, storage=url).get_trials()
           if t.state != optuna.trial.TrialState.WAITING]
    assert len(ran) == 1  # one trial told it; no other batch size was tried
    assert not (study / "trials").exists()
    rows = study / "trials.parquet"
    assert not rows.exists() or len(importlib.import_module("pandas").read_parquet(rows)) == 0


# -- 8: empty inputs -----------------------------------------------------------------------------

def test_an_empty_space_file_is_a_one_line_error(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text("# nothing yet\n")
    studies = tmp_path / "studies"
    result = invoke(*search_args(studies, space=str(space)))
    assert_one_line_error(result, f"--space {space}: the file sets nothing", "batch_sizes")
    assert not studies.exists()


@pytest.mark.parametrize("schedule", ["", " "])
def test_an_empty_shape_schedule_is_a_one_line_error(tmp_path, schedule):
    result = invoke(*search_args(tmp_path, shape_schedule=schedule))
    assert_one_line_error(result, "--shape-schedule is empty")
    assert list(tmp_path.iterdir()) == []


# -- 8b: inductor option values and batch sizes no search can hold -------------------------------

def test_an_inductor_option_given_twice_as_dash_and_underscore_is_refused(tmp_path):
    result = invoke(*search_args(tmp_path, "--inductor-option", "epilogue_fusion=true",
                                 "--inductor-option", "epilogue-fusion=false"))
    assert_one_line_error(result, "inductor option epilogue_fusion given twice, as "
                                  "'epilogue_fusion' and 'epilogue-fusion'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["nan", "NaN", "inf"])
def test_an_inductor_option_that_is_not_a_finite_number_is_refused(tmp_path, value):
    result = invoke(*search_args(tmp_path, "--inductor-option", f"cpu_gpu_bw=1.0,{value}"))
    assert_one_line_error(result, f"--inductor-option cpu_gpu_bw: {value!r} is not a finite "
                                  "number")
    assert list(tmp_path.iterdir()) == []


def test_a_batch_size_past_the_int32_range_is_refused(tmp_path):
    result = invoke(*search_args(tmp_path, batch_sizes=f"1,{2**31}"))
    assert_one_line_error(result, f"batch size {2**31} is more than {2**31 - 1}",
                          "--batch-sizes")
    assert list(tmp_path.iterdir()) == []


# -- 9: --image-size with a factory model --------------------------------------------------------

def test_image_size_with_a_factory_model_is_a_one_line_error(tmp_path):
    result = invoke(*search_args(tmp_path, model="tests.support.models:tiny_cnn", image_size="32"))
    assert_one_line_error(result, "--image-size applies to torchvision models only",
                          "drop --image-size")
    assert list(tmp_path.iterdir()) == []


def test_a_factory_study_stored_with_an_image_size_resumes_without_it(tmp_path):
    # Made before --image-size was refused with a factory: the size it was given is stored, and
    # means nothing to the factory, so leaving it out must not read as another workload.
    import optuna

    from tuner.domain.layout import StudyLayout
    from tuner.study.storage import WORKLOAD_ATTR

    args = search_args(tmp_path, "--trials", "1", model="tests.support.models:tiny_cnn")
    assert invoke(*args).exit_code == 0
    name = next(p.name for p in tmp_path.iterdir() if p.is_dir())
    study = optuna.load_study(study_name=name,
                              storage=StudyLayout.of(tmp_path, name).sqlite_url)
    study.set_user_attr(WORKLOAD_ATTR, {**study.user_attrs[WORKLOAD_ATTR], "image_size": 32})
    again = invoke(*search_args(tmp_path, "--trials", "2", model="tests.support.models:tiny_cnn"))
    assert again.exit_code == 0, again.stderr
    assert "1 new trial, 2 in the study" in again.stderr


# -- 10: help ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["search", "worker", "confirm"])
def test_timeout_help_says_a_bare_number_is_seconds(command):
    shown = " ".join(invoke(command, "--help").stdout.split())
    assert "a bare number is seconds" in shown.split("--timeout DURATION", 1)[1][:200]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_output_to_a_full_disk_is_one_line_not_a_traceback():
    study = ROOT / "studies" / "cpu-resnet18"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "tuner", "show", str(study), "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["Error: No space left on device"]


@pytest.mark.parametrize(("model", "said"), [
    ("", "--model is empty"), (" ", "--model is empty"),
    (" resnet18", "--model ' resnet18' has spaces"),
    (":tiny_cnn", "--model ':tiny_cnn': expected package.module:factory"),
    ("tests.support.models:", "--model 'tests.support.models:': expected package.module:factory"),
])
def test_a_model_that_names_nothing_is_blamed_on_the_model_not_a_study_name(tmp_path, model, said):
    # Without --name the study is named after the model: '' gave "study name '-cpu' starts
    # with '-'", a name the user never gave.
    result = invoke(*search_args(tmp_path, model=model))
    assert_one_line_error(result, said)
    assert not list(tmp_path.iterdir())


# -- 11: CUDA-graph inductor options need a CUDA device -----------------------------------------

@pytest.mark.parametrize("option", ["triton.cudagraphs=true", "triton.cudagraphs=false,true",
                                    "triton.cudagraph-trees=false,true"])
def test_a_cuda_graph_inductor_option_on_the_cpu_is_refused_before_any_trial(tmp_path, option):
    result = invoke(*search_args(tmp_path, "--inductor-option", option))
    name = option.split("=")[0].replace("-", "_")
    assert_one_line_error(result, f"--inductor-option {name}: CUDA graphs need a CUDA device",
                          "this run is on cpu", "drop it")
    assert list(tmp_path.iterdir()) == []


def test_a_cuda_graph_inductor_option_in_a_space_file_on_the_cpu_is_refused(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text("[inductor_options]\n\"triton.cudagraphs\" = [false, true]\n")
    studies = tmp_path / "studies"
    result = invoke(*search_args(studies, space=str(space)))
    assert_one_line_error(result, "--inductor-option triton.cudagraphs: CUDA graphs need a CUDA "
                                  "device", "this run is on cpu")
    assert not studies.exists() or list(studies.iterdir()) == []


# -- 12: a file's path given where --model wants a module, a factory it cannot call -------------

@pytest.mark.parametrize("given", ["tests/support/models.py:tiny_cnn",
                                   "./tests/support/models.py:tiny_cnn",
                                   "tests/support/models:tiny_cnn",
                                   f"{ROOT}/tests/support/models.py:tiny_cnn"])
def test_a_model_given_as_a_file_path_gets_its_dotted_name(tmp_path, monkeypatch, given):
    monkeypatch.chdir(ROOT)
    result = invoke(*search_args(tmp_path, model=given, backend="eager", mode=None))
    assert_one_line_error(result, f"--model {given} names a file",
                          "give the module's dotted name instead, "
                          "--model tests.support.models:tiny_cnn",
                          "imported from the current folder or PYTHONPATH")
    assert list(tmp_path.iterdir()) == []


def test_a_model_file_outside_the_current_folder_is_put_on_pythonpath(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mymodels.py").write_text("from tests.support.models import tiny_cnn as make\n")
    result = invoke(*search_args(tmp_path / "studies", model=f"{elsewhere}/mymodels.py:make",
                                 backend="eager", mode=None))
    assert_one_line_error(result, "names a file", f"--model mymodels:make, with {elsewhere} on "
                                  "PYTHONPATH", "imported from the current folder or PYTHONPATH")


def test_a_factory_that_needs_more_than_the_batch_size_is_refused_before_any_trial(tmp_path):
    # Called with the batch size alone, it would fail in every trial.
    result = invoke(*search_args(tmp_path, model="tests.support.models:needs_two_arguments",
                                 shape_schedule="1x4"))
    assert_one_line_error(result, "tests.support.models:needs_two_arguments needs 2 arguments",
                          "seq_len=128")
    # nor one that takes no argument: every trial would fail calling it with the batch size
    result = invoke(*search_args(tmp_path, model="tests.support.models:takes_no_argument"))
    assert_one_line_error(result, "tests.support.models:takes_no_argument takes no argument",
                          "def factory(batch_size)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("model, shape_schedule, words", [
    ("batch_size_keyword_only", "", ["takes batch_size keyword-only (after *), but a factory "
                                     "is called with the batch size as its first positional"]),
    ("seq_len_keyword_only", "1x4", ["takes seq_len keyword-only (after *), while the tuner "
                                     "passes the sequence length as the second positional"]),
    ("needs_a_keyword", "", ["needs device keyword-only (after *), which the tuner does not "
                             "pass: give it a default"]),
], ids=["batch_size", "seq_len", "required"])
def test_a_factory_with_keyword_only_arguments_is_told_how_it_is_called(
        tmp_path, model, shape_schedule, words):
    # "takes no argument" or "takes only a batch size" was wrong for these.
    options = {"shape_schedule": shape_schedule} if shape_schedule else {}
    result = invoke(*search_args(tmp_path, model=f"tests.support.models:{model}", **options))
    assert_one_line_error(result, f"tests.support.models:{model}", *words)
    assert "takes no argument" not in result.stderr and "only a batch size" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_factory_module_that_exits_when_imported_is_a_one_line_error(tmp_path, monkeypatch):
    # argparse at the module's top level reads the tuner's own arguments and exits: that was
    # the module's usage message, as if from the tuner, and its exit code.
    args = search_args(tmp_path, model="tests.support.parses_argv_at_import:factory")
    monkeypatch.setattr(sys, "argv", ["tuner", *args])  # as the command line holds them
    result = invoke(*args)
    assert_one_line_error(result, "importing 'tests.support.parses_argv_at_import' for --model "
                          "tests.support.parses_argv_at_import:factory ended the process (SystemExit: 2)",
                          "error: unrecognized arguments", "if __name__ == ")
    assert "usage:" not in result.stderr
    assert list(tmp_path.iterdir()) == []
