"""The search loop with a fake runner: baselines first, no config twice, resume, failures as data."""

from __future__ import annotations

import socket
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from tests.support.specs import BACKENDS, MODES, SPACE, ask, keys, make_space, make_spec
from tuner.data import files, select
from tuner.domain import layout
from tuner.domain.records import Status, TrialResult
from tuner.domain.space import TrialConfig, build_space
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.fake import FakeRunner
from tuner.study.claims import pid_namespace
from tuner.study.params import params_of
from tuner.study.record import record_not_run
from tuner.study.search import Search
from tuner.study.storage import CONFIG_ATTR, INTERRUPTED_ATTR, KEY_ATTR, OWNER_ATTR


def run(tmp_path, runner=None, **kwargs):
    runner = runner or FakeRunner()
    return Search(make_spec(tmp_path, **kwargs), runner).run(), runner


def test_baselines_are_measured_first(tmp_path):
    summary, runner = run(tmp_path)
    baselines = [c.key for c in SPACE.baselines()]
    assert runner.calls[:len(baselines)] == baselines
    assert summary.stop_reason == "every config in the search space is measured"
    assert not summary.stopped


class PeakRecordingRunner(FakeRunner):
    def __init__(self) -> None:
        super().__init__()
        self.measure_peak: list[bool] = []

    def run(self, request, workdir, *args, **kwargs):
        self.measure_peak.append(request.protocol.measure_peak)
        return super().run(request, workdir, *args, **kwargs)


def test_the_first_trial_of_each_run_measures_the_device_peak(tmp_path):
    _, first = run(tmp_path, PeakRecordingRunner(), n_trials=3)
    assert first.measure_peak == [True, False, False]
    _, resumed = run(tmp_path, PeakRecordingRunner(), n_trials=5)
    assert resumed.measure_peak == [True, False]


def test_every_config_is_measured_exactly_once(tmp_path):
    space = make_space(backends=BACKENDS[:3], modes=MODES[:2])  # 14 configs
    summary, runner = run(tmp_path, space=space)
    assert sorted(runner.calls) == sorted(keys(space))
    assert runner.closed == 1  # a pre-started trial process would not be left waiting
    assert sorted(summary.trials["config_key"]) == sorted(keys(space))
    assert summary.measured == summary.new == len(keys(space))


def test_a_second_search_resumes_and_measures_only_what_is_missing(tmp_path):
    first, r1 = run(tmp_path, n_trials=3)
    assert len(r1.calls) == 3 and first.stop_reason == "reached 3 trials"
    before = first.trials.set_index("config_key")

    second, r2 = run(tmp_path, n_trials=5)  # --trials counts the whole study
    assert len(r2.calls) == 2 and not set(r2.calls) & set(r1.calls)
    assert second.measured == 5 and second.new == 2

    again, r3 = run(tmp_path, n_trials=5)
    assert r3.calls == [] and again.new == 0 and again.stop_reason == "reached 5 trials"

    last, r4 = run(tmp_path)
    assert sorted(r1.calls + r2.calls + r4.calls) == sorted(keys(SPACE))
    after = last.trials.set_index("config_key")
    for key in r1.calls:  # measured trials keep their number and values on resume
        assert after.loc[key, "trial_number"] == before.loc[key, "trial_number"]
        assert after.loc[key, "latency_ms_p50"] == before.loc[key, "latency_ms_p50"]


def test_resuming_with_the_batch_sizes_in_another_order_is_the_same_study(tmp_path):
    first, _ = run(tmp_path, n_trials=2, space=make_space(batch_sizes=(1, 8)))
    # The order only breaks ties in which batch size comes next: not another search space.
    resumed, runner = run(tmp_path, space=make_space(batch_sizes=(8, 1)))
    assert resumed.measured == len(keys(make_space())) and first.measured == 2
    assert not set(runner.calls) & set(first.trials["config_key"])
    with pytest.raises(UserError, match="another search space"):
        run(tmp_path, space=make_space(batch_sizes=(8, 1, 32)))


