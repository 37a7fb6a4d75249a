"""Every bad input to every command: a non-zero exit, one ``Error:`` line on stderr and no
traceback, nothing on stdout, and the studies already there left byte-identical."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import (
    OTHER,
    STUDY,
    assert_one_line_error,
    fingerprint,
    invoke,
    missing,
    search_args,
    two_studies,
)

pytestmark = pytest.mark.usefixtures("fake_cli")

@pytest.fixture(scope="module")
def root(tmp_path_factory, fake_cli_for_module) -> Path:
    """A studies folder with two finished studies (fake runner) and a file that is no study."""
    root = two_studies(tmp_path_factory.mktemp("studies"))
    (root / "junk.txt").write_text("not a study\n")
    (root / "space-typo.toml").write_text("batch_size = [1, 8]\n")
    (root / "space-broken.toml").write_text("modes = [default\n")
    (root / "space-binary.toml").write_bytes(b"\xff\xfe")
    (root / "no-db").mkdir()  # a study folder copied without its study.db
    shutil.copy(root / STUDY / "trials.parquet", root / "no-db")
    (root / "space-scalar.toml").write_text("dtypes = \"bfloat16\"\n")
    (root / "space-cudnn.toml").write_text('cudnn_benchmark = [false]\nbackends = ["eager", '
                                           '"inductor"]\nmodes = ["default"]\n')
    return root


def search(**options: str) -> list[str]:
    """``search`` of the prepared study with ``options`` changed (a resume, but for them)."""
    return search_args("{root}", **options)


S = f"{{root}}/{STUDY}"
CASES = [
    ("search-space-missing", search(space="{root}/nothing.toml"), ["--space", "no such file"]),
    ("search-space-unknown-key", search(space="{root}/space-typo.toml"),
     ["unknown key 'batch_size'", "did you mean 'batch_sizes'"]),
    ("search-space-not-toml", search(space="{root}/space-broken.toml"), ["not valid TOML"]),
    ("search-space-not-text", search(space="{root}/space-binary.toml"), ["not UTF-8 text"]),
    ("search-space-not-a-list", search(space="{root}/space-scalar.toml"),
     ["dtypes must be a non-empty list"]),
    # search: the device, numbers that make no sense, backends, names, another protocol.
    ("search-device-cuda-9", search(device="cuda:9"), ["--device cuda:9", "no GPU 9"]),
    ("search-device-tpu", search(device="tpu"), ["unknown device 'tpu'"]),
    ("search-device-cuda-x", search(device="cuda:x"), ["unknown device 'cuda:x'"]),
    # cuda:00 was stored as written, then cuda:0 was "another workload"
    ("search-device-cuda-00", search(device="cuda:00"), ["unknown device 'cuda:00'"]),
    ("search-min-seconds-nan", search(min_seconds="nan"), ["--min-seconds", "not a finite"]),
    ("search-min-seconds-inf", search(min_seconds="inf"), ["--min-seconds"]),
    ("search-min-seconds-negative", search(min_seconds="-1"), ["--min-seconds"]),
    ("search-min-calls-2", search(min_calls="2"), ["--min-calls"]),
    ("search-image-size-0", search(image_size="0"), ["--image-size"]),
    ("search-image-size-negative", search(image_size="-5"), ["--image-size"]),
    ("search-trials-0", search(trials="0"), ["--trials"]),
    ("search-confirm-negative", search(confirm="-1"), ["--confirm"]),
    ("search-seed-text", search(seed="x"), ["--seed"]),
    ("search-seed-negative", search(seed="-1"), ["--seed"]),
    ("search-budget-nan", search(budget="nan"), ["duration 'nan'"]),
    ("search-timeout-inf", search(timeout="inf"), ["duration 'inf'"]),
    ("search-compile-timeout-0", search(compile_timeout="0"),
     ["--compile-timeout duration '0' is not more than zero", "or none for no limit"]),
    ("search-compile-timeout-text", search(compile_timeout="soon"),
     ["--compile-timeout cannot read duration 'soon'", "or none for no limit"]),
    ("search-compile-timeout-nan", search(compile_timeout="nan"),
     ["--compile-timeout cannot read duration 'nan'"]),
    ("search-compile-timeout-negative", search(compile_timeout="-5m"),
     ["--compile-timeout cannot read duration '-5m'"]),
    ("search-batch-sizes-empty", search(batch_sizes=""), ["no batch size"]),
    ("search-batch-sizes-0", search(batch_sizes="0"), ["batch size '0'"]),
    ("search-dtype-float8", search(dtype="float8"), ["--dtype"]),
    # an empty item is an error, not dropped: `--mode ,` would otherwise mean every mode
    ("search-mode-only-a-comma", search(mode=","), ["--mode ','", "an empty value"]),
    ("search-dtype-empty-item", search(dtype="float32,,bfloat16"),
     ["--dtype 'float32,,bfloat16'", "an empty value"]),
    ("search-backend-blank", search(backend=" "), ["--backend ' '", "an empty value"]),
    ("search-dynamic-trailing-comma", search(dynamic="false,"), ["--dynamic 'false,'"]),
    ("search-option-empty-value", search(inductor_option="epilogue_fusion=true,,false"),
     ["--inductor-option 'true,,false'", "an empty value"]),
    ("search-option-none-and-another", search_args("{root}", "--inductor-option", "none",
                                                   "--inductor-option", "epilogue_fusion=true"),
     ["--inductor-option none", "cannot be given beside other"]),
    pytest.param("search-backend-tvm", search(backend="tvm"), ["'tvm'", "pip install apache-tvm"],
                 marks=missing("tvm")),
    pytest.param("search-backend-openxla", search(backend="openxla"),
                 ["'openxla'", "pip install torch_xla"], marks=missing("torch_xla")),
    ("search-backend-unknown", search(backend="warp-drive"), ["unknown backend 'warp-drive'"]),
    ("search-name-escape", search(name="../escape"), ["'../escape'", "not a folder name"]),
    ("search-name-nested", search(name="a/b"), ["'a/b'", "not a folder name"]),
    ("search-name-empty", search(name=""), ["''", "not a folder name"]),
    ("search-another-min-seconds", search(min_seconds="1"),
     ["another trial protocol", "--min-seconds: study has 2 s, asked 1 s"]),
    ("search-another-min-calls", search(min_calls="10"), ["another trial protocol", "--min-calls: study has 50, asked 10"]),
    ("search-another-compile-timeout", search(compile_timeout="10m"),
     ["another trial protocol", "--compile-timeout: study has 300 s, asked 600 s"]),
    ("search-another-warm-cache", search_args("{root}", "--warm-cache"),
     ["another trial protocol", "--warm-cache: study has false, asked true"]),
    ("search-another-dtype", search(dtype="bfloat16"), ["another workload", "dtype"]),
    ("search-another-batch-sizes", search(batch_sizes="1,8,32"), ["another search space"]),
    ("search-gpus-99", search(gpus="99", device=None), ["no GPU 99"]),
    ("search-gpus-on-cpu", search(gpus="0"), ["--gpus", "drop --device cpu"]),
    ("search-unknown-option", search_args("{root}", "--bogus"), ["--bogus"]),
    ("search-option-without-its-value", ["search", "--model"],
     ["Option '--model' requires an argument", " search --help)"]),
    ("search-unknown-model", search(model="resnet19"), ["unknown model 'resnet19'"]),
    ("search-seq-len-for-torchvision", search(shape_schedule="1x64"), ["only a factory model"]),
    ("search-storage-bogus", search(storage="bogus://x"),
     ["cannot open --storage bogus://x", "unknown kind of database 'bogus'"]),
    ("search-storage-in-memory", search(storage="sqlite://"),
     ["'sqlite://' is an in-memory SQLite database", "give a file"]),
    ("search-storage-empty", search(storage=""), ["'--storage': is empty"]),
    ("search-name-of-a-file", search(name="junk.txt"),
     ["cannot make the study folder ", "junk.txt: a file of that name is there; pick another "
      "--name, or move the file"]),
    # its Parquet column could not hold it: every later export of the study raised OverflowError
    ("search-inductor-option-beyond-int64",
     search_args("{root}", "--inductor-option", f"max_fusion_size={2**64}"),
     [f"--inductor-option max_fusion_size: '{2**64}' is beyond a 64-bit integer"]),
    # a trial stops timing after TrialProtocol.max_seconds: 90 was stored, and 60 s timed
    ("search-min-seconds-past-what-a-trial-times", search(min_seconds="90"),
     ["Invalid value for '--min-seconds': 90.0 is not in the range 0<=x<=60.0"]),
    # the file's one value on the CPU was kept as the workload's, as the option's was
    ("search-space-cudnn-benchmark-on-cpu", search(space="{root}/space-cudnn.toml", backend=None,
                                                   mode=None),
     ["--cudnn-benchmark applies to CUDA only; this run is on cpu: drop it (from "
      "cudnn_benchmark in --space "]),
    # made, then `tuner show -dash` read it as options
    ("search-name-like-an-option", search(name="-dash"), ["study name '-dash' starts with '-'"]),
    # 400 digits are inf seconds: stored, and no resume could ask for it again
    ("search-duration-too-long", search(compile_timeout="9" * 400),
     ["--compile-timeout duration '999999999999...999999' is too long"]),
    ("search-gpus-superscript-digit", search(gpus="0,\u00b2", device=None),
     ["--gpus '0,\u00b2': give GPU indices such as 0,1, or all"]),
    ("search-device-empty", search(device=""), ["--device is empty", "cpu, cuda or cuda:N"]),
    # one value given on the CPU was kept as the workload's, as if it meant something there
    ("search-cudnn-benchmark-on-cpu", search(cudnn_benchmark="false"),
     ["--cudnn-benchmark applies to CUDA only; this run is on cpu: drop it"]),
    ("search-dynamic-with-eager-alone", search(backend="eager", mode=None, dynamic="true"),
     ["--dynamic applies to compiled backends only", "add inductor to --backend"]),
    # show
    ("show-no-such-study", ["show", "{root}/nope"], ["no such file"]),
    # a name: perhaps a study in another host's --storage, which has no files here yet
    ("show-no-such-study-name", ["show", "nope", "--studies-dir", "{root}"],
     ["no study 'nope' in ", "`tuner worker --study nope --storage URL --export-only`"]),
    ("show-not-parquet", ["show", "{root}/junk.txt"], ["not a readable Parquet file"]),
    ("show-not-a-regular-file", ["show", "/dev/null"], ["/dev/null: not a regular file"]),
    ("show-name-too-long", ["show", "y" * 5000], ["cannot read it (File name too long)"]),
    ("show-unknown-option", ["show", S, "--bogus"], ["--bogus"]),
    # Path("") is the working folder: its trials.parquet, or its parent as the studies folder
    *[(f"{command}-study-empty", [command, "", *rest], ["a STUDY given is empty ('')"])
      for command, rest in (("show", []), ("recommend", ["--batch-size", "1"]), ("confirm", []),
                            ("compare", [S]), ("plot", []))],
    # the front alone: eager's rows, which "vs eager" and the fronts are chosen against, are gone
    ("show-the-pareto-file", ["show", f"{S}/pareto.parquet", "--all"],
     ["pareto.parquet holds only a study's Pareto-optimal trials", "give the study folder"]),
    ("recommend-the-pareto-file", ["recommend", f"{S}/pareto.parquet", "--batch-size", "1"],
     ["holds only a study's Pareto-optimal trials"]),
    # recommend: limits must be finite and positive
    ("recommend-max-vram-nan", ["recommend", S, "--max-vram-gb", "nan"], ["--max-vram-gb"]),
    ("recommend-max-vram-inf", ["recommend", S, "--max-vram-gb", "inf"], ["--max-vram-gb"]),
    ("recommend-max-vram-negative", ["recommend", S, "--max-vram-gb", "-1"], ["--max-vram-gb"]),
    ("recommend-max-vram-0", ["recommend", S, "--max-vram-gb", "0"], ["--max-vram-gb"]),
    ("recommend-max-compile-negative", ["recommend", S, "--max-compile-s", "-1"],
     ["--max-compile-s"]),
    ("recommend-max-latency-nan", ["recommend", S, "--max-latency-ms", "nan"],
     ["--max-latency-ms"]),
    ("recommend-batch-size-0", ["recommend", S, "--batch-size", "0"], ["--batch-size"]),
    ("recommend-batch-size-without-its-value", ["recommend", S, "--batch-size"],
     ["requires an argument", " recommend --help)"]),
    ("recommend-batch-size-not-measured", ["recommend", S, "--batch-size", "3"], ["3"]),
    ("recommend-several-batch-sizes", ["recommend", S], ["--batch-size"]),
    ("recommend-objective-unknown", ["recommend", S, "--objective", "speed"], ["--objective"]),
    ("recommend-no-such-study", ["recommend", "{root}/nope"], ["no such file"]),
    ("recommend-no-such-study-name", ["recommend", "nope", "--studies-dir", "{root}"],
     ["no study 'nope' in ", "--export-only"]),
    # confirm
    ("confirm-repeats-0", ["confirm", S, "--repeats", "0"], ["--repeats"]),
    ("confirm-timeout-0", ["confirm", S, "--timeout", "0"], ["more than zero"]),
    ("confirm-no-such-study", ["confirm", "nope", "--studies-dir", "{root}"], ["no study 'nope'"]),
    ("confirm-results-without-study-db", ["confirm", "no-db", "--studies-dir", "{root}"],
     ["no-db holds a study's results (trials.parquet) but no study.db", "copy it along"]),
    ("confirm-name-escape", ["confirm", "../escape", "--studies-dir", "{root}"],
     ["not a folder name"]),
    # a mistyped SQLite path: no study there, and no empty database file left behind
    ("confirm-storage-no-such-file", ["confirm", STUDY, "--storage", "sqlite:///{root}/typo.db"],
     ["no study", "names a SQLite file that does not exist"]),
    # worker
    ("worker-storage-no-such-file", ["worker", "--study", STUDY, "--storage",
                                     "sqlite:///{root}/typo.db"],
     ["no study", "names a SQLite file that does not exist"]),
    ("worker-no-such-study", ["worker", "--study", "nope", "--studies-dir", "{root}"],
     ["no study 'nope'"]),
    ("worker-name-escape", ["worker", "--study", "../escape", "--studies-dir", "{root}"],
     ["not a folder name"]),
    ("worker-gpu-on-a-cpu-study", ["worker", "--study", STUDY, "--studies-dir", "{root}",
                                   "--gpu", "0"], ["runs on cpu", "drop --gpu"]),
    ("worker-gpu-negative", ["worker", "--study", STUDY, "--studies-dir", "{root}", "--gpu", "-1"],
     ["--gpu"]),
    ("worker-export-only-seed", ["worker", "--study", STUDY, "--studies-dir", "{root}",
                                 "--export-only", "--seed", "3"],
     ["--export-only measures nothing: drop --seed"]),
    ("worker-trials-0", ["worker", "--study", STUDY, "--studies-dir", "{root}", "--trials", "0"],
     ["--trials"]),
    # compare
    ("compare-one-study", ["compare", S], ["at least two studies"]),
    ("compare-no-such-study", ["compare", S, "{root}/nope"], ["no such file"]),
    ("compare-not-a-study", ["compare", S, "{root}/junk.txt"], ["not a readable Parquet file"]),
    ("compare-plot-to-a-folder", ["compare", S, f"{{root}}/{OTHER}", "--plot", S], ["--plot"]),
    ("compare-plot-empty", ["compare", S, f"{{root}}/{OTHER}", "--plot", ""],
     ["'--plot': is empty: give a path"]),
    ("plot-out-empty", ["plot", S, "--out", ""], ["'--out': is empty: give a path"]),
    ("search-studies-dir-empty", search(studies_dir=""), ["'--studies-dir': is empty"]),
    # no such command
    ("unknown-command", ["serch"], ["No such command 'serch'"]),
]


def _name(case) -> str:
    return case.values[0] if hasattr(case, "values") else case[0]


@pytest.mark.parametrize("name, template, words", CASES, ids=[_name(c) for c in CASES])
def test_bad_input_is_one_line_and_changes_no_study(root, name, template, words):
    before = fingerprint(root)
    result = invoke(*[arg.replace("{root}", str(root)) for arg in template])
    assert "Traceback" not in result.stderr
    assert_one_line_error(result, *words)
    assert fingerprint(root) == before


def test_there_are_at_least_thirty_across_every_command():
    commands = {_name(c).split("-")[0] for c in CASES}
    assert len(CASES) >= 30
    assert {"search", "show", "confirm", "recommend", "compare", "worker"} <= commands


# -- a CUDA device this machine cannot give, for real (no fake GPUs) -----------------------------

def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count()


def _real_tuner(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", "search", "--model", "resnet18",
                           "--studies-dir", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(_cuda_count() > 0, reason="this machine has a GPU")
def test_device_cuda_without_a_gpu_stops_before_any_trial(tmp_path):
    for device in ("cuda", "cuda:0"):
        done = _real_tuner(tmp_path, "--device", device)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"Error: --device {device}")
        assert "torch sees no CUDA GPU" in done.stderr
        assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
@pytest.mark.skipif(_cuda_count() == 0, reason="needs a CUDA device")
def test_device_cuda_beyond_the_visible_gpus_stops_before_any_trial(tmp_path):
    count = _cuda_count()
    done = _real_tuner(tmp_path, "--device", f"cuda:{count}")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"Error: --device cuda:{count}, but there is no GPU {count}: torch "
                           f"sees {count} (cuda:0-cuda:{count - 1})\n")
    assert list(tmp_path.iterdir()) == []


# -- resuming: the trial protocol is part of what a study is ------------------------------------

def _open(tmp_path: Path, **protocol):
    from tuner.domain.records import TrialProtocol
    from tuner.domain.space import SearchSpace
    from tuner.domain.workload import Workload
    from tuner.study.spec import StudySpec
    from tuner.study.storage import open_study

    spec = StudySpec(name="proto", workload=Workload("resnet18"), root=tmp_path,
                     space=SearchSpace(("eager",), ("default",), (False,), (1,)),
                     protocol=TrialProtocol(**protocol))
    return open_study(spec).main


def test_an_older_studys_protocol_resumes_on_the_fields_it_has_and_is_not_rewritten(tmp_path):
    from tuner.errors import UserError
    from tuner.study.storage import PROTOCOL_ATTR

    study = _open(tmp_path)
    # Stored by an older tuner: a field this one added is missing, and the per-trial
    # measure_peak flag was stored as the first trial had it.
    stored = {k: v for k, v in study.user_attrs[PROTOCOL_ATTR].items() if k != "max_samples_kept"}
    study.set_user_attr(PROTOCOL_ATTR, {**stored, "measure_peak": True})
    assert _open(tmp_path).user_attrs[PROTOCOL_ATTR] == {**stored, "measure_peak": True}
    with pytest.raises(UserError, match="another trial protocol .*--min-seconds: study has 2 s, "
                                        "asked 0.5 s"):
        _open(tmp_path, min_seconds=0.5)
    assert _open(tmp_path).user_attrs[PROTOCOL_ATTR] == {**stored, "measure_peak": True}


# -- default names: one per factory, not one per module -----------------------------------------

def test_two_factories_of_one_module_get_a_default_study_each(tmp_path):
    for factory in ("tiny_cnn", "graph_break"):
        result = invoke(*search_args(tmp_path, model=f"tests.support.models:{factory}", backend="eager",
                                     mode=None, batch_sizes="1"))
        assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models-graph_break-cpu",
                                                         "models-tiny_cnn-cpu"]


# -- a CUDA study joined from a machine without a GPU -------------------------------------------

def test_worker_and_confirm_of_a_cuda_study_need_a_gpu_here(tmp_path, monkeypatch):
    from tests.support import workers
    from tuner.launch import gpus

    workers.create(tmp_path, "on-cuda", storage=None, space=workers.SPACE_SMALL)
    monkeypatch.setattr(gpus, "visible_gpus", lambda: 0)
    before = fingerprint(tmp_path)
    for args in (["worker", "--study", "on-cuda", "--studies-dir", str(tmp_path)],
                 ["confirm", str(tmp_path / "on-cuda")]):
        assert_one_line_error(invoke(*args), "study 'on-cuda' runs on cuda",
                              "torch sees no CUDA GPU")
        assert fingerprint(tmp_path) == before
    # Exporting measures nothing, so it needs no GPU.
    assert invoke("worker", "--study", "on-cuda", "--studies-dir", str(tmp_path),
                  "--export-only").exit_code == 0


def test_export_only_refuses_the_options_of_measuring(tmp_path):
    from tests.support import workers

    workers.create(tmp_path, "s", storage=None, space=workers.SPACE_SMALL)
    before = fingerprint(tmp_path)
    assert_one_line_error(invoke("worker", "--study", "s", "--studies-dir", str(tmp_path),
                                 "--export-only", "--trials", "5", "--gpu", "0"),
                          "--export-only measures nothing: drop --gpu and --trials")
    assert fingerprint(tmp_path) == before


# -- items of the issue fixed before this file: checked here, not trusted ----------------------

def test_show_all_does_not_call_every_trial_pareto_optimal(root):
    result = invoke("show", f"{root}/{STUDY}", "--all")
    assert result.exit_code == 0, result.stderr
    assert "batch size 1: every trial" in result.stdout
    assert "Pareto-optimal" not in result.stdout


def test_the_python_snippet_names_the_artifacts_by_an_absolute_path(root, monkeypatch):
    monkeypatch.chdir(root)  # the study given by a path relative to here
    result = invoke("recommend", STUDY, "--batch-size", "1", "--format", "python")
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("ARTIFACTS = Path("))
    path = Path(line[len("ARTIFACTS = Path("):-1].strip("'\""))
    assert path.is_absolute() and path.is_file()


@pytest.mark.parametrize("value", ["abc", "0", "1.5", "\u00b2"])
def test_a_bad_heartbeat_variable_is_one_line_naming_it(tmp_path, monkeypatch, value):
    # "²" passed str.isdigit() and then int() raised: "cannot open storage ...: invalid literal"
    monkeypatch.setenv("TUNER_HEARTBEAT_INTERVAL_S", value)
    assert_one_line_error(invoke(*search_args(tmp_path)),
                          f"TUNER_HEARTBEAT_INTERVAL_S={value!r}: give a whole number of seconds "
                          "above zero")



@pytest.mark.parametrize("url, said", [(" ", "is empty: give a URL, or unset TUNER_STORAGE"),
                                       ("sqlite://", "is an in-memory SQLite database")])
def test_a_bad_tuner_storage_is_named_as_the_variable_not_the_option(root, monkeypatch, url,
                                                                     said):
    # It said "Invalid value for '--storage': ... or leave --storage out", which the user did.
    monkeypatch.setenv("TUNER_STORAGE", url)
    for args in (["confirm", f"{root}/{STUDY}"], search_args(root),
                 ["worker", "--study", STUDY, "--studies-dir", str(root)]):
        result = invoke(*args)
        assert_one_line_error(result, f"TUNER_STORAGE={url!r} {said}")
        assert "--storage" not in result.stderr


def test_a_heartbeat_grace_within_one_beat_is_refused(tmp_path, monkeypatch):
    # Accepted: other searches would then fail every live trial as stale.
    monkeypatch.setenv("TUNER_HEARTBEAT_INTERVAL_S", "100")
    monkeypatch.setenv("TUNER_HEARTBEAT_GRACE_S", "5")
    assert_one_line_error(invoke(*search_args(tmp_path)),
                          "TUNER_HEARTBEAT_GRACE_S=5 is not more than the 100 s between "
                          "heartbeats (TUNER_HEARTBEAT_INTERVAL_S)", "the defaults: 20 and 120")

