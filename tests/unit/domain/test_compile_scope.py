"""The compile scope (``--compile-scope whole,regional``): what torch.compile is given, the whole
model or each of its repeated blocks. It round-trips through the config's key and dict, Optuna's
parameters, the Parquet row and the stored space; a config without it keeps its old key; bad
input is one line. The real compile is tests/integration/test_regional.py's."""

from __future__ import annotations

import json
import warnings

import optuna
import pytest

from tuner.data.equivalent import ran_keys
from tuner.data.importance import varying
from tuner.data.rows import config_of, frame, trial_row
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialResult
from tuner.domain.space import SearchSpace, build_space
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.study.params import params_of, suggest

REGIONAL = TrialConfig("inductor", 1, "default", False, compile_scope="regional")


def space(**kwargs) -> SearchSpace:
    chosen = {"backends": ["eager", "inductor"], "modes": ["default"], **kwargs}
    return build_space(device="cpu", batch_sizes=[1], available_backends=["eager", "inductor"],
                       available_modes=["default"], **chosen)


def test_a_regional_config_is_named_in_its_key_label_and_dict():
    assert REGIONAL.key == "inductor|default|dynamic=False|bs=1|scope=regional"
    assert REGIONAL.label == "inductor:default regional"
    assert REGIONAL.to_dict()["compile_scope"] == "regional"
    assert TrialConfig.from_dict(json.loads(json.dumps(REGIONAL.to_dict()))) == REGIONAL
    whole = TrialConfig("inductor", 1, "default", False, compile_scope="whole")
    assert whole.key.endswith("|scope=whole") and whole.label == "inductor:default"
    # torch.compile is given the same arguments: the scope says where, not how
    assert REGIONAL.compile_kwargs() == TrialConfig("inductor", 1, "default", False).compile_kwargs()


def test_a_config_without_a_scope_keeps_the_key_and_dict_it_had():
    plain = TrialConfig("inductor", 1, "default", False)
    assert plain.key == "inductor|default|dynamic=False|bs=1"
    assert "compile_scope" not in plain.to_dict() and not plain.regional


@pytest.mark.parametrize("backend, scope", [("eager", "regional"), ("inductor", "partial")])
def test_a_scope_eager_cannot_have_or_no_one_knows_is_refused(backend, scope):
    with pytest.raises(ValueError, match="compile scope"):
        TrialConfig(backend, 1, compile_scope=scope)


def test_the_space_searches_both_scopes_for_compiled_configs_only():
    s = space(compile_scopes=["whole", "regional"])
    assert sorted(c.key for c in s.configs()) == [
        "eager|bs=1", "inductor|default|dynamic=False|bs=1|scope=regional",
        "inductor|default|dynamic=False|bs=1|scope=whole"]
    # the baselines run the first scope listed
    assert [c.key for c in s.baselines()] == ["eager|bs=1",
                                              "inductor|default|dynamic=False|bs=1|scope=whole"]
    stored = json.loads(json.dumps(s.to_dict()))  # as Optuna keeps it
    assert stored["compile_scopes"] == ["whole", "regional"]
    assert SearchSpace.from_dict(stored) == s


def test_whole_alone_searches_nothing_and_keeps_the_space_it_had():
    assert space(compile_scopes=["whole"]) == space()
    assert "compile_scopes" not in space(compile_scopes=["Whole"]).to_dict()
    assert all(c.compile_scope == "regional" for c in space(compile_scopes=["regional"]).configs()
               if c.compiled)


def test_every_config_round_trips_through_optuna_and_the_parquet_row():
    s = space(compile_scopes=["whole", "regional"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    workload = Workload(model="tests.support.models:three_blocks")
    for number, config in enumerate(s.configs()):
        study.enqueue_trial(params_of(config))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert suggest(study.ask(), s) == config
        result = TrialResult(status=Status.OK, region_class="Block" if config.regional else None,
                             regions_compiled=3 if config.regional else None)
        row = trial_row("s", number, config, workload, result)
        assert config_of(row) == config
        assert row["compile_scope"] == config.compile_scope  # None for eager
        assert (row["region_class"], row["regions_compiled"]) == (
            ("Block", 3) if config.regional else (None, None))
    assert "compile_scope" not in params_of(TrialConfig("eager", 1))


def test_a_row_without_a_scope_says_it_compiled_the_whole_model():
    # What the column holds for a study that never searched the scope: what each row ran.
    workload = Workload(model="resnet18")
    rows = [trial_row("s", 0, TrialConfig("eager", 1), workload, TrialResult(Status.OK)),
            trial_row("s", 1, TrialConfig("inductor", 1, "default", False), workload,
                      TrialResult(Status.OK))]
    assert [r["compile_scope"] for r in rows] == [None, "whole"]


@pytest.mark.parametrize("kwargs, said", [
    ({"compile_scopes": ["partial"]},
     "--compile-scope 'partial': choose from whole, regional (e.g. --compile-scope whole,regional)"),
    ({"compile_scopes": ["regional"], "backends": ["eager"], "modes": None},
     "--compile-scope applies to compiled backends only"),
])
def test_a_scope_the_space_cannot_use_is_a_one_line_error(kwargs, said):
    with pytest.raises(UserError) as exc:
        space(**kwargs)
    assert said in str(exc.value) and "\n" not in str(exc.value)


def _frame(*configs: TrialConfig):
    workload = Workload(model="tests.support.models:three_blocks")
    return frame([trial_row("s", n, c, workload, TrialResult(Status.OK))
                  for n, c in enumerate(configs)])


def test_importance_judges_the_scope_among_compiled_rows_where_it_varies():
    both = _frame(TrialConfig("eager", 1), TrialConfig("inductor", 1, "default", False),
                  REGIONAL)
    assert "compile_scope" in varying(both)
    # eager has no scope: a study of whole compiles alone has one value, nothing to judge
    whole = _frame(TrialConfig("eager", 1), TrialConfig("inductor", 1, "default", False))
    assert "compile_scope" not in varying(whole)


def test_compare_matches_a_regional_row_with_regional_rows_only():
    rows = _frame(TrialConfig("inductor", 1, "default", False), REGIONAL)
    whole, regional = ran_keys(rows, {"workload": {}})
    assert "scope" not in whole and regional == whole + "|scope=regional"