def test_resuming_with_backends_modes_and_dynamic_in_another_order_is_the_same_study(tmp_path):
    asked = make_space(backends=("eager", "inductor"), modes=MODES[:2], dynamic=(False, True))
    first, _ = run(tmp_path, n_trials=4, space=asked)
    # The baselines run inductor's default mode and dynamic=False whatever the order, so the
    # order only breaks ties; the resume samples in the stored order, which Optuna requires.
    reordered = make_space(backends=("inductor", "eager"), modes=MODES[1::-1], dynamic=(True, False))
    resumed, runner = run(tmp_path, space=reordered)
    assert resumed.measured == len(keys(asked)) and first.measured == 4
    assert sorted(runner.calls) == sorted(keys(asked) - set(first.trials["config_key"]))
    assert (resumed.trials["status"] == "ok").all()


def test_resuming_with_dtypes_in_another_order_says_to_give_the_study_order(tmp_path):
    def space(dtypes):
        return build_space(device="cuda", batch_sizes=[1], backends=["eager", "inductor"],
                           modes=["default"], dynamic=[False], available_backends=BACKENDS,
                           available_modes=MODES, dtypes=dtypes)

    run(tmp_path, n_trials=1, space=space(["float32", "bfloat16"]))
    # The baselines compile in the first precision: another order is another study.
    with pytest.raises(UserError) as exc:
        Search(make_spec(tmp_path, space=space(["bfloat16", "float32"])), FakeRunner())
    assert str(exc.value).endswith("; --dtype lists the study's values in another order, and the "
                                   "baselines run the first value: give them in the study's order")


def test_resuming_with_another_workload_names_the_difference(tmp_path):
    run(tmp_path, n_trials=1)
    other = Workload(model="resnet18", device="cuda", dtype="bfloat16")
    with pytest.raises(UserError) as exc:
        Search(make_spec(tmp_path, workload=other), FakeRunner())
    message = str(exc.value)
    assert "another workload" in message and "dtype" in message
    assert "--dtype: study has float32, asked bfloat16" in message and "\n" not in message


def test_resuming_with_another_space_names_the_difference(tmp_path):
    run(tmp_path, n_trials=1)
    with pytest.raises(UserError) as exc:
        Search(make_spec(tmp_path, space=make_space(batch_sizes=(1, 8, 32))), FakeRunner())
    message = str(exc.value)
    assert "another search space" in message and "--batch-sizes: study has [1, 8], asked [1, 8, 32]" in message
    assert "--backend" not in message  # only what differs


def test_failed_trials_are_rows_and_do_not_stop_the_study(tmp_path):
    runner = FakeRunner(fail={"inductor:default dynamic=True": Status.COMPILE_ERROR,
                              "inductor|default|dynamic=False|bs=8": Status.OOM})
    summary, _ = run(tmp_path, runner)
    assert sorted(runner.calls) == sorted(keys(SPACE))
    df, _ = files.read(tmp_path / "s" / layout.TRIALS_FILE)
    assert len(df) == 6
    failed = df[df["status"] != "ok"].set_index("config_key")
    assert dict(failed["status"]) == {
        "inductor|default|dynamic=True|bs=1": "compile_error",
        "inductor|default|dynamic=True|bs=8": "compile_error",
        "inductor|default|dynamic=False|bs=8": "oom"}
    assert (failed["message"] == "fake " + failed["status"]).all()
    assert (failed["stderr_tail"] == "fake stderr\n").all()
    assert failed["latency_ms_p50"].isna().all()


def test_a_broken_model_stops_with_a_user_error_but_keeps_the_file(tmp_path):
    runner = FakeRunner(fail={"eager": Status.WORKLOAD_ERROR})
    with pytest.raises(UserError, match="the model cannot run at any batch size: batch size 1: "
                                        "trial 1, eager: workload_error: fake workload_error"):
        run(tmp_path, runner)
    assert sorted(runner.calls) == ["eager|bs=1", "eager|bs=8"]  # once per batch size
    df, _ = files.read(tmp_path / "s")
    assert sorted(df["config_key"]) == sorted(keys(SPACE))  # every config a row, saying why
    assert (df["status"] == "workload_error").all()
    assert (tmp_path / "s" / layout.PARETO_FILE).exists()


