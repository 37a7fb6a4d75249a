"""One Optuna study per batch size (tuner.study.fronts): Optuna's fronts are the tuner's, trials
spread over the batch sizes, the user's limits and failures are constraints the sampler learns,
the sampler is the study's, and a study made before still loads as one study."""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

from tests.support.dashboard import get
from tests.support.specs import keys, make_space, make_spec
from tuner.cli.app import main
from tuner.cli.options import SAMPLERS as CLI_SAMPLERS
from tuner.data import files, select
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialRequest
from tuner.errors import UserError
from tuner.fake import FakeRunner
from tuner.study import sampler
from tuner.study.params import params_of
from tuner.study.search import Search
from tuner.study.storage import (
    CONFIG_ATTR,
    KEY_ATTR,
    LIMITS_ATTR,
    PROTOCOL_ATTR,
    RESULT_ATTR,
    SPACE_ATTR,
    STATUS_ATTR,
    WORKLOAD_ATTR,
    make_storage,
)

# 2 batch sizes x (eager + inductor in 2 modes x 2 dynamic) = 10 configs. The fake makes batch
# size 1 faster and smaller than batch size 8 in every config: in one study, batch size 1's
# trials would dominate batch size 8's.
SPACE = make_space(modes=("default", "reduce-overhead"))
RAN_EAGER = "inductor|reduce-overhead|dynamic=False|bs=8"
OOM = "inductor|default|dynamic=True|bs=1"


class RanEagerRunner(FakeRunner):
    """The fake, where one config's calls all ran eager, twice as fast as it would have been:
    a fast row the tuner never compares (it ran no compiled code)."""

    def run(self, request, *args, **kwargs):
        result = super().run(request, *args, **kwargs)
        if request.config.key == RAN_EAGER:
            return dataclasses.replace(result, ran_compiled=False,
                                       latency_ms_p50=result.latency_ms_p50 / 2)
        return result


def front_study(spec, batch_size: int) -> optuna.Study:
    """Batch size ``batch_size``'s study, as optuna.load_study (or the dashboard) opens it."""
    return optuna.load_study(study_name=f"{spec.name}:bs{batch_size}", storage=spec.storage_url)


def dominates(a, b) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def test_each_batch_sizes_best_trials_are_the_tuners_pareto_set_of_that_batch_size(tmp_path):
    spec = make_spec(tmp_path, space=SPACE)
    import optuna_dashboard  # a test extra: the GPU machine collects this file without it

    summary = Search(spec, RanEagerRunner(fail={OOM: Status.OOM})).run()
    df = summary.trials
    app = optuna_dashboard.wsgi(spec.storage_url)
    listed = {s["study_name"]: s["study_id"] for s in get(app, "/api/studies")["study_summaries"]}
    mixed = []
    for bs in SPACE.batch_sizes:
        best = front_study(spec, bs).best_trials
        front = select.pareto(df[df["batch_size"] == bs])
        assert sorted(t.user_attrs[KEY_ATTR] for t in best) == sorted(front["config_key"])
        # optuna-dashboard's front (it reads no constraints) is the same.
        shown = get(app, f"/api/studies/{listed[f'{spec.name}:bs{bs}']}")["best_trials"]
        assert sorted(t["trial_id"] for t in shown) == sorted(front["trial_number"])
        mixed.append([t.values for t in best])
    # One study of both batch sizes would have lost batch size 8's front: each of its trials is
    # dominated by one of batch size 1.
    assert all(any(dominates(one, eight) for one in mixed[0]) for eight in mixed[1])
    ran_eager = df.set_index("config_key").loc[RAN_EAGER]
    assert ran_eager["latency_ms_p50"] == df[df["batch_size"] == 8]["latency_ms_p50"].min()
    assert RAN_EAGER not in set(select.pareto(df)["config_key"])  # fastest, but not compiled


@pytest.mark.parametrize("kind", sampler.SAMPLERS)
def test_after_the_baselines_trials_spread_over_the_batch_sizes(tmp_path, kind):
    space = make_space(batch_sizes=(1, 2, 4), dynamic=(False, True, None))  # 4 configs each
    runner = FakeRunner()
    Search(make_spec(tmp_path, space=space, sampler=kind), runner).run()
    baselines = [c.key for c in space.baselines()]
    assert runner.calls[:len(baselines)] == baselines
    # Then each batch size in turn (the one with the fewest trials), its own sampler choosing
    # the rest of the config: 2 more configs at each batch size.
    after = [int(key.rsplit("bs=", 1)[1]) for key in runner.calls[len(baselines):]]
    assert after == [1, 2, 4] * 2
    assert sorted(runner.calls) == sorted(keys(space))


