"""tuner.recommend / `tuner recommend`: what a user gets from a study in production code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

import tuner
from tests.support import ROOT
from tests.support.synthetic import configs, fingerprint, write_study
from tests.support.text import flat
from tuner.cli.app import main
from tuner.data import files
from tuner.data.select import GIB
from tuner.domain.records import Status
from tuner.domain.space import SearchSpace, TrialConfig
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.runtime import fingerprint as fingerprint_module
from tuner.use.compare import compare
from tuner.use.environment import MismatchWarning
from tuner.use.recommend import Recommendation, recommend

# FakeRunner's numbers at batch size 1 (speed 1): p50 ms, memory, first call s
#   eager 6.25 / 0.96 GiB / 0 s              inductor:default 5.0 / 0.96 GiB / 15 s
#   cudagraphs 4.69 / 1.25 GiB / 3 s          inductor:reduce-overhead 3.75 / 1.25 GiB / 17 s
#   inductor:max-autotune 3.44 / 1.25 GiB / 90 s


@pytest.fixture(autouse=True)
def same_machine(monkeypatch):
    """By default the running process looks like the machine that made the studies."""
    monkeypatch.setattr(fingerprint_module, "collect", lambda device: fingerprint())


@pytest.fixture
def study(tmp_path):
    return write_study(tmp_path, "h200")


# -- choosing ----------------------------------------------------------------------------------
def test_latency_picks_the_fastest_verified_config(study):
    rec = recommend(study, batch_size=1)
    assert isinstance(rec, Recommendation)
    assert rec.config == TrialConfig("inductor", 1, "max-autotune", False)
    assert rec.measured.latency_ms_p50 == pytest.approx(3.4375)
    assert rec.measured.speedup_vs_eager == pytest.approx(6.25 / 3.4375)
    assert rec.workload == Workload(model="resnet18", device="cuda")
    assert rec.fingerprint["gpu_name"] == "NVIDIA H200"
    assert rec.row["label"] == "inductor:max-autotune" and rec.candidates == 5
    assert rec.mismatch == ()


def test_each_objective(study):
    assert recommend(study, batch_size=8, objective="throughput").config.label == \
        "inductor:max-autotune"
    # Memory: eager and inductor:default tie at 1.16 GiB; the lower p90 (inductor:default) wins.
    assert recommend(study, batch_size=8, objective="memory").config.label == "inductor:default"
    # Warm-up: eager costs no compile.
    assert recommend(study, batch_size=8, objective="warmup").config.label == "eager"


def test_throughput_may_choose_the_batch_size(study):
    rec = recommend(study, objective="throughput")
    assert rec.config.batch_size == 8 and rec.candidates == 10


def test_constraints(study):
    # 1.0 GiB leaves the configs without CUDA graphs; the fastest of them is inductor:default.
    assert recommend(study, batch_size=1, max_vram_gb=1.0).config.label == "inductor:default"
    # 20 s of compile leaves out max-autotune (90 s).
    assert recommend(study, batch_size=1, max_compile_s=20).config.label == \
        "inductor:reduce-overhead"
    # Cheapest warm-up that serves within 5 ms: cudagraphs (3 s compile, 4.69 ms).
    rec = recommend(study, batch_size=1, objective="warmup", max_latency_ms=5)
    assert rec.config.label == "cudagraphs"
    assert rec.constraints.max_latency_ms == 5


def test_vram_limit_counts_the_compile_peak(tmp_path):
    # Serving needs 1.25 GiB, but compiling reached 3 GiB: a 2 GiB card would not survive it.
    study = write_study(tmp_path, "s", trial_configs=configs([1], ["eager", "inductor:max-autotune"]),
                        changes={"inductor:max-autotune": {
                            "vram_bytes_compile_reserved": 3 * GIB}})
    assert recommend(study, max_vram_gb=2).config.label == "eager"
    assert recommend(study, max_vram_gb=4).config.label == "inductor:max-autotune"


def test_only_finished_and_verified_configs_are_recommended(tmp_path):
    study = write_study(
        tmp_path, "s", fail={"inductor:max-autotune": Status.OOM},
        changes={"inductor:reduce-overhead": {"correct": None},  # could not be checked
                 "cudagraphs": {"correct": False}})
    assert recommend(study, batch_size=1).config.label == "inductor:default"


def test_a_config_that_ran_eager_is_never_recommended_as_compiled(tmp_path):
    # max-autotune is the fastest, but dynamo compiled nothing: its calls ran eager.
    study = write_study(tmp_path, "s", changes={"inductor:max-autotune": {"ran_compiled": False}})
    assert recommend(study, batch_size=1).config.label == "inductor:reduce-overhead"
    only = write_study(tmp_path, "t", trial_configs=configs([1], ["inductor:default"]),
                       changes={"inductor:default": {"ran_compiled": False}})
    with pytest.raises(UserError, match=r"check \(1 compiled nothing, ran eager\); nothing"):
        recommend(only, batch_size=1)


def test_ties_are_broken_by_p90_then_warmup_then_trial(tmp_path):
    same = {"latency_ms_p50": 2.0, "latency_ms_p90": 2.5, "compile_s_cold": 10.0, "warmup_s": 0.0}
    study = write_study(
        tmp_path, "ties", trial_configs=configs([1], ["inductor:default", "inductor:reduce-overhead",
                                                      "cudagraphs", "inductor:max-autotune"]),
        changes={"inductor:default": dict(same),
                 "inductor:reduce-overhead": dict(same),
                 "cudagraphs": {**same, "compile_s_cold": 5.0},
                 "inductor:max-autotune": {**same, "latency_ms_p90": 2.1, "compile_s_cold": 50.0}})
    assert recommend(study).config.label == "inductor:max-autotune"  # lowest p90
    study = write_study(tmp_path, "ties2", trial_configs=configs([1], [
        "inductor:default", "inductor:reduce-overhead", "cudagraphs"]),
        changes={"inductor:default": dict(same), "inductor:reduce-overhead": dict(same),
                 "cudagraphs": {**same, "compile_s_cold": 5.0}})
    assert recommend(study).config.label == "cudagraphs"  # same p90, cheaper warm-up
    study = write_study(tmp_path, "ties3", trial_configs=configs([1], [
        "inductor:reduce-overhead", "inductor:default"]),
        changes={"inductor:default": dict(same), "inductor:reduce-overhead": dict(same)})
    rec = recommend(study)
    assert rec.config.label == "inductor:reduce-overhead" and rec.trial_number == 0
    assert all(recommend(study).config == rec.config for _ in range(3))  # deterministic


# -- clear failures ----------------------------------------------------------------------------
def test_nothing_feasible_names_the_closest_config_and_the_broken_limit(study):
    with pytest.raises(UserError) as err:
        recommend(study, batch_size=1, max_vram_gb=0.5, max_compile_s=60)
    text = str(err.value)
    # eager and inductor:default both need 0.96 GiB, the least overshoot; the objective
    # (latency) decides between them.
    assert "closest is default (batch size 1, trial 1)" in text
    assert "max_vram_gb" in text and "0.96 GiB" in text and "\n" not in text


def test_closest_config_breaks_only_the_limit_named(study):
    with pytest.raises(UserError, match=r"closest is max-autotune .*takes 90.0 s "
                                        r"where max_compile_s=85: relax max_compile_s$"):
        # max-autotune overshoots 85 s by 6%; reduce-overhead overshoots 3.5 ms by 7%.
        recommend(study, batch_size=1, max_compile_s=85, max_latency_ms=3.5, max_vram_gb=2)


def test_a_value_just_over_its_limit_is_shown_over_it(study):
    # a first compiled call of 0.0047 s; at the limit's one decimal it would read "0.0 s" and
    # seem within.
    study = write_study(study.parent, "quick", trial_configs=configs([1], ["inductor:default"]),
                        changes={"inductor:default": {"compile_s_cold": 0.0047}})
    with pytest.raises(UserError, match=r"takes 0\.005 s where max_compile_s=0\.001: relax"):
        recommend(study, max_compile_s=0.001)


def test_eagers_first_call_is_no_compile_time_a_limit_counts(study):
    # show lists eager's compile s as "-"; --max-compile-s counted its first call (0.0047 s)
    # and refused the one config that compiles nothing.
    both = write_study(study.parent, "both", trial_configs=configs([1], ["eager",
                                                                         "inductor:default"]),
                       changes={"eager": {"compile_s_cold": 0.0047}})
    rec = recommend(both, max_compile_s=0.001)
    assert rec.config.label == "eager"
    assert "one, default (trial 1), takes 15.0 s where max_compile_s=0.001" in rec.why_eager


def test_bad_requests_are_user_errors(study, tmp_path):
    with pytest.raises(UserError, match="measured batch sizes 1, 8"):
        recommend(study)  # latency, but at which batch size?
    with pytest.raises(UserError, match="did not measure batch size 4; it measured 1, 8"):
        recommend(study, batch_size=4)
    for wrong in ("8", True, 8.0):  # "8" is not batch size 8, and True is not 1
        with pytest.raises(UserError, match=f"batch_size must be an int such as 32, not {wrong!r}"):
            recommend(study, batch_size=wrong)
    import numpy as np
    assert recommend(study, batch_size=np.int64(8)).config.batch_size == 8  # from a DataFrame
    with pytest.raises(UserError, match="unknown objective 'speed'"):
        recommend(study, batch_size=1, objective="speed")
    with pytest.raises(UserError, match="max_vram_gb=-1"):
        recommend(study, batch_size=1, max_vram_gb=-1)
    failed = write_study(tmp_path, "failed", trial_configs=configs([1], ["inductor:default"]),
                         fail={"inductor:default": Status.COMPILE_ERROR})
    with pytest.raises(UserError, match=r"correctness check \(1 compile_error\); nothing can"):
        recommend(failed)
    # An ok row without a latency is no failure, and is counted as what it lacks.
    untimed = write_study(tmp_path, "untimed", trial_configs=configs([1], ["inductor:default"]),
                          changes={"inductor:default": {"latency_ms_p50": None}})
    with pytest.raises(UserError, match=r"check \(1 no latency measured\); nothing can"):
        recommend(untimed)


def test_corrupt_or_foreign_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "trials.parquet"
    bad.write_text("not parquet at all")
    with pytest.raises(UserError) as err:
        recommend(bad)
    assert "not a readable Parquet file" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="no such file"):
        recommend(tmp_path / "nowhere")



def test_a_study_named_as_the_commands_name_it_gets_its_path_suggested(tmp_path, monkeypatch):
    # `tuner show demo` finds studies/demo; from Python a study is its path, and a bare name
    # that is a study under ./studies says which path was meant.
    write_study(tmp_path / "studies", "demo", trial_configs=configs([1], ["eager"]))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as err:
        recommend("demo")
    assert str(err.value) == ("demo: no such file (give a study folder or a tuner Parquet "
                              "file): did you mean 'studies/demo'?")
    assert recommend("studies/demo").config.backend == "eager"
    with pytest.raises(UserError) as err:
        recommend("other")  # no such study either: nothing to suggest
    assert str(err.value).endswith("Parquet file)")

def test_the_pareto_file_alone_is_refused(study):
    # It lacks the eager rows: recommend would say the study measured no compiled config.
    with pytest.raises(UserError, match="holds only a study's Pareto-optimal trials; give the "
                                        "study folder"):
        recommend(study / "pareto.parquet", batch_size=1)
    with pytest.raises(UserError, match="holds only"):
        compare([study / "pareto.parquet", study])


def test_a_config_measured_once_says_so_and_its_noise_is_not_known(study):
    rec = recommend(study, batch_size=1)
    assert rec.config.compiled and not rec.confirmed
    assert rec.to_dict()["within_noise"] is None and rec.to_dict()["confirmed"] is False
    assert f"measured in one process: `tuner confirm {study}` measures the finalists again" \
        in flat(rec.describe())


# -- another machine ---------------------------------------------------------------------------
def test_another_gpu_or_torch_warns_naming_both(study, monkeypatch):
    monkeypatch.setattr(fingerprint_module, "collect",
                        lambda device: fingerprint("NVIDIA L4", torch_version="2.12.0"))
    with pytest.warns(MismatchWarning) as caught:
        rec = recommend(study, batch_size=1)
    text = str(caught[0].message)
    assert "NVIDIA H200" in text and "NVIDIA L4" in text
    assert "torch 2.11.0 vs 2.12.0" in text
    assert rec.mismatch and rec.config.label == "inductor:max-autotune"


def test_strict_refuses_another_machine(study, monkeypatch):
    monkeypatch.setattr(fingerprint_module, "collect",
                        lambda device: {**fingerprint(), "driver": "590.1"})
    with pytest.raises(UserError, match="driver 580.0 vs 590.1.*strict"):
        recommend(study, batch_size=1, strict=True)


def test_another_triton_is_another_environment_on_the_gpu_only():
    from tuner.use.environment import environment_mismatch

    study_fp = {**fingerprint(), "triton": "3.5.0"}
    (text,) = environment_mismatch(study_fp, "cuda", {**study_fp, "triton": "3.6.0"})
    assert "triton 3.5.0 vs 3.6.0" in text
    assert environment_mismatch(study_fp, "cuda", dict(study_fp)) == []
    # On the CPU inductor writes C++, not triton kernels.
    cpu_fp = {**study_fp, "device_kind": "cpu", "cpu": "Xeon"}
    assert environment_mismatch(cpu_fp, "cpu", {**cpu_fp, "triton": "3.6.0"}) == []


def test_another_python_or_gpu_size_is_another_environment():
    # dynamo's bytecode work changes with Python's minor version; one GPU name comes in
    # several memory sizes (or a MIG slice of it).
    from tuner.use.environment import environment_mismatch

    study_fp = {**fingerprint(), "python": "3.11.9", "gpu_memory_bytes": 150_000_000_000}
    (text,) = environment_mismatch(study_fp, "cuda", {**study_fp, "python": "3.12.3"})
    assert "Python 3.11.9 vs 3.12.3" in text
    assert environment_mismatch(study_fp, "cuda", {**study_fp, "python": "3.11.2"}) == []
    (text,) = environment_mismatch(study_fp, "cuda", {**study_fp, "gpu_memory_bytes": 2**34})
    assert "GPU memory 139.7 GiB vs 16.0 GiB" in text
    cpu_fp = {**study_fp, "device_kind": "cpu", "cpu": "Xeon"}
    (text,) = environment_mismatch(cpu_fp, "cpu", {**cpu_fp, "python": "3.13.0"})
    assert "Python 3.11.9 vs 3.13.0" in text


def test_same_machine_no_warning(study):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recommend(study, batch_size=1, strict=True)


def test_cuda_study_on_a_machine_without_cuda_is_checked_on_the_cpu(study, monkeypatch):
    asked = []
    cpu = {**fingerprint(), "device_kind": "cpu", "gpu_name": None, "driver": None}
    monkeypatch.setattr(fingerprint_module, "collect", lambda device: asked.append(device) or cpu)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(MismatchWarning, match="device cuda vs cpu"):
        recommend(study, batch_size=1)
    assert asked == ["cpu"]  # CUDA is never touched


# -- into production ---------------------------------------------------------------------------
@pytest.fixture
def compile_calls(monkeypatch):
    """Record torch.compile's arguments and let the real torch.compile run (it compiles lazily:
    nothing is compiled unless the model is called)."""
    calls = []
    real = torch.compile

    def spy(model, **kwargs):
        calls.append(kwargs)
        return real(model, **kwargs)

    monkeypatch.setattr(torch, "compile", spy)
    return calls


def cpu_study(tmp_path, label, **workload):
    load = Workload(model="tests.support.models:tiny_cnn", device="cpu", **workload)
    return write_study(tmp_path, f"cpu-{label.replace(':', '-')}", workload=load,
                       trial_configs=configs([1], [label]))


def test_apply_compiles_with_exactly_the_recorded_arguments(tmp_path, compile_calls):
    rec = recommend(cpu_study(tmp_path, "inductor:default"))
    model = nn.Linear(4, 2).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a model as the study measured it: no warning
        compiled = rec.apply(model)
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    assert compiled._orig_mod is model
    assert compile_calls == [{"backend": "inductor", "dynamic": False, "mode": "default"}]
    assert compile_calls[0] == rec.config.compile_kwargs()


def test_apply_leaves_eager_uncompiled(tmp_path, compile_calls):
    rec = recommend(cpu_study(tmp_path, "eager"))
    model = nn.Linear(4, 2).eval()
    assert rec.apply(model) is model and compile_calls == []


def test_apply_and_the_snippet_warn_about_a_model_in_training_mode(tmp_path, compile_calls):
    # The study measured model.eval(): dropout and batch norm in training mode compute
    # something else, so its numbers do not hold.
    rec = recommend(cpu_study(tmp_path, "inductor:default"))
    with pytest.warns(MismatchWarning, match="it is in training mode, the study measured "
                                             r"model.eval\(\)"):
        rec.apply(nn.Linear(4, 2))
    namespace: dict = {}
    exec(compile(rec.snippet(), "<snippet>", "exec"), namespace)
    with pytest.warns(UserWarning, match=r"the study measured model.eval\(\).to\('cpu', "
                                         r"torch.float32\); this one differs"):
        namespace["compile_model"](nn.Linear(4, 2))
    with pytest.warns(UserWarning, match="this one differs"):  # another dtype
        namespace["compile_model"](nn.Linear(4, 2).eval().to(torch.bfloat16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        namespace["compile_model"](nn.Linear(4, 2).eval())


def test_apply_sets_the_studys_knobs(tmp_path, compile_calls, monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    load = Workload(model="resnet18", device="cuda", channels_last=True, cudnn_benchmark=False)
    rec = recommend(write_study(tmp_path, "knobs", workload=load,
                                trial_configs=configs([1], ["inductor:default"])))
    model = nn.Conv2d(3, 4, 3)
    with pytest.warns(MismatchWarning, match="on cpu, the study ran on cuda"):
        rec.apply(model)
    assert torch.backends.cudnn.benchmark is False
    assert model.weight.is_contiguous(memory_format=torch.channels_last)


def test_apply_warns_about_another_dtype_and_does_not_cast(tmp_path, compile_calls):
    rec = recommend(cpu_study(tmp_path, "inductor:default", dtype="bfloat16"))
    model = nn.Linear(4, 2)
    with pytest.warns(MismatchWarning, match="torch.float32, the study used torch.bfloat16"):
        rec.apply(model)
    assert model.weight.dtype == torch.float32


def test_snippet_is_python_that_does_what_apply_does(tmp_path, compile_calls):
    rec = recommend(cpu_study(tmp_path, "inductor:default"))
    source = rec.snippet()
    code = compile(source, "<snippet>", "exec")
    namespace: dict = {}
    exec(code, namespace)
    compiled = namespace["compile_model"](nn.Linear(4, 2).eval())
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    assert compile_calls == [rec.config.compile_kwargs()]
    assert "trial 0" in source and "torch.float32" in source


def test_snippet_for_a_cuda_study_sets_its_knobs(tmp_path):
    load = Workload(model="resnet18", device="cuda", channels_last=True)
    rec = recommend(write_study(tmp_path, "knobs", workload=load,
                                trial_configs=configs([1], ["eager"])))
    source = rec.snippet()
    compile(source, "<snippet>", "exec")
    assert "torch.backends.cudnn.benchmark = True" in source
    assert "memory_format=torch.channels_last" in source
    assert "torch.compile(" not in source and "return model" in source


def test_package_exports_recommend_lazily(study):
    assert tuner.recommend is recommend and tuner.Recommendation is Recommendation
    out = subprocess.run([sys.executable, "-c", "import sys, tuner; "
                          "print('pandas' in sys.modules, 'torch' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# -- CLI ---------------------------------------------------------------------------------------
def test_cli_table_json_and_python(study):
    runner = CliRunner()
    out = runner.invoke(main, ["recommend", str(study), "--batch-size", "1"])
    assert out.exit_code == 0, out.output
    assert re.search(r"^config +max-autotune, batch size 1 \(trial 3\)$", out.output, re.M)
    assert "3.438 ms p50" in out.output
    out = runner.invoke(main, ["recommend", str(study), "--objective", "throughput",
                               "--max-compile-s", "20", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["config"] == {"backend": "inductor", "batch_size": 8, "mode": "reduce-overhead",
                              "dynamic": False}
    assert data["compile_kwargs"] == {"backend": "inductor", "dynamic": False,
                                      "mode": "reduce-overhead"}
    out = runner.invoke(main, ["recommend", str(study), "--batch-size", "1", "--format", "python"])
    assert out.exit_code == 0, out.output
    compile(out.output, "<cli snippet>", "exec")


def test_cli_errors_and_warnings(study, monkeypatch):
    runner = CliRunner()
    out = runner.invoke(main, ["recommend", str(study), "--batch-size", "1",
                               "--max-vram-gb", "0.5"])
    assert out.exit_code == 1
    assert out.output.startswith("Error: no config of study 'h200' at batch size 1")
    assert out.output.count("\n") == 1
    monkeypatch.setattr(fingerprint_module, "collect", lambda device: fingerprint("NVIDIA L4"))
    out = runner.invoke(main, ["recommend", str(study), "--batch-size", "1", "--strict"])
    assert out.exit_code == 1 and "NVIDIA L4" in out.output and "strict" in out.output
    out = runner.invoke(main, ["recommend", str(study), "--batch-size", "1"])
    assert out.exit_code == 0 and "warning: study 'h200': measured on NVIDIA H200" in out.output


def test_the_docs_name_every_field_of_the_json(study):
    page = ROOT / "docs" / "production.md"
    section = page.read_text().split("- **JSON** (`tuner recommend --json`", 1)[1]
    section = section.split("\n\n", 1)[0]
    fields = recommend(study, batch_size=1).to_dict()
    assert [f for f in fields if f"`{f}`" not in section] == []


def test_cli_help_has_examples():
    out = CliRunner().invoke(main, ["recommend", "--help"])
    assert out.exit_code == 0 and "Examples:" in out.output and "--format python" in out.output


def test_traffic_picks_the_least_time_on_the_shape_schedule(tmp_path):
    # FakeRunner's replay: a static graph recompiles once per new batch size (2 s each), a
    # dynamic one once; so on traffic that mixes sizes, dynamic=True wins over the static
    # config that is faster at steady state.
    workload = Workload(model="resnet18", device="cuda", shape_schedule=(1, 8, 4, 1))
    study = write_study(tmp_path, "sched", workload=workload, trial_configs=[
        TrialConfig("inductor", 1, "default", False), TrialConfig("inductor", 1, "default", True)])
    assert recommend(study, objective="latency").config.dynamic is False
    rec = recommend(study, objective="traffic")
    assert rec.config.dynamic is True
    assert "traffic      " in rec.describe() and "3 replays of 1,8,4,1, 1 recompile" in rec.describe()
    plain = write_study(tmp_path, "plain")
    with pytest.raises(UserError, match="objective traffic needs a study searched with "
                                        "--shape-schedule"):
        recommend(plain, batch_size=1, objective="traffic")


def test_an_eager_recommendation_says_why_nothing_compiled_won(tmp_path):
    pair = configs([1], ["eager", "inductor:default"])  # inductor: 5.0 ms, first call 15 s
    # The limits rule out the compiled config: not "compiling does not pay off".
    limited = recommend(write_study(tmp_path, "a", trial_configs=pair), max_compile_s=1)
    assert limited.config.label == "eager"
    assert limited.why_eager == ("eager is the only config within the limits: the best compiled "
                                 "one, default (trial 1), takes 15.0 s where "
                                 "max_compile_s=1")
    assert f"no torch.compile: {limited.why_eager}" in flat(limited.describe())
    # eager compiles nothing: no "0.0 s first call" (show and compare print "-")
    assert re.search(r"^compile +none \(eager\), 0\.2 s until steady", limited.describe(), re.M)
    assert f"return model  # not compiled: {limited.why_eager}" in limited.snippet()
    assert limited.to_dict()["why_eager"] == limited.why_eager
    # Every compiled trial failed: say how, not that eager won a comparison.
    failed = recommend(write_study(tmp_path, "b", trial_configs=pair,
                                   fail={"inductor:default": Status.COMPILE_TIMEOUT}))
    assert failed.why_eager == "no compiled config finished and matched eager (1 compile_timeout)"
    # It finished and matched eager in the search, then failed a fresh process (tuner confirm).
    again = recommend(write_study(tmp_path, "d", trial_configs=pair,
                                  columns={"inductor:default": {"repeats_failed": 1}}))
    assert again.why_eager == ("no compiled config finished, matched eager and held up when "
                               "measured again (1 failed when measured again)")
    # A slower compiled config within the limits, a faster one past them: not "compiling does
    # not pay off" either.
    trio = configs([1], ["eager", "inductor:default", "aot_eager"])
    some = recommend(write_study(tmp_path, "e", trial_configs=trio,
                                 changes={"aot_eager": {"latency_ms_p50": 9.0,
                                                        "compile_s_cold": 0.5}}),
                     max_compile_s=1)
    assert some.config.label == "eager"
    assert some.why_eager == ("eager was best within the limits: default (trial 1) does "
                              "better, but takes 15.0 s where max_compile_s=1")
    # Compiled and slower: that is compiling not paying off.
    slower = recommend(write_study(tmp_path, "c", trial_configs=pair,
                                   changes={"inductor:default": {"latency_ms_p50": 9.0}}))
    assert slower.why_eager == "eager was best here: compiling does not pay off"
    # for warm-up eager always wins; that says nothing of whether compiling pays
    assert recommend(slower.path, objective="warmup").why_eager == \
        "eager was best here: it compiles nothing, so it warms up first"
    # Only eager measured so far, compiled configs of the space still to come (a search still
    # running, or stopped early): said so, not only "the study measured no compiled config".
    space = SearchSpace(backends=("eager", "inductor"), modes=("default", "reduce-overhead"),
                        dynamic=(False,), batch_sizes=(1, 8))
    early = recommend(write_study(tmp_path, "f", trial_configs=configs([1], ["eager"]),
                                  meta={"space": space.to_dict()}))
    assert early.why_eager == ("the study measured no compiled config at this batch size yet: 2 "
                               "compiled configs of its search space have no trial (the search, "
                               "still running or resumed, measures them)")
    # A compiled recommendation has no such reason.
    compiled = recommend(write_study(tmp_path, "d", trial_configs=pair))
    assert compiled.config.compiled and compiled.why_eager == ""
    assert re.search(r"^compile +15\.0 s first call, ", compiled.describe(), re.M)
    assert compiled.to_dict()["why_eager"] is None


def test_a_pick_that_breaks_a_limit_of_the_studys_search_says_so(tmp_path, fake_cli):
    # `tuner search --max-compile-s 20`, then `tuner recommend` named max-autotune, whose
    # 60 s compile the search had been told was too long, as if no limit had been given.
    from tests.support.cli import invoke, search_args

    searched = invoke(*search_args(tmp_path, "--max-compile-s", "20", "--compile-timeout", "none",
                                   mode="default,max-autotune-no-cudagraphs", batch_sizes="1"))
    assert searched.exit_code == 0, searched.output
    folder = str(tmp_path / "resnet18-cpu")
    rec = recommend(folder)
    assert rec.config.label == "inductor:max-autotune-no-cudagraphs"
    assert rec.breaks_search_limits() == ["takes 60.0 s where max_compile_s=20"]
    assert rec.to_dict()["breaks_search_limits"] == ["takes 60.0 s where max_compile_s=20"]
    shown = invoke("recommend", folder)
    assert ("note it breaks a limit the study's search was given: takes 60.0 s where "
            "--max-compile-s=20 (give --max-compile-s=20 here too to recommend within it)"
            in flat(shown.stdout)), shown.stdout
    # given here too, the limit is met, and there is nothing to say
    within = recommend(folder, max_compile_s=20)
    assert within.config.label == "inductor:default" and within.breaks_search_limits() == []
    assert "limit the study's search" not in invoke("recommend", folder,
                                                    "--max-compile-s", "20").stdout


def test_a_cuda_graph_config_says_how_to_call_it_and_keep_its_outputs(tmp_path):
    # reduce-overhead on CUDA: the next call overwrites the outputs (verified on the H200 by
    # tests/gpu/test_cuda.py); describe, the snippet and the JSON say so, a CPU config does not.
    load = Workload(model="resnet18", device="cuda")
    rec = recommend(write_study(tmp_path, "graphs", workload=load,
                                trial_configs=configs([1], ["eager", "inductor:reduce-overhead"])))
    assert rec.config.mode == "reduce-overhead" and rec.cuda_graphs
    assert any(line.startswith("cuda graphs") and "cudagraph_mark_step_begin() before each call"
               in line for line in rec.describe().splitlines())
    source = rec.snippet()
    namespace: dict = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    marked = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marked.append(1))
        assert namespace["infer"](lambda x: x + 1, 1) == 2
    assert marked == [1] and ".clone() any" in source
    assert rec.to_dict()["cuda_graphs"] is True
    on_cpu = recommend(cpu_study(tmp_path, "inductor:reduce-overhead"))
    assert not on_cpu.cuda_graphs and "infer" not in on_cpu.snippet()
    assert "cuda graphs" not in on_cpu.describe()


def test_apply_and_the_snippet_give_the_memory_format_the_trial_ran(tmp_path, compile_calls):
    # The study searched memory formats and contiguous won: a channels_last model comes back
    # contiguous, as the trial ran it.
    load = Workload(model="resnet18", device="cuda")
    trial_configs = [TrialConfig("eager", 1, channels_last=True),
                     TrialConfig("inductor", 1, "default", False, channels_last=False)]
    rec = recommend(write_study(tmp_path, "formats", workload=load,
                                trial_configs=trial_configs))
    assert rec.config.channels_last is False and not rec.workload.channels_last
    model = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    with pytest.warns(MismatchWarning):
        rec.apply(model)
    assert model.weight.is_contiguous() and \
        not model.weight.is_contiguous(memory_format=torch.channels_last)
    assert "model.to(memory_format=torch.contiguous_format)" in rec.snippet()


def test_apply_refuses_what_is_not_a_model_or_is_already_compiled(tmp_path, compile_calls):
    # torch.compile of an OptimizedModule returns a plain function, not the Module apply promises
    rec = recommend(cpu_study(tmp_path, "inductor:default"))
    model = nn.Linear(4, 2).eval()
    compiled = rec.apply(model)
    with pytest.raises(UserError, match=r"already compiled \(OptimizedModule\): pass the module "
                                        r"itself, model._orig_mod"):
        rec.apply(compiled)
    for wrong in (lambda x: x, None, torch.zeros(2)):
        with pytest.raises(UserError, match="apply takes a torch.nn.Module, not "):
            rec.apply(wrong)
    assert len(compile_calls) == 1
    with pytest.raises(UserError, match="warm_start must be True or False, not 'no'"):
        rec.apply(model, warm_start="no")  # truthy: it would do the opposite


def test_a_study_that_is_not_a_path_and_a_flag_that_is_not_a_bool_are_user_errors(study,
                                                                                  tmp_path):
    for wrong in (None, 123, [str(study)]):
        with pytest.raises(UserError, match=r"a study is a folder or its trials.parquet \(a str "
                                            "or Path\\), not "):
            recommend(wrong, batch_size=1)
    with pytest.raises(UserError, match="a study is a folder"):
        compare([study, None])
    for wrong in (None, 5):  # len() of them was a TypeError
        with pytest.raises(UserError, match=f"give a list of studies to compare, e.g. "
                                            fr"compare\(\['studies/a', 'studies/b'\]\), "
                                            f"not {wrong}"):
            compare(wrong)
    other = write_study(tmp_path, "other", speed=2.0)
    assert len(compare(p for p in (study, other)).studies) == 2  # any iterable
    with pytest.raises(UserError, match="the study's path is empty: give a study folder or its "
                                        "trials.parquet"):
        recommend("", batch_size=1)  # Path("") is the working folder
    with pytest.raises(UserError, match=r"unknown objective \['latency'\]: choose one of"):
        recommend(study, batch_size=1, objective=["latency"])  # was TypeError: unhashable
    with pytest.raises(UserError, match=r"^x{40}\.\.\.x{20}: cannot read it \(File name too "
                                        r"long\)$"):
        recommend("x" * 5000, batch_size=1)  # was OSError, with the whole name
    with pytest.raises(UserError, match="^/dev/null: not a regular file"):
        recommend("/dev/null", batch_size=1)  # pyarrow said FileNotFoundError
    with pytest.raises(UserError, match="strict must be True or False, not 'false'"):
        recommend(study, batch_size=1, strict="false")  # truthy: it would refuse
    for number in (1, 0):  # equal to True and False, but no flag: strict="yes" is refused too
        with pytest.raises(UserError, match=f"strict must be True or False, not {number}"):
            recommend(study, batch_size=1, strict=number)
    for flag in (False, np.False_):
        assert recommend(study, batch_size=1, strict=flag).config is not None


def test_limits_are_real_numbers_not_bools(study):
    import numpy as np

    with pytest.raises(UserError, match="max_p99_ms=True: give a positive number"):
        recommend(study, batch_size=1, max_p99_ms=True)  # not a limit of 1 ms
    rec = recommend(study, batch_size=1, max_vram_gb=np.int64(20))  # read from a DataFrame
    assert rec.constraints.max_vram_gb == 20.0
    json.dumps(rec.to_dict())  # plain numbers, without a default=


def test_json_carries_the_traffic_and_precision_figures_the_text_shows(tmp_path):
    # The text printed "traffic 0.14 s for 3 replays" and "max abs error 0.01 against float32
    # eager"; --json and to_dict() had neither.
    study = write_study(tmp_path, "figures", trial_configs=configs([1], ["eager",
                                                                         "inductor:default"]),
                        changes={"inductor:default": {"schedule_total_s": 0.135,
                                                      "schedule_recompiles": 2,
                                                      "max_abs_error_vs_fp32": 0.01}})
    measured = recommend(study, batch_size=1).to_dict()["measured"]
    assert (measured["schedule_total_s"], measured["schedule_recompiles"],
            measured["max_abs_error_vs_fp32"]) == (0.135, 2, 0.01)
    json.dumps(measured, allow_nan=False)


def test_the_command_names_a_limit_that_ruled_out_compiling_by_its_option(tmp_path):
    # From Python it is max_compile_s=1; the command printed the same where the user typed
    # --max-compile-s (its "no config meets" error already said the option).
    from tuner.cli.app import main

    pair = write_study(tmp_path, "a", trial_configs=configs([1], ["eager", "inductor:default"]))
    result = CliRunner().invoke(main, ["recommend", str(pair), "--max-compile-s", "1"])
    assert result.exit_code == 0, result.output
    assert ("apply no torch.compile: eager is the only config within the limits: the best "
            "compiled one, default (trial 1), takes 15.0 s where --max-compile-s=1"
            in flat(result.stdout))
    # The constraints line named it as the Python keyword: "max_compile_s=1; 1 config meets".
    assert "constraints  --max-compile-s=1; 1 config meets them" in result.stdout
    assert "max_compile_s" not in result.stdout
    assert "where max_compile_s=1" in recommend(pair, max_compile_s=1).why_eager
    # A limit the best compiled config has no measurement for is named the same way.
    untimed = write_study(tmp_path, "b", trial_configs=configs([1], ["eager", "inductor:default"]),
                          changes={"inductor:default": {"latency_ms_p99": None}})
    result = CliRunner().invoke(main, ["recommend", str(untimed), "--max-p99-ms", "100"])
    assert result.exit_code == 0, result.output
    assert "has no measurement for --max-p99-ms" in flat(result.stdout), result.stdout
    assert "max_p99_ms" not in result.stdout


def test_least_memory_breaks_a_tie_on_serving_memory_by_the_most_needed_at_any_point(tmp_path):
    # Both serve in the same memory; inductor's compile held 5 GiB. The tie went to its lower
    # p90, so "least memory" was the config that needs five times eager's.
    study = write_study(tmp_path, "mem", trial_configs=configs([1], ["eager", "inductor:default"]),
                        changes={"inductor:default": {"vram_bytes_compile_reserved": 5 * 2**30}})
    rows = files.read(study)[0].set_index("label")
    assert rows.loc["eager", "peak_memory_bytes"] == rows.loc["inductor:default",
                                                              "peak_memory_bytes"]
    assert rows.loc["inductor:default", "latency_ms_p90"] < rows.loc["eager", "latency_ms_p90"]
    assert recommend(study, batch_size=1, objective="memory").config.label == "eager"


def test_a_tail_not_measured_is_said_so_not_a_bare_dash(tmp_path):
    study = write_study(tmp_path, "tails", trial_configs=configs([1], ["eager", "inductor:default"]),
                        changes={"inductor:default": {"latency_ms_p90": None,
                                                      "latency_ms_p99": None}})
    assert ("latency      5.000 ms p50 per request, p90 not measured, p99 not measured, 1.25x "
            "vs eager") in recommend(study, batch_size=1).describe()  # was "5.000 ms ..., -, -"


def test_throughput_over_every_batch_size_names_the_best_compiled_config_of_any_of_them(tmp_path):
    # Only eager at batch size 1 meets both limits. The best compiled config for throughput is
    # inductor:default at batch size 8; why_eager named the batch-size-1 one, as if the choice
    # had been made at that batch size alone.
    study = write_study(tmp_path, "t", trial_configs=configs([1, 8], ["eager", "inductor:default"]))
    rec = recommend(study, objective="throughput", max_latency_ms=7, max_compile_s=1)
    assert (rec.config.label, rec.config.batch_size) == ("eager", 1)
    assert rec.why_eager.startswith("eager is the only config within the limits: the best "
                                    "compiled one, default at batch size 8 (trial 3), "
                                    "takes 15.0 s where max_compile_s=1 and takes 12.000 ms")
    # One batch size: no batch size to name.
    one = recommend(study, batch_size=1, objective="throughput", max_compile_s=1)
    assert "the best compiled one, default (trial 1)," in one.why_eager


def test_recommend_says_what_the_check_against_eager_could_not_show(tmp_path):
    note = ("eager's output is 0 everywhere, so the check against it shows little (does a "
            "layer start at zero?)")
    study = write_study(tmp_path, "s", changes={
        label: {"correctness_note": note} for label in ("eager", "inductor:max-autotune")})
    rec = recommend(study, batch_size=1)
    assert rec.config.label == "inductor:max-autotune"
    assert f"\ncorrectness  {note}" in rec.describe()
    assert "correctness" not in recommend(write_study(tmp_path, "t"), batch_size=1).describe()