@pytest.mark.parametrize("status", [Status.WORKLOAD_ERROR, Status.CRASH, Status.TIMEOUT, Status.OOM,
                                    Status.CUDA_ERROR])
def test_a_model_broken_at_one_batch_size_costs_one_trial_there_and_the_rest_go_on(tmp_path,
                                                                                 status):
    messages = []
    runner = FakeRunner(fail={"eager|bs=8": status})
    summary = Search(make_spec(tmp_path), runner, on_message=messages.append).run()
    assert [k for k in runner.calls if k.endswith("bs=8")] == ["eager|bs=8"]
    assert sorted(k for k in runner.calls if k.endswith("bs=1")) == sorted(
        c.key for c in SPACE.configs() if c.batch_size == 1)
    assert "skipped batch sizes where the model fails: 8" in summary.stop_reason
    assert any(m.startswith("batch size 8 is skipped from here on") for m in messages)
    # Every config at batch size 8 is a row, the ones not run saying why.
    at8 = summary.trials[summary.trials["batch_size"] == 8].set_index("config_key")
    assert sorted(at8.index) == sorted(c.key for c in SPACE.configs() if c.batch_size == 8)
    not_run = at8.drop(index="eager|bs=8")
    assert (not_run["status"] == "workload_error").all()
    assert not_run["message"].str.startswith("not run: at batch size 8 the model fails").all()


def test_a_search_stopped_right_after_a_batch_size_broke_leaves_no_not_run_row_elsewhere(
        tmp_path):
    # Eager fails at batch size 8, the second baseline; the search stops there. Its not-run rows
    # are batch size 8's alone: a healthy batch size's configs were never tried, not skipped
    # (a full search would have measured them over such rows, and hid the difference).
    runner = FakeRunner(fail={"eager|bs=8": Status.WORKLOAD_ERROR})
    search = Search(make_spec(tmp_path), runner)
    search.on_trial = lambda event: event.number == 2 and search.stop_after_trial.set()
    summary = search.run()
    assert runner.calls == ["eager|bs=1", "eager|bs=8"] and summary.stopped
    trials = summary.trials.set_index("config_key")
    not_run = trials[select.not_run(summary.trials).to_numpy()]
    assert len(not_run) >= 1 and (not_run["batch_size"] == 8).all(), not_run["batch_size"]
    assert list(trials[trials["batch_size"] == 1].index) == ["eager|bs=1"]
    assert sorted(files.read(tmp_path / "s")[0]["config_key"]) == sorted(trials.index)


def test_a_not_run_row_two_workers_recorded_at_once_is_one_row(tmp_path):
    # Two workers that find batch size 8 broken at the same moment both see its other configs
    # untaken and both record them; the second record is here added by hand.
    search = Search(make_spec(tmp_path), FakeRunner(fail={"eager|bs=8": Status.WORKLOAD_ERROR}))
    search.run()
    config = next(c for c in SPACE.configs() if c.batch_size == 8 and c.backend != "eager")
    record_not_run(search.fronts, SPACE, config, TrialResult.failure(
        Status.WORKLOAD_ERROR, "not run: at batch size 8 the model fails (another worker)"))
    trials = search.export().trials
    assert trials["config_key"].value_counts().max() == 1
    at8 = trials[trials["batch_size"] == 8]
    assert sorted(at8["config_key"]) == sorted(c.key for c in SPACE.configs() if c.batch_size == 8)
    assert not at8["message"].str.contains("another worker").any()  # the first record stays
    assert sorted(files.load(tmp_path / "s")[0]["config_key"]) == sorted(trials["config_key"])


def test_a_compiled_config_that_crashes_does_not_skip_its_batch_size(tmp_path):
    runner = FakeRunner(fail={"inductor:default": Status.CRASH})
    summary, _ = Search(make_spec(tmp_path), runner).run(), runner
    assert sorted(runner.calls) == sorted(keys(SPACE)) and "skipped" not in summary.stop_reason