def test_limits_and_failures_are_constraints_the_sampler_learns(tmp_path):
    # Fake compile times: inductor default 15 s, reduce-overhead 17 s; memory 0.96-1.51 GiB.
    limits = select.Constraints(max_vram_gb=1.2, max_compile_s=16)
    spec = make_spec(tmp_path, space=SPACE, limits=limits)
    summary = Search(spec, FakeRunner(fail={OOM: Status.OOM})).run()
    rows = summary.trials.set_index("config_key")
    seen = {}
    for bs in SPACE.batch_sizes:
        for t in front_study(spec, bs).get_trials(states=(TrialState.COMPLETE,)):
            seen[t.user_attrs[KEY_ATTR]] = t
    assert sorted(seen) == sorted(keys(SPACE))  # a failure is told too, not dropped
    for key, t in seen.items():
        row = rows.loc[key]
        unverified, vram, compile_s = t.system_attrs[sampler.CONSTRAINTS_ATTR]
        assert unverified == (1.0 if key == OOM else 0.0), key
        if key != OOM:
            assert vram == pytest.approx(select.memory_needed_bytes(row) / 2**30 / 1.2 - 1)
            assert compile_s == pytest.approx(row["compile_s_cold"] / 16 - 1)
            assert (compile_s > 0) == ("reduce-overhead" in key)  # 17 s > 16 s
    assert seen[OOM].values == [float("inf")] * 3
    # Optuna's best trials are the tuner's front, less what breaks a limit or failed.
    for bs in SPACE.batch_sizes:
        front = select.pareto(summary.trials[summary.trials["batch_size"] == bs])
        within = [k for k, row in front.set_index("config_key").iterrows()
                  if not limits.violations(row)]
        assert sorted(t.user_attrs[KEY_ATTR] for t in front_study(spec, bs).best_trials) == \
            sorted(within)
        assert any("reduce-overhead" in k for k in front["config_key"])  # broke a limit


def test_a_resume_keeps_the_studys_limits_and_refuses_others(tmp_path):
    limits = select.Constraints(max_compile_s=16)
    Search(make_spec(tmp_path, limits=limits, n_trials=2), FakeRunner()).run()
    assert Search(make_spec(tmp_path), FakeRunner()).fronts.limits == limits  # not given: kept
    with pytest.raises(UserError) as exc:
        Search(make_spec(tmp_path, limits=select.Constraints(max_compile_s=60)), FakeRunner())
    assert "another set of limits" in str(exc.value) and "--max-compile-s: study has 16 s, asked 60 s" in str(
        exc.value) and "\n" not in str(exc.value)


def test_a_study_whose_limits_were_stored_before_the_p99_limit_resumes_with_the_same_ones(tmp_path):
    limits = select.Constraints(max_compile_s=16)
    first = Search(make_spec(tmp_path, limits=limits, n_trials=2), FakeRunner())
    stored = dict(first.study.user_attrs[LIMITS_ATTR])
    del stored["max_p99_ms"]  # as a tuner before that limit stored them
    first.study.set_user_attr(LIMITS_ATTR, stored)
    assert Search(make_spec(tmp_path, limits=limits), FakeRunner()).fronts.limits == limits


@pytest.mark.parametrize("kind, made", [("tpe", optuna.samplers.TPESampler),
                                        ("nsga2", optuna.samplers.NSGAIISampler),
                                        ("nsga3", optuna.samplers.NSGAIIISampler),
                                        ("gp", optuna.samplers.GPSampler),
                                        ("random", optuna.samplers.RandomSampler)])
def test_make_sampler_makes_each_kind(kind, made):
    assert isinstance(sampler.make_sampler(kind, seed=3), made)


def test_the_command_line_offers_the_samplers_make_sampler_makes():
    assert CLI_SAMPLERS == sampler.SAMPLERS
    with pytest.raises(UserError, match="unknown sampler 'cmaes': choose tpe, nsga2, nsga3, gp, random"):
        sampler.make_sampler("cmaes", seed=0)


