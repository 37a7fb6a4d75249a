"""The searched dimensions beyond backend and mode: precision (``--dtype``), memory format
(``--channels-last``), ``cudnn.benchmark`` and inductor options (``--inductor-option``). Each
round-trips through the config's key, its dict, Optuna's parameters, the Parquet row and the
stored space; older studies keep their keys; bad input is one line. The last test measures them
for real on the CPU."""

from __future__ import annotations

import json
import warnings

import optuna
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner
from torch import nn

from tests.support.synthetic import fingerprint, write_study
from tuner.cli.app import main
from tuner.data import files
from tuner.data.rows import config_of, frame, trial_row
from tuner.domain import layout
from tuner.domain.config import TrialConfig, uses_cudagraphs
from tuner.domain.inductor_options import check_options
from tuner.domain.records import Status, TrialResult
from tuner.domain.space import SearchSpace, build_space
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.runtime import fingerprint as fingerprint_module
from tuner.study.params import params_of, suggest
from tuner.use.environment import MismatchWarning
from tuner.use.recommend import recommend

BACKENDS = ["eager", "inductor", "aot_eager"]
MODES = ["default", "reduce-overhead"]
# Option types as torch._inductor.config declares them, fixed so the tests do not import torch's.
OPTIONS = {"epilogue_fusion": bool, "triton.cudagraphs": bool, "shape_padding": bool,
           "max_autotune_gemm_backends": str, "realize_opcount_threshold": int | None,
           "post_grad_custom_pre_pass": list}


def space(device="cuda", **kwargs) -> SearchSpace:
    return build_space(device=device, batch_sizes=[1], backends=["eager", "inductor", "aot_eager"],
                       modes=["default"], available_backends=BACKENDS, available_modes=MODES,
                       available_options=OPTIONS, **kwargs)


WIDE = dict(dtypes=["float32", "tf32", "bfloat16"], channels_last=["false", "true"],
            cudnn_benchmark=[True, False],
            options={"epilogue_fusion": ["true", "false"], "realize_opcount_threshold": ["none", "4"]})


def error(**kwargs) -> str:
    with pytest.raises(UserError) as exc:
        space(**kwargs)
    assert "\n" not in str(exc.value)
    return str(exc.value)


# -- the config ---------------------------------------------------------------------------------

def test_configs_without_the_new_dimensions_keep_their_old_keys_and_dicts():
    # Older studies resume only if these stay exactly as they were.
    assert TrialConfig("eager", 8).key == "eager|bs=8"
    assert TrialConfig("inductor", 1, "default", False).key == "inductor|default|dynamic=False|bs=1"
    assert TrialConfig("inductor", 1, "default", False).to_dict() == {
        "backend": "inductor", "batch_size": 1, "mode": "default", "dynamic": False}
    assert space().to_dict() == {"backends": ["eager", "inductor", "aot_eager"],
                                 "modes": ["default"], "dynamic": [False], "batch_sizes": [1]}
    old = {"backends": ["eager", "inductor"], "modes": ["default"], "dynamic": [False],
           "batch_sizes": [1]}
    assert SearchSpace.from_dict(old).to_dict() == old


def test_every_dimension_is_in_the_key_label_and_dict():
    config = TrialConfig("inductor", 1, "default", False, dtype="bfloat16", channels_last=True,
                         cudnn_benchmark=False, options={"epilogue_fusion": False})
    assert config.key == ("inductor|default|dynamic=False|bs=1|dtype=bfloat16|channels_last=True"
                          "|cudnn_benchmark=False|opt.epilogue_fusion=False")
    assert config.label == ("inductor:default bf16 channels_last cudnn.benchmark=False "
                            "epilogue_fusion=False")
    assert TrialConfig("eager", 1, dtype="tf32").label == "eager tf32"
    assert TrialConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    # Options are kept sorted: the same choices in another order are the same config.
    a = TrialConfig("inductor", 1, options={"shape_padding": True, "epilogue_fusion": False})
    b = TrialConfig("inductor", 1, options=(("epilogue_fusion", False), ("shape_padding", True)))
    assert a == b and a.key == b.key
    with pytest.raises(ValueError, match="inductor options"):
        TrialConfig("aot_eager", 1, options={"epilogue_fusion": False})