def test_after_the_model_is_fixed_a_rerun_measures_what_the_broken_model_could_not(tmp_path):
    with pytest.raises(UserError):
        run(tmp_path, FakeRunner(fail={"eager": Status.WORKLOAD_ERROR}))
    summary, runner = run(tmp_path)  # same command, model fixed
    baselines = [c.key for c in SPACE.baselines()]
    assert sorted(runner.calls[:len(baselines)]) == sorted(baselines)
    assert sorted(runner.calls) == sorted(keys(SPACE))
    ok = summary.trials[summary.trials["status"] == "ok"]
    assert sorted(ok["config_key"]) == sorted(keys(SPACE))
    assert ok["speedup_vs_eager"].notna().all()


def test_stop_after_trial_stops_the_loop(tmp_path):
    search = Search(make_spec(tmp_path), FakeRunner())
    search.on_trial = lambda event: event.number == 2 and search.stop_after_trial.set()
    summary = search.run()
    assert len(search.runner.calls) == 2
    assert summary.stop_reason == "stopped by the user" and len(summary.trials) == 2
    assert summary.stopped  # what the command line reads to say how to resume


def test_abort_abandons_the_trial_in_flight_and_resume_measures_it(tmp_path):
    search = Search(make_spec(tmp_path), FakeRunner(delay_s=5))
    search.on_start = lambda number, config, name: search.abort.set()
    summary = search.run()
    assert summary.stop_reason.startswith("stopped by the user") and summary.stopped
    assert summary.new == 0 and len(summary.trials) == 0
    abandoned = search.runner.calls[0]

    resumed, runner = run(tmp_path)
    baselines = {c.key for c in SPACE.baselines()}
    assert abandoned in baselines and set(runner.calls[:len(baselines)]) == baselines
    assert sorted(runner.calls) == sorted(keys(SPACE))


def test_budget_stops_the_search(tmp_path):
    summary, runner = run(tmp_path, FakeRunner(delay_s=0.2), budget_s=0.5)
    assert summary.stop_reason == "the time budget is spent"
    assert 1 <= len(runner.calls) < len(keys(SPACE))
    df, _ = files.read(tmp_path / "s")
    assert len(df) == len(runner.calls)


def test_pareto_file_is_per_batch_size_with_only_ok_and_correct_rows(tmp_path):
    # The fastest config fails at every batch size: it must not be recommended.
    space = make_space(modes=("default", "reduce-overhead"), dynamic=(False,))
    runner = FakeRunner(fail={"inductor:reduce-overhead": Status.WRONG_RESULT,
                              "inductor|default|dynamic=False|bs=8": Status.CRASH})
    run(tmp_path, runner, space=space)
    trials, _ = files.read(tmp_path / "s" / layout.TRIALS_FILE)
    front, _ = files.read(tmp_path / "s" / layout.PARETO_FILE)
    assert set(front["batch_size"]) == {1, 8}
    assert (front["status"] == "ok").all() and (front["correct"] == True).all()  # noqa: E712
    assert "inductor:reduce-overhead" not in set(front["label"])
    assert "inductor|default|dynamic=False|bs=8" not in set(front["config_key"])
    for bs, group in trials.groupby("batch_size"):
        alone = select.pareto(trials[trials["batch_size"] == bs])
        assert sorted(front[front["batch_size"] == bs]["config_key"]) == sorted(alone["config_key"])
        ok = group[group["status"] == "ok"]
        fastest = ok.loc[ok["latency_ms_p50"].idxmin(), "config_key"]
        assert fastest in set(front["config_key"])


