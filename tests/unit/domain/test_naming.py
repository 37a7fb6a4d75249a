"""What a config is called for a person (tuner.domain.naming): its backend and mode, then only
what differs from what that mode does by itself."""

from __future__ import annotations

import itertools

from tuner.domain.config import TrialConfig
from tuner.domain.naming import (
    KNOWN_DEFAULTS,
    NameBasis,
    OptionDefaults,
    config_name,
    config_names,
    known_defaults,
)

# The options a CUDA search covers by itself, at the values inductor runs without them.
USUAL = {"coordinate_descent_tuning": False, "epilogue_fusion": True, "freezing": False,
         "shape_padding": True}
BF16 = NameBasis.of({"model": "resnet50", "dtype": "bfloat16", "channels_last": False,
                     "cudnn_benchmark": True})


def inductor(mode: str, channels_last: bool | None = False, dynamic: bool | None = False,
             **options: object) -> TrialConfig:
    return TrialConfig("inductor", 1, mode, dynamic, channels_last=channels_last,
                       options={**USUAL, **options})


def test_a_config_is_named_by_its_mode_and_what_differs_from_it():
    assert config_name(inductor("reduce-overhead"), BF16) == "reduce-overhead"
    assert config_name(inductor("reduce-overhead", channels_last=True, epilogue_fusion=False),
                       BF16) == "reduce-overhead +channels_last -epilogue_fusion"
    assert config_name(inductor("default", coordinate_descent_tuning=True), BF16) == \
        "default +coordinate_descent_tuning"
    # max-autotune tunes coordinate descent by itself: off is what differs there
    assert config_name(inductor("max-autotune", coordinate_descent_tuning=False), BF16) == \
        "max-autotune -coordinate_descent_tuning"
    assert config_name(TrialConfig("eager", 1, channels_last=True), BF16) == \
        "eager channels_last"
    assert config_name(TrialConfig("eager", 1, channels_last=False), BF16) == "eager"
    assert config_name(TrialConfig("cudagraphs", 1, None, False), BF16) == "cudagraphs"


def test_static_shapes_and_the_workloads_precision_add_nothing():
    assert config_name(inductor("default", dynamic=None), BF16) == "default dynamic=None"
    assert config_name(inductor("default", dynamic=True), BF16) == "default dynamic=True"
    assert config_name(TrialConfig("eager", 1, dtype="bfloat16"), BF16) == "eager"
    assert config_name(TrialConfig("eager", 1, dtype="float32"), BF16) == "eager fp32"
    # cudnn.benchmark is the workload's (on) unless a config turns it off
    assert config_name(TrialConfig("eager", 1, cudnn_benchmark=False), BF16) == \
        "eager -cudnn.benchmark"
    assert config_name(TrialConfig("eager", 1, cudnn_benchmark=True), BF16) == "eager"


def test_an_option_whose_default_is_not_known_is_named_with_its_value():
    config = TrialConfig("inductor", 1, "default", False,
                         options={"max_autotune_gemm_backends": "TRITON", "epilogue_fusion": 1,
                                  "freezing": True})
    # a text option, unknown here; a number where the default is a boolean; a boolean flipped
    assert config_name(config) == \
        "default epilogue_fusion=1 +freezing max_autotune_gemm_backends=TRITON"
    # a mode known neither to the study nor to the table: every option with its value
    unknown = TrialConfig("inductor", 1, "new-mode", False, options={"freezing": False})
    assert config_name(unknown) == "new-mode freezing=False"


def test_the_defaults_a_study_recorded_decide_over_the_known_ones():
    recorded = OptionDefaults.from_dict({"default": {"epilogue_fusion": False}})
    basis = NameBasis.of(None, recorded)
    assert config_name(inductor("default", epilogue_fusion=False), basis) == \
        "default coordinate_descent_tuning=False freezing=False shape_padding=True"
    assert config_name(inductor("default", epilogue_fusion=True), basis).startswith(
        "default coordinate_descent_tuning=False +epilogue_fusion")
    # A study's files of torch 2.11 list what each mode sets; the known options sit under them.
    from_files = known_defaults({"reduce-overhead": {"triton.cudagraphs": True}})
    assert from_files.of_mode("reduce-overhead") == {**USUAL, "triton.cudagraphs": True}
    assert KNOWN_DEFAULTS.of_mode(None) == USUAL  # no mode: inductor's default mode
    assert OptionDefaults.from_dict(recorded.to_dict()) == recorded


def test_two_different_configs_of_one_table_never_share_a_name():
    # Every config of a space with the knobs a CUDA search covers, eager included, and the
    # rows a study can hold beside them that set a knob where others leave it to the workload.
    space = [TrialConfig("eager", 1, dtype=dt, channels_last=cl)
             for dt, cl in itertools.product((None, "float32", "bfloat16"), (None, False, True))]
    space += [TrialConfig("inductor", 1, mode, dyn, dtype=dt, channels_last=cl,
                          options=dict(zip(USUAL, values)))
              for mode, dyn, dt, cl, values in itertools.product(
                  ("default", "reduce-overhead", "max-autotune"), (False, True, None),
                  (None, "float32"), (None, False, True),
                  itertools.product((False, True), repeat=len(USUAL)))]
    space += [TrialConfig("inductor", 1, "default", False, options={"x": "True"}),
              TrialConfig("inductor", 1, "default", False, options={"x": True})]
    for basis in (BF16, NameBasis()):
        names = config_names(space, basis)
        assert len(set(names)) == len(space)
        # the short form wherever it names one config alone
        alone = TrialConfig("inductor", 1, "reduce-overhead", False, dtype="float32",
                            channels_last=True, options=USUAL)
        assert names[space.index(alone)] == "reduce-overhead fp32 +channels_last"
    # A config at two batch sizes is one config: one name.
    assert config_names([TrialConfig("eager", 1), TrialConfig("eager", 8)]) == ["eager", "eager"]
    # Where two would share a name, they are named with every setting they hold.
    assert config_names([TrialConfig("eager", 1), TrialConfig("eager", 1, channels_last=False)]) \
        == ["eager", "eager -channels_last"]


def test_the_defaults_known_are_the_installed_torchs():
    # What a search records from this torch (torch._inductor.config under each mode's
    # options) is what KNOWN_DEFAULTS says for the options a CUDA search covers by itself.
    from tuner.domain.inductor_options import installed_defaults
    from tuner.domain.space import CUDA_DEFAULT_OPTIONS

    modes = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
    installed = installed_defaults(modes, list(CUDA_DEFAULT_OPTIONS))
    for mode in modes:
        known = KNOWN_DEFAULTS.of_mode(mode) or {}
        assert installed.of_mode(mode) == {k: known[k] for k in CUDA_DEFAULT_OPTIONS}, mode
    # a mode this torch does not list is not recorded
    assert installed_defaults(["no-such-mode"], ["freezing"]).of_mode("no-such-mode") is None