def test_options_go_to_torch_compile_with_the_mode_as_its_options():
    plain = TrialConfig("inductor", 1, "reduce-overhead", False)
    assert plain.compile_kwargs() == {"backend": "inductor", "dynamic": False,
                                      "mode": "reduce-overhead"}
    tuned = TrialConfig("inductor", 1, "reduce-overhead", False,
                        options={"epilogue_fusion": False})
    assert tuned.compile_kwargs() == {
        "backend": "inductor", "dynamic": False,
        "options": {"triton.cudagraphs": True, "epilogue_fusion": False}}
    # The chosen value wins over the mode's, and decides whether calls mark CUDA-graph steps.
    no_graphs = TrialConfig("inductor", 1, "reduce-overhead", False,
                            options={"triton.cudagraphs": False})
    assert no_graphs.compile_kwargs()["options"] == {"triton.cudagraphs": False}
    assert uses_cudagraphs(plain) and not uses_cudagraphs(no_graphs)
    assert uses_cudagraphs(TrialConfig("inductor", 1, "default", False,
                                       options={"triton.cudagraphs": True}))
    torch.compile(nn.Linear(2, 2), **tuned.compile_kwargs())  # torch takes them as they are


# -- the space ----------------------------------------------------------------------------------

def test_the_space_searches_each_dimension_and_options_only_on_inductor():
    s = space(**WIDE)
    configs = s.configs()
    # eager and aot_eager: 3 dtypes x 2 formats x 2 cudnn = 12 each; inductor: x 2 x 2 options
    assert len(configs) == 12 + 12 + 12 * 4
    assert len({c.key for c in configs}) == len(configs)
    assert all(not c.options for c in configs if c.backend != "inductor")
    assert {c.option_dict["realize_opcount_threshold"] for c in configs
            if c.backend == "inductor"} == {None, 4}
    assert all(c.dtype and c.channels_last is not None and c.cudnn_benchmark is not None
               for c in configs)
    keys = {c.key for c in configs}
    # Baselines are configs of the space: eager in every precision, inductor's default first.
    baselines = s.baselines()
    assert all(b.key in keys for b in baselines)
    assert [b.dtype for b in baselines if b.backend == "eager"] == ["float32", "tf32", "bfloat16"]
    (default,) = [b for b in baselines if b.backend == "inductor"]
    assert default.option_dict == {"epilogue_fusion": True, "realize_opcount_threshold": None}
    assert default.dtype == "float32" and default.channels_last is False


def test_the_space_round_trips_through_its_stored_dict():
    s = space(**WIDE)
    stored = json.loads(json.dumps(s.to_dict()))  # as Optuna keeps it
    assert SearchSpace.from_dict(stored) == s
    assert stored["options"] == {"epilogue_fusion": [True, False],
                                 "realize_opcount_threshold": [None, 4]}
    assert space(**WIDE) == s  # the same options give the same space: a resume matches


def test_every_config_round_trips_through_optuna_and_the_parquet_row(tmp_path):
    s = space(**WIDE)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    workload = Workload(model="resnet18", device="cuda")
    for number, config in enumerate(s.configs()):
        study.enqueue_trial(params_of(config))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert suggest(study.ask(), s) == config
        row = trial_row("s", number, config, workload, TrialResult(status=Status.OK))
        assert config_of(row) == config
        assert row["dtype"] == config.dtype and row["channels_last"] == config.channels_last
        assert row["cudnn_benchmark"] == config.cudnn_benchmark
    # Parameters are asked only where they apply: no option for eager.
    assert set(params_of(TrialConfig("eager", 1, dtype="float32"))) == {
        "batch_size", "backend", "dtype"}


def test_rows_show_what_the_trial_ran_with_and_one_column_per_option(tmp_path):
    load = Workload(model="resnet18", device="cuda", dtype="float16", channels_last=True)
    searched = TrialConfig("inductor", 1, "default", False, dtype="bfloat16",
                           options={"epilogue_fusion": False, "triton.cudagraphs": True,
                                    "realize_opcount_threshold": 4,
                                    "max_autotune_gemm_backends": "ATEN,TRITON"})
    rows = [trial_row("s", 0, TrialConfig("eager", 1), load,
                      TrialResult(status=Status.OK, max_abs_error_vs_fp32=0.5)),
            trial_row("s", 1, searched, load, TrialResult(status=Status.OK))]
    assert rows[0]["dtype"] == "float16" and rows[0]["channels_last"] is True  # the workload's
    assert rows[1]["dtype"] == "bfloat16"  # the config's
    files.export(tmp_path, frame(rows), {"study": "s"})
    schema = pq.read_schema(tmp_path / layout.TRIALS_FILE)
    assert str(schema.field("opt_epilogue_fusion").type) == "bool"
    assert str(schema.field("opt_max_autotune_gemm_backends").type) == "string"
    back, _ = files.read(tmp_path)
    by_backend = back.set_index("backend")
    assert by_backend.loc["inductor", "opt_epilogue_fusion"] == False  # noqa: E712
    assert by_backend.loc["inductor", "opt_triton_cudagraphs"] == True  # noqa: E712
    assert by_backend.loc["inductor", "opt_max_autotune_gemm_backends"] == "ATEN,TRITON"
    assert by_backend.loc["eager", "max_abs_error_vs_fp32"] == 0.5
    assert back.loc[back["backend"] == "eager", "opt_epilogue_fusion"].isna().all()
    assert [config_of(r) for _, r in back.sort_values("trial_number").iterrows()] == [
        TrialConfig("eager", 1), searched]