def test_a_trial_left_running_by_a_dead_search_is_measured_again(tmp_path):
    spec = make_spec(tmp_path)
    config = TrialConfig("inductor", 8, "default", True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    fronts = Search(spec, FakeRunner()).fronts
    study = fronts.of(config.batch_size)
    study.enqueue_trial(params_of(config), user_attrs={KEY_ATTR: config.key})
    trial = ask(study)
    trial.set_user_attr(CONFIG_ATTR, config.to_dict())
    trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": dead.pid,
                                     "pid_namespace": pid_namespace()})

    messages = []
    search = Search(spec, FakeRunner(), on_message=messages.append)
    summary = search.run()
    assert search.runner.calls.count(config.key) == 1
    assert sorted(summary.trials["config_key"]) == sorted(keys(SPACE))
    reaped = search.fronts.of(config.batch_size).trials[trial.number]
    assert reaped.state is TrialState.FAIL and reaped.user_attrs[INTERRUPTED_ATTR] is True
    number = fronts.number(study, trial.number)
    assert any(f"trial {number} " in m and "measured again" in m for m in messages)


@pytest.mark.parametrize("namespace", ["other", "unrecorded"])
def test_a_dead_pid_of_another_pid_namespace_is_no_dead_search(tmp_path, namespace):
    # A container that shares this host's name (--network host) has pids of its own: that no
    # process here has the owner's pid says nothing of it. Nor does it of an owner recorded
    # before the namespace was. Their heartbeats say when they die.
    spec = make_spec(tmp_path)
    config = TrialConfig("inductor", 8, "default", True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    study = Search(spec, FakeRunner()).fronts.of(config.batch_size)
    study.enqueue_trial(params_of(config), user_attrs={KEY_ATTR: config.key})
    trial = ask(study)
    owner = {"host": socket.gethostname(), "pid": dead.pid}
    if namespace == "other":
        owner["pid_namespace"] = (pid_namespace() or 0) + 1
    trial.set_user_attr(OWNER_ATTR, owner)

    summary, runner = run(tmp_path)
    assert config.key not in runner.calls
    assert sorted(runner.calls) == sorted(keys(SPACE) - {config.key})


def test_a_trial_killed_before_it_was_claimed_is_measured_again(tmp_path):
    # A search killed between asking Optuna for an enqueued baseline and claiming it leaves a
    # RUNNING trial with the baseline's key and no owner: it must not block that config forever.
    spec = make_spec(tmp_path)
    config = SPACE.baselines()[0]
    study = Search(spec, FakeRunner()).fronts.of(config.batch_size)
    study.enqueue_trial(params_of(config), user_attrs={KEY_ATTR: config.key})
    ask(study)

    summary, runner = run(tmp_path)
    assert runner.calls.count(config.key) == 1
    assert sorted(summary.trials["config_key"]) == sorted(keys(SPACE))


def test_a_trial_running_in_a_live_search_is_not_measured_twice(tmp_path):
    spec = make_spec(tmp_path)
    config = TrialConfig("inductor", 8, "default", True)
    study = Search(spec, FakeRunner()).fronts.of(config.batch_size)
    study.enqueue_trial(params_of(config), user_attrs={KEY_ATTR: config.key})
    trial = ask(study)
    trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": 1})  # alive

    summary, runner = run(tmp_path)
    assert config.key not in runner.calls
    assert sorted(runner.calls) == sorted(keys(SPACE) - {config.key})
    assert summary.stop_reason == "every config in the search space is measured"


def test_optuna_sees_the_objectives_of_every_trial_and_a_failure_as_infeasible(tmp_path):
    runner = FakeRunner(fail={"inductor|default|dynamic=True|bs=1": Status.TIMEOUT})
    run(tmp_path, runner)
    states, feasible = {}, {}
    for bs in SPACE.batch_sizes:
        study = optuna.load_study(study_name=f"s:bs{bs}", storage=make_spec(tmp_path).storage_url)
        assert study.metric_names == list(select.PARETO_OBJECTIVES)
        for t in study.trials:
            if KEY_ATTR not in t.user_attrs:
                continue  # a proposal of a measured config, pruned
            states[t.user_attrs[KEY_ATTR]] = t.state
            feasible[t.user_attrs[KEY_ATTR]] = all(c <= 0 for c in t.system_attrs["constraints"])
    assert sorted(states) == sorted(keys(SPACE))  # every trial in its batch size's study
    assert set(states.values()) == {TrialState.COMPLETE}
    assert [k for k, ok in feasible.items() if not ok] == ["inductor|default|dynamic=True|bs=1"]


def test_a_worker_checking_the_study_folder_never_removes_another_workers_files(tmp_path):
    # Workers of one fleet start together; each checks that the folder is writable. With one
    # shared probe name, one deleted another's probe and that worker exited "cannot write".
    from tuner.study.storage import ensure_folder

    spec = make_spec(tmp_path)
    spec.directory.mkdir(parents=True)
    others = [spec.directory / ".write-test", spec.directory / "trials.parquet"]
    for f in others:
        f.write_text("another worker's")
    ensure_folder(spec)
    assert all(f.read_text() == "another worker's" for f in others)
    assert sorted(p.name for p in spec.directory.iterdir()) == sorted(f.name for f in others)


def test_a_config_held_only_by_the_trial_asked_for_it_is_not_taken_by_another():
    from tuner.study.claims import StudyState

    state = StudyState(measured={"a"}, pending={"b", "c"}, waiting=2,
                       holders={"b": {7}, "c": {7, 9}})
    assert not state.taken_by_another("b", 7)  # the enqueued trial ask() handed out as 7
    assert state.taken_by_another("b", 8)
    assert state.taken_by_another("c", 7)  # queued twice: the other one holds it
    assert state.taken_by_another("a", 7)
    assert not state.taken_by_another("d", 7)


class Proposes(optuna.samplers.BaseSampler):
    """A sampler that proposes one config over and over (each parameter's value in
    ``params``, else its first choice), as TPE comes to where a study has converged."""

    def __init__(self, params: dict) -> None:
        self.params = params

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.params.get(param_name, param_distribution.choices[0])


def test_a_proposal_already_measured_is_answered_by_the_nearest_config_left(tmp_path,
                                                                           monkeypatch):
    """Each proposal of a measured config costs a trial asked (the study's time, more as it
    grows): the search queues the unmeasured config nearest to it at once, so every new
    config costs at most one such proposal, and the search moves out from where the sampler
    looks."""
    from tuner.study import search
    from tuner.study.storage import opening

    space = build_space(device="cuda", batch_sizes=[1], backends=["eager", "inductor"],
                        modes=["default"], dynamic=[False, True], channels_last=[False, True],
                        available_backends=BACKENDS, available_modes=MODES)  # 6 configs
    looked_at = TrialConfig("inductor", 1, "default", False, channels_last=False)
    assert looked_at in space.baselines()  # so every proposal after the baselines is measured
    monkeypatch.setattr(opening, "make_sampler",
                        lambda kind, seed: Proposes(params_of(looked_at)))
    asked = []
    real = search.suggest
    monkeypatch.setattr(search, "suggest", lambda *a: asked.append(real(*a)) or asked[-1])
    summary, runner = run(tmp_path, space=space)
    assert sorted(runner.calls) == sorted(keys(space))
    after = runner.calls[len(space.baselines()):]
    one_apart = {TrialConfig("inductor", 1, "default", True, channels_last=False).key,
                 TrialConfig("inductor", 1, "default", False, channels_last=True).key}
    assert set(after[:2]) == one_apart  # then two apart, then eager (four: no mode, no dynamic)
    assert after[2:] == [TrialConfig("inductor", 1, "default", True, channels_last=True).key,
                         TrialConfig("eager", 1, channels_last=True).key]
    assert len(asked) == len(runner.calls) + len(after)  # one measured proposal per new config


@pytest.mark.parametrize("theirs, ours, told", [("0", "0", True), ("1", "0", False),
                                                 (None, None, True), ("0", None, False)])
def test_a_cuda_search_beside_another_on_the_same_gpus_is_told(tmp_path, monkeypatch, theirs,
                                                               ours, told):
    # Another search of the study on this host holds a trial, seeing CUDA_VISIBLE_DEVICES=theirs.
    def sees(gpus: str | None) -> None:
        if gpus is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)

    sees(theirs)
    other = Search(make_spec(tmp_path), FakeRunner())
    trial, number = other.claims.ask(other.fronts.of(1))
    assert other.claims.claim(trial, number, SPACE.configs()[0])
    other.claims.stop_heartbeat()
    sees(ours)
    said: list[str] = []
    Search(make_spec(tmp_path), FakeRunner(), on_message=said.append)._warn_of_neighbours()
    beside = [m for m in said if "same GPU" in m]
    assert bool(beside) is told, said
    if told:
        assert beside[0].startswith("1 trial of this study runs in other processes on this "
                                    "host's same GPU")
        assert f"CUDA_VISIBLE_DEVICES={ours or 'unset'}" in beside[0]
    assert not [m for m in said if "CPU cores" in m]  # that is the CPU's line


