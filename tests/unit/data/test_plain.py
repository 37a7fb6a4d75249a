"""The gain over the best plain mode (tuner.data.plain): what is plain, and what show,
recommend and compare say of a pick against it, beyond noise, within noise, or where no plain
mode was measured."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support.json_contract import at_batch_size
from tests.support.synthetic import write_study
from tests.support.text import flat
from tuner.cli.app import main
from tuner.data import files
from tuner.data.equivalent import option_defaults
from tuner.data.plain import is_plain, plain_mask
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status
from tuner.use.compare import compare
from tuner.use.recommend import recommend

pytestmark = pytest.mark.filterwarnings("ignore::tuner.use.environment.MismatchWarning")

MODE_OPTIONS = {"default": {}, "reduce-overhead": {"triton.cudagraphs": True}}
META = {"space": {"options": {"epilogue_fusion": [True, False]}}, "mode_options": MODE_OPTIONS}
WORKLOAD = {"dtype": "float32", "channels_last": False, "cudnn_benchmark": True}
EAGER = TrialConfig("eager", 1)
DEFAULT = TrialConfig("inductor", 1, "default", False)  # plain, setting no option
PLAIN_RO = TrialConfig("inductor", 1, "reduce-overhead", False, options={"epilogue_fusion": True})
KNOB = TrialConfig("inductor", 1, "reduce-overhead", False, options={"epilogue_fusion": False})
CONFIGS = [EAGER, DEFAULT, PLAIN_RO, KNOB]


def _study(tmp_path, name, knob_p50s, fail=None):
    """Eager, plain default, plain reduce-overhead (its option at the value the study lists
    first) and a knob config, each measured in three fresh processes."""
    repeats = {EAGER.key: [5.0, 5.1, 4.9], DEFAULT.key: [2.0, 2.05, 1.95],
               PLAIN_RO.key: [1.5, 1.52, 1.48], KNOB.key: knob_p50s}
    return write_study(tmp_path, name, trial_configs=CONFIGS, fail=fail, meta=META,
                       columns={k: {"latency_ms_p50_repeats": v} for k, v in repeats.items()})


@pytest.mark.parametrize(("config", "plain"), [
    (DEFAULT, True), (PLAIN_RO, True), (KNOB, False), (EAGER, False),
    (TrialConfig("inductor", 1, "reduce-overhead", False, options={"triton.cudagraphs": True}),
     True),  # what the mode sets anyway
    (TrialConfig("inductor", 1, "max-autotune", False), True),
    (TrialConfig("inductor", 1, "max-autotune-no-cudagraphs", False), False),
    (TrialConfig("inductor", 1, "default", None), False),  # not static shapes
    (TrialConfig("inductor", 1, "default", False, channels_last=True), False),
    (TrialConfig("inductor", 1, "default", False, channels_last=False), True),  # the workload's
    (TrialConfig("inductor", 1, "default", False, dtype="bfloat16"), False),
    (TrialConfig("aot_eager", 1, None, False), False),
])
def test_what_is_plain(config, plain):
    assert is_plain(config, WORKLOAD, option_defaults(META)) is plain


def test_a_knob_config_beyond_noise_of_plain_reduce_overhead(tmp_path):
    study = _study(tmp_path, "beyond", [1.0, 1.01, 0.99])
    trials, meta = files.read(study)
    assert list(trials.loc[plain_mask(trials, meta), "label"]) == [DEFAULT.label, PLAIN_RO.label]
    shown = CliRunner().invoke(main, ["show", str(study)]).stdout
    # named by what differs from the defaults: plain reduce-overhead keeps epilogue fusion on
    assert ("batch size 1 over plain torch.compile: reduce-overhead -epilogue_fusion is 1.50x "
            "faster than the best plain mode, reduce-overhead (1.000 vs 1.500 ms), beyond noise."
            ) in flat(shown)
    gain = at_batch_size(json.loads(CliRunner().invoke(main, ["show", str(study), "--json"])
                                    .stdout)["vs_plain"], 1, "noise")
    assert gain == "beyond noise"

    rec = recommend(study, batch_size=1)
    assert rec.config == KNOB and rec.vs_plain is not None
    assert rec.vs_plain.speedup_vs_plain == pytest.approx(1.5) and rec.vs_plain.faster
    assert ("vs plain 1.50x faster than the best plain mode, reduce-overhead "
            "(1.000 vs 1.500 ms), beyond noise") in flat(rec.describe())
    as_json = rec.to_dict()["vs_plain"]
    assert as_json["noise"] == "beyond noise" and as_json["plain_mode"] == "reduce-overhead"
    assert as_json["plain_label"] == PLAIN_RO.label and as_json["processes"] == [3, 3]


def test_a_knob_config_within_noise_of_plain_reduce_overhead(tmp_path):
    study = _study(tmp_path, "within", [1.45, 1.55, 1.47])
    shown = CliRunner().invoke(main, ["show", str(study)]).stdout
    assert ("batch size 1 over plain torch.compile: reduce-overhead -epilogue_fusion is 1.02x "
            "faster than the best plain mode, reduce-overhead (1.470 vs 1.500 ms), within "
            "noise.") in flat(shown)
    rec = recommend(study, batch_size=1)
    assert rec.vs_plain is not None and rec.vs_plain.noise == "within noise"
    assert not rec.vs_plain.faster


def test_where_no_plain_mode_was_measured_it_says_so(tmp_path):
    study = _study(tmp_path, "none", [1.0, 1.01, 0.99],
                   fail={DEFAULT.key: Status.COMPILE_ERROR, PLAIN_RO.key: Status.OOM})
    shown = CliRunner().invoke(main, ["show", str(study)]).stdout
    assert ("batch size 1 over plain torch.compile: no plain mode measured at batch size 1 "
            "(torch's default, reduce-overhead or max-autotune with torch's settings)."
            ) in flat(shown)
    rec = recommend(study, batch_size=1)
    assert rec.vs_plain is not None and rec.vs_plain.noise == "no plain mode measured"
    assert "vs plain     no plain mode measured at batch size 1" in rec.describe()
    assert rec.to_dict()["vs_plain"]["plain_label"] is None


def test_compare_gives_each_best_config_its_gain_over_its_own_plain_mode(tmp_path):
    beyond = _study(tmp_path, "beyond", [1.0, 1.01, 0.99])
    none = _study(tmp_path, "none", [1.0, 1.01, 0.99],
                  fail={DEFAULT.key: Status.COMPILE_ERROR, PLAIN_RO.key: Status.OOM})
    c = compare([beyond, none])
    latency = {b.study: b for b in c.best if b.objective == "latency"}
    assert latency["A"].vs_plain.noise == "beyond noise"
    assert latency["B"].vs_plain.noise == "no plain mode measured"
    out = CliRunner().invoke(main, ["compare", str(beyond), str(none)],
                             env={"COLUMNS": "200"})  # a row a line
    rows = [line for line in out.stdout.splitlines() if line.startswith("latency ")]
    assert rows[0].endswith("1.50x beyond noise") and rows[1].endswith("none measured")
    data = json.loads(CliRunner().invoke(main, ["compare", str(beyond), str(none),
                                                "--json"]).stdout)
    first = next(b for b in data["best"] if b["objective"] == "latency" and b["tag"] == "A")
    assert first["vs_plain"]["speedup_vs_plain"] == pytest.approx(1.5)


def test_plain_is_torchs_value_even_where_the_study_listed_another_first():
    """A study that listed epilogue_fusion=false first ran its baselines with it off; torch's
    own value is on, so the config with it off is a knob (named `-epilogue_fusion`), not plain."""
    from tuner.data.plain import plain_defaults
    from tuner.data.rows import basis_of
    from tuner.domain.naming import config_name

    meta = {**META, "space": {"options": {"epilogue_fusion": [False, True]}}}
    assert is_plain(KNOB, WORKLOAD, plain_defaults(meta)) is False
    assert is_plain(PLAIN_RO, WORKLOAD, plain_defaults(meta)) is True
    assert config_name(KNOB, basis_of(meta)) == "reduce-overhead -epilogue_fusion"
    assert config_name(PLAIN_RO, basis_of(meta)) == "reduce-overhead"