# -- refused input ------------------------------------------------------------------------------

def test_an_unknown_option_names_the_closest():
    assert "unknown inductor option 'epilogue_fusoin' (did you mean epilogue_fusion?)" in error(
        options={"epilogue_fusoin": ["true"]})
    message = error(options={"epilogue_fusion": ["maybe"]})
    assert "cannot read 'maybe' as bool" in message
    assert "is not a boolean, number, string" in error(
        options={"post_grad_custom_pre_pass": ["x"]})
    assert "cannot read 'many' as int, none" in error(
        options={"realize_opcount_threshold": ["many"]})


def test_the_named_options_exist_in_the_installed_torch():
    checked = dict(check_options({"epilogue_fusion": ["true", "false"],
                                  "coordinate_descent_tuning": ["true"],
                                  "shape_padding": ["false"], "freezing": ["true"],
                                  "triton.cudagraphs": ["false"],
                                  "max_autotune_gemm_backends": ["ATEN,TRITON"]}))
    assert checked["epilogue_fusion"] == (True, False)
    assert checked["max_autotune_gemm_backends"] == ("ATEN,TRITON",)
    with pytest.raises(UserError, match="did you mean coordinate_descent_tuning"):
        check_options({"coordinate_descent_tunin": ["true"]})


def test_choices_a_device_or_backend_cannot_use_are_refused():
    assert "tf32 needs a CUDA device" in error(device="cpu", dtypes=["float32", "tf32"])
    assert "unknown dtype 'float8'" in error(dtypes=["float32", "float8"])
    assert "--cudnn-benchmark applies to CUDA only" in error(device="cpu",
                                                              cudnn_benchmark=[True, False])
    assert "--channels-last 'maybe'" in error(channels_last=["maybe"])
    with pytest.raises(UserError, match="--inductor-option applies to the inductor backend"):
        build_space(device="cuda", batch_sizes=[1], backends=["eager", "aot_eager"],
                    available_backends=BACKENDS, available_modes=MODES, available_options=OPTIONS,
                    options={"epilogue_fusion": ["true"]})


@pytest.mark.usefixtures("fake_cli")
@pytest.mark.parametrize("extra, words", [
    (["--inductor-option", "epilogue_fusoin=true,false"], ["did you mean epilogue_fusion"]),
    (["--inductor-option", "epilogue_fusion"], ["expected NAME=V1,V2"]),
    (["--dtype", "float32,tf32"], ["tf32 needs a CUDA device"]),
    (["--dtype", "tf32"], ["tf32 needs a CUDA device"]),
    (["--dtype", "float8"], ["--dtype"]),
    (["--channels-last", "maybe"], ["--channels-last 'maybe'"]),
    (["--cudnn-benchmark", "true,false"], ["CUDA only"]),
])
def test_bad_choices_on_the_command_line_are_one_line_errors(tmp_path, extra, words):
    result = CliRunner().invoke(main, ["search", "--model", "resnet18", "--device", "cpu",
                                       "--batch-sizes", "1", "--studies-dir", str(tmp_path),
                                       *extra])
    assert result.exit_code not in (0, 130), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for word in words:
        assert word in lines[0]