def test_a_cpu_search_beside_another_is_told_they_share_the_cores(tmp_path):
    cpu = Workload(model="resnet18", device="cpu")
    space = build_space(device="cpu", batch_sizes=[1], backends=["eager", "inductor"],
                        modes=["default"], available_backends=BACKENDS, available_modes=MODES)
    other = Search(make_spec(tmp_path, space=space, workload=cpu), FakeRunner())
    trial, number = other.claims.ask(other.fronts.of(1))
    assert other.claims.claim(trial, number, space.configs()[0])
    other.claims.stop_heartbeat()
    said: list[str] = []
    Search(make_spec(tmp_path, space=space, workload=cpu), FakeRunner(),
           on_message=said.append)._warn_of_neighbours()
    assert any("1 trial of this study runs in other processes on this host: they share its "
               "CPU cores" in m for m in said), said


@pytest.mark.parametrize("theirs, ours, told", [("0", "1", False), ("1", "1", True)])
def test_a_fleets_workers_pinned_to_other_gpus_are_not_told_of_each_other(tmp_path, monkeypatch,
                                                                        theirs, ours, told):
    # A fleet's workers share one environment; each pins its trials through its runner's.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def pinned(gpu: str) -> FakeRunner:
        runner = FakeRunner()
        runner.env = {"CUDA_VISIBLE_DEVICES": gpu}
        return runner

    other = Search(make_spec(tmp_path), pinned(theirs))
    trial, number = other.claims.ask(other.fronts.of(1))
    assert other.claims.claim(trial, number, SPACE.configs()[0])
    other.claims.stop_heartbeat()
    said: list[str] = []
    Search(make_spec(tmp_path), pinned(ours), on_message=said.append)._warn_of_neighbours()
    assert any("same GPU (CUDA_VISIBLE_DEVICES=1)" in m for m in said) is told, said