def test_the_sampler_is_stored_with_the_study_and_a_resume_uses_it(tmp_path):
    Search(make_spec(tmp_path, sampler="random", n_trials=5), FakeRunner()).run()
    resumed = Search(make_spec(tmp_path), FakeRunner())  # no sampler asked: the study's
    assert resumed.fronts.sampler == "random"
    assert all(isinstance(resumed.fronts.of(bs).sampler, optuna.samplers.RandomSampler)
               for bs in SPACE.batch_sizes)
    assert resumed.run().measured == len(keys(resumed.spec.space))
    with pytest.raises(UserError) as exc:
        Search(make_spec(tmp_path, sampler="tpe"), FakeRunner())
    assert str(exc.value) == ("study 's' was made with --sampler random, asked tpe: rerun with "
                              "--sampler random (or without --sampler) or pick a new --name")


def cli(*args: str):
    return CliRunner().invoke(main, ["search", "--model", "resnet18", "--device", "cpu",
                                     "--backend", "eager,inductor", "--mode", "default",
                                     "--batch-sizes", "1,8", *args])


def test_search_sampler_from_the_command_line_is_stored_and_a_bad_one_is_a_one_line_error(
        tmp_path, fake_cli):
    first = cli("--sampler", "nsga2", "--trials", "2", "--confirm", "0",
                "--studies-dir", str(tmp_path))
    assert first.exit_code == 0, first.stderr
    again = cli("--confirm", "0", "--studies-dir", str(tmp_path))  # the same command, resumed
    assert again.exit_code == 0, again.stderr
    study = optuna.load_study(study_name="resnet18-cpu",
                              storage=f"sqlite:///{tmp_path / 'resnet18-cpu' / 'study.db'}")
    assert study.user_attrs["tuner.sampler"] == "nsga2"
    other = cli("--sampler", "random", "--studies-dir", str(tmp_path))
    assert other.exit_code == 1 and other.stderr.count("\n") == 1
    assert other.stderr.startswith("Error: study 'resnet18-cpu' was made with --sampler nsga2")
    bad = cli("--sampler", "bogus", "--studies-dir", str(tmp_path / "new"))
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""
    assert bad.stderr.startswith("Error: Invalid value for '--sampler': 'bogus' is not one of")


def make_study_as_before(spec) -> TrialConfig:
    """A study as the tuner left it before each batch size had its own study: every trial in
    the study ``spec.name``, here one measured trial (eager at batch size 8)."""
    spec.directory.mkdir(parents=True, exist_ok=True)
    storage = make_storage(spec.storage_url)
    study = optuna.create_study(study_name=spec.name, storage=storage, directions=["minimize"] * 3)
    for attr, value in ((WORKLOAD_ATTR, spec.workload.to_dict()),
                        (SPACE_ATTR, spec.space.to_dict()), (PROTOCOL_ATTR, spec.protocol.to_dict())):
        study.set_user_attr(attr, value)
    config = TrialConfig("eager", 8)
    result = FakeRunner().run(TrialRequest(config, spec.workload, spec.protocol), spec.directory)
    params = params_of(config)
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE, values=[1.0, 2.0, 3.0], params=params,
        distributions={"batch_size": optuna.distributions.CategoricalDistribution([1, 8]),
                       "backend": optuna.distributions.CategoricalDistribution(
                           ["eager", "inductor"])},
        user_attrs={KEY_ATTR: config.key, CONFIG_ATTR: config.to_dict(), STATUS_ATTR: "ok"},
        system_attrs={RESULT_ATTR: result.to_dict()}))
    return config


def test_a_study_made_before_loads_and_resumes_as_one_study(tmp_path):
    spec = make_spec(tmp_path)
    old = make_study_as_before(spec)
    search = Search(spec, FakeRunner())
    summary = search.run()
    assert old.key not in search.runner.calls  # not measured again
    assert sorted(summary.trials["config_key"]) == sorted(keys(spec.space))
    assert summary.trials.set_index("config_key").loc[old.key, "trial_number"] == 0
    # Its new trials joined it there: no study per batch size was made.
    assert optuna.get_all_study_names(storage=spec.storage_url) == [spec.name]
    study = optuna.load_study(study_name=spec.name, storage=spec.storage_url)
    assert sum(RESULT_ATTR in t.system_attrs for t in study.trials) == len(keys(spec.space))
    df, _ = files.read(spec.directory)
    assert sorted(df["config_key"]) == sorted(keys(spec.space))


def test_the_gp_sampler_without_scipy_is_a_one_line_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scipy" else real(name, *a))
    with pytest.raises(UserError, match=r"^--sampler gp needs scipy: pip install scipy$"):
        sampler.make_sampler("gp", seed=0)