@pytest.mark.usefixtures("fake_cli")
def test_a_search_over_the_dimensions_writes_their_columns_and_resumes(tmp_path):
    args = ["search", "--model", "resnet18", "--device", "cpu", "--backend", "eager,inductor",
            "--mode", "default", "--batch-sizes", "1", "--studies-dir", str(tmp_path),
            "--dtype", "float32,bfloat16", "--channels-last", "false,true",
            "--inductor-option", "epilogue_fusion=true,false", "--confirm", "0", "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    df, meta = files.read(tmp_path / "resnet18-cpu")
    assert len(df) == 2 * 2 + 2 * 2 * 2  # eager, inductor x 2 option values
    assert set(df["dtype"]) == {"float32", "bfloat16"}
    assert set(df["channels_last"]) == {False, True}
    assert set(df.loc[df["backend"] == "inductor", "opt_epilogue_fusion"]) == {True, False}
    assert meta["space"]["options"] == {"epilogue_fusion": [True, False]}
    # what its mode sets, as this torch says, for tuner compare (tuner.data.equivalent)
    assert meta["mode_options"] == {"default": {}}
    again = CliRunner().invoke(main, args)  # the same command resumes: nothing new to measure
    assert again.exit_code == 0, again.output
    assert len(files.read(tmp_path / "resnet18-cpu")[0]) == len(df)


@pytest.mark.usefixtures("fake_cli")
def test_a_cuda_search_covers_the_knobs_the_user_left_unset(tmp_path):
    # The default space on CUDA: four inductor options both ways, with this torch's value in
    # the baselines, and channels_last for a torchvision model; what the user names wins.
    def space_of(*extra: str, model: str = "resnet18") -> dict:
        name = f"s{len(list(tmp_path.iterdir()))}"
        result = CliRunner().invoke(main, [
            "search", "--model", model, "--device", "cuda", "--batch-sizes", "1",
            "--trials", "1", "--confirm", "0", "--name", name, "--studies-dir", str(tmp_path),
            "-q", *extra])
        assert result.exit_code == 0, result.output
        stored = files.read(tmp_path / name)[1]["space"]
        return {"options": {}, "channels_last": [], **stored}  # a dimension not searched: absent

    from torch._inductor import config

    default = space_of()
    assert default["options"] == {name: [getattr(config, name), not getattr(config, name)]
                                  for name in ("coordinate_descent_tuning", "epilogue_fusion",
                                               "freezing", "shape_padding")}
    assert default["channels_last"] == [False, True]
    factory = space_of(model="tests.support.models:tiny_cnn")  # not known to take 4-D images
    assert factory["options"] == default["options"] and factory["channels_last"] == []
    named = space_of("--inductor-option", "epilogue_fusion=false,true", "--channels-last", "false")
    assert named["options"] == {"epilogue_fusion": [False, True]} and named["channels_last"] == []
    assert space_of("--inductor-option", "none")["options"] == {}
    assert space_of("--backend", "eager")["options"] == {}  # options need inductor
    cpu = CliRunner().invoke(main, ["search", "--model", "resnet18", "--device", "cpu",
                                    "--trials", "1", "--confirm", "0", "--name", "cpu",
                                    "--studies-dir", str(tmp_path), "-q"])
    assert cpu.exit_code == 0, cpu.output
    cpu_space = files.read(tmp_path / "cpu")[1]["space"]
    assert not cpu_space.get("options") and not cpu_space.get("channels_last")


@pytest.mark.usefixtures("fake_cli")
def test_a_cuda_study_made_before_the_default_knobs_is_told_how_to_resume(tmp_path):
    old = ["search", "--model", "resnet18", "--device", "cuda", "--trials", "1", "--confirm", "0",
           "--studies-dir", str(tmp_path), "-q"]
    made = CliRunner().invoke(main, [*old, "--inductor-option", "none", "--channels-last", "false"])
    assert made.exit_code == 0, made.output
    refused = CliRunner().invoke(main, old)  # the same command as before the defaults changed
    assert refused.exit_code not in (0, 130)
    assert "--inductor-option none --channels-last false" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    again = CliRunner().invoke(main, [*old, "--inductor-option", "none", "--channels-last",
                                      "false", "--trials", "2"])
    assert again.exit_code == 0, again.output


# -- into production ----------------------------------------------------------------------------

@pytest.fixture
def same_machine(monkeypatch):
    monkeypatch.setattr(fingerprint_module, "collect", lambda device: fingerprint())


@pytest.mark.usefixtures("same_machine")
def test_apply_and_the_snippet_use_the_configs_precision_and_options(tmp_path, monkeypatch):
    load = Workload(model="tests.support.models:tiny_cnn", device="cuda")
    config = TrialConfig("inductor", 1, "default", False, dtype="tf32", channels_last=True,
                         options={"epilogue_fusion": False})
    rec = recommend(write_study(tmp_path, "dims", workload=load, trial_configs=[
        TrialConfig("eager", 1, dtype="tf32", channels_last=True), config]))
    assert rec.config == config
    assert rec.workload.dtype == "tf32" and rec.workload.channels_last
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    before = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
              torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        model = nn.Conv2d(3, 4, 3)
        with pytest.warns(MismatchWarning, match="on cpu, the study ran on cuda"):
            compiled = rec.apply(model)
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:  # process-wide: put back what the other tests run with
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[1:]
    assert model.weight.is_contiguous(memory_format=torch.channels_last)
    assert compiled._orig_mod is model
    source = rec.snippet()
    compile(source, "<snippet>", "exec")
    assert 'torch.set_float32_matmul_precision("high")' in source
    assert "options={'epilogue_fusion': False}" in source and "mode=" not in source
    assert "memory_format=torch.channels_last" in source
    assert "TF32" in rec.describe()


@pytest.mark.usefixtures("same_machine")
def test_apply_warns_when_the_model_is_not_in_the_configs_dtype(tmp_path):
    load = Workload(model="tests.support.models:tiny_cnn", device="cpu")  # the study's float32 ...
    rec = recommend(write_study(tmp_path, "bf16", workload=load, trial_configs=[
        TrialConfig("eager", 1, dtype="bfloat16")]))  # ... but the chosen row ran in bfloat16
    with pytest.warns(MismatchWarning, match="torch.float32, the study used torch.bfloat16"):
        rec.apply(nn.Linear(4, 2))


# -- measured for real --------------------------------------------------------------------------

@pytest.mark.slow
def test_a_cpu_search_measures_each_precision_and_option_value(tmp_path):
    """The issue's done-criterion on a tiny model: 2 eager + 4 inductor trials, real compiles."""
    result = CliRunner().invoke(main, [
        "search", "--model", "tests.support.models:tiny_cnn", "--device", "cpu",
        "--dtype", "float32,bfloat16", "--inductor-option", "epilogue_fusion=true,false",
        "--backend", "eager,inductor", "--mode", "default", "--batch-sizes", "1",
        "--confirm", "0", "--min-seconds", "0.05", "--min-calls", "5", "--timeout", "5m",
        "--warm-cache", "--prestart", "--studies-dir", str(tmp_path), "-q"])
    assert result.exit_code == 0, result.output
    df, _ = files.read(tmp_path / "models-tiny_cnn-cpu")
    assert (df["status"] == "ok").all(), df[["label", "status", "message"]]
    assert df["correct"].all()
    measured = {(r["backend"], r["dtype"], r["opt_epilogue_fusion"]) for _, r in df.iterrows()}
    assert measured == {("eager", "float32", None), ("eager", "bfloat16", None),
                        ("inductor", "float32", True), ("inductor", "float32", False),
                        ("inductor", "bfloat16", True), ("inductor", "bfloat16", False)}
    # bfloat16 costs accuracy against float32 eager; float32 compiled barely differs from it.
    error = df.set_index("label")["max_abs_error_vs_fp32"]
    assert error["eager fp32"] == 0.0 and error["eager bf16"] > 1e-5
    assert error["inductor:default fp32 epilogue_fusion=False"] < 1e-4
    assert error["inductor:default bf16 epilogue_fusion=False"] > 1e-5


def test_tf32_sets_the_matmul_precision_and_other_precisions_leave_it():
    from tuner.runtime.knobs import apply_global_knobs

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        apply_global_knobs(Workload(model="resnet18", device="cpu", dtype="bfloat16"))
        assert torch.get_float32_matmul_precision() == "highest"
        apply_global_knobs(Workload(model="resnet18", device="cpu", dtype="tf32"))
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.usefixtures("fake_cli")
def test_a_value_given_twice_is_given_once(tmp_path):
    # --dtype float32,float32 is float32 (the workload's precision), not a searched dimension of
    # one value listed twice; the same for every listed option.
    result = CliRunner().invoke(main, [
        "search", "--model", "resnet18", "--device", "cpu", "--backend", "eager,inductor,eager",
        "--mode", "default,default", "--batch-sizes", "1", "--dtype", "float32,float32",
        "--studies-dir", str(tmp_path), "--confirm", "0", "-q"])
    assert result.exit_code == 0, result.output
    df, meta = files.read(tmp_path / "resnet18-cpu")
    assert meta["space"]["backends"] == ["eager", "inductor"]
    assert meta["space"]["modes"] == ["default"] and "dtypes" not in meta["space"]
    assert sorted(df["config_key"]) == ["eager|bs=1", "inductor|default|dynamic=False|bs=1"]