def test_progress_counts_the_trials_other_workers_finished_while_this_one_ran(tmp_path):
    # A fleet's worker used to count only the study as it stood before its trial: with 8
    # workers, each said "1 of N" for its first trial.
    class OthersMeasureMeanwhile(FakeRunner):
        def run(self, request, workdir, abort=None, cache_dir=None):
            if not self.calls:  # another worker measures two configs while this trial runs
                other = Search(make_spec(tmp_path), FakeRunner(), on_trial=lambda event: (
                    event.number == 2 and other.stop_after_trial.set()))
                other.run()
            return super().run(request, workdir, abort, cache_dir=cache_dir)

    events = []
    Search(make_spec(tmp_path, n_trials=4), OthersMeasureMeanwhile(),
           on_trial=events.append).run()
    assert [e.number for e in events] == [3, 4]


def test_each_trial_s_progress_says_how_much_of_the_budget_is_left(tmp_path):
    # The terminal's progress bar counts it down (tuner.render.progress_bar).
    events: list = []
    Search(make_spec(tmp_path / "budget", n_trials=2, budget_s=3600), FakeRunner(),
           on_trial=events.append).run()
    assert len(events) == 2 and all(3500 < e.budget_left_s <= 3600 for e in events)
    assert events[0].budget_left_s >= events[1].budget_left_s
    events.clear()
    Search(make_spec(tmp_path / "none", n_trials=1), FakeRunner(), on_trial=events.append).run()
    assert [e.budget_left_s for e in events] == [None]
