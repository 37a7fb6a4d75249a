"""What a resume does with what an earlier run left: a batch size where the model failed, a trial
measured but not told to Optuna, a new study opened by two searches at once."""

from __future__ import annotations

import dataclasses
import multiprocessing
import socket
import subprocess
import sys
import time
import traceback

import optuna
import pytest
from optuna.trial import TrialState

from tests.support.specs import SPACE, WORKLOAD, ask, keys, make_spec
from tuner.data import files
from tuner.domain.records import Status, TrialRequest
from tuner.errors import UserError
from tuner.fake import FakeRunner
from tuner.study.claims import pid_namespace
from tuner.study.params import params_of
from tuner.study.record import store_result
from tuner.study.search import Search
from tuner.study.storage import CONFIG_ATTR, KEY_ATTR, OWNER_ATTR, make_storage

AT_8 = sorted(c.key for c in SPACE.configs() if c.batch_size == 8)


def search(tmp_path, runner, messages=None):
    return Search(make_spec(tmp_path), runner,
                  on_message=(messages if messages is not None else []).append)


def one_row_each(df) -> None:
    assert df["config_key"].value_counts().max() == 1, df[["trial_number", "config_key",
                                                          "status", "message"]]
    assert sorted(df["config_key"]) == sorted(keys(SPACE))


# -- a batch size where the model fails without compiling ----------------------------------------

@pytest.mark.parametrize("status", [Status.CRASH, Status.OOM, Status.CUDA_ERROR])
def test_a_resume_skips_a_batch_size_where_eager_failed_and_adds_no_rows(tmp_path, status):
    # Eager crashed (or ran out of memory, ...) at batch size 8: each of its configs would too.
    # The same command again must not run them as trials.
    fail = {"eager|bs=8": status}
    first = search(tmp_path, FakeRunner(fail=fail)).run()
    messages: list[str] = []
    again = search(tmp_path, FakeRunner(fail=fail), messages)
    summary = again.run()
    assert again.runner.calls == []  # batch size 1 was done; batch size 8 is the study's answer
    assert "skipped batch sizes where the model fails: 8" in summary.stop_reason
    assert any(m.startswith("batch size 8 is skipped: the study holds that the model fails")
               and f"eager: {status.value}" in m for m in messages), messages
    one_row_each(summary.trials)
    assert summary.trials.equals(first.trials)
    one_row_each(files.read(tmp_path / "s")[0])
    # Nothing was asked of the storage at batch size 8: no trial pruned there either.
    assert len(again.fronts.of(8).trials) == len(AT_8)


@pytest.mark.parametrize("status", [Status.WORKLOAD_ERROR, Status.TIMEOUT])
def test_a_resume_tries_eager_once_more_where_it_raised_or_timed_out(tmp_path, status):
    # A model that raised may be fixed, and eager past --timeout may finish under a larger one:
    # the same command tries eager there once more (one trial, not one per config); once it
    # runs, the rest of batch size 8 is measured and the old rows give way.
    fail = {"eager|bs=8": status}
    search(tmp_path, FakeRunner(fail=fail)).run()
    again = search(tmp_path, FakeRunner(fail=fail))
    summary = again.run()
    assert again.runner.calls == ["eager|bs=8"]
    one_row_each(summary.trials)
    at8 = summary.trials[summary.trials["batch_size"] == 8].set_index("config_key")
    assert at8.loc["eager|bs=8", "status"] == status.value
    assert at8.drop(index="eager|bs=8")["message"].str.startswith("not run: ").all()
    finished = search(tmp_path, FakeRunner())
    summary = finished.run()
    assert sorted(finished.runner.calls) == AT_8 and finished.runner.calls[0] == "eager|bs=8"
    one_row_each(summary.trials)
    assert (summary.trials["status"] == "ok").all()  # no "not run", no old failure
    assert summary.trials["speedup_vs_eager"].notna().all()
    one_row_each(files.read(tmp_path / "s")[0])


def test_a_study_where_every_batch_size_timed_out_finishes_with_a_larger_timeout(tmp_path):
    # The error says to raise --timeout: doing so must measure, not refuse again.
    with pytest.raises(UserError, match="raise --timeout"):
        search(tmp_path, FakeRunner(fail={"eager": Status.TIMEOUT})).run()
    summary = search(tmp_path, FakeRunner()).run()
    one_row_each(summary.trials)
    assert (summary.trials["status"] == "ok").all()


def test_a_model_that_still_fails_at_every_batch_size_is_refused_again(tmp_path):
    fail = {"eager": Status.OOM}
    with pytest.raises(UserError, match="the model cannot run at any batch size"):
        search(tmp_path, FakeRunner(fail=fail)).run()
    again = search(tmp_path, FakeRunner(fail=fail))
    with pytest.raises(UserError, match="batch size 1: trial 1, eager: oom"):
        again.run()
    assert again.runner.calls == []


def test_the_last_error_keeps_a_workload_errors_advice(tmp_path):
    # A trial's message is cut at 300 characters; the search's last line must keep as much,
    # since the advice (what to change in the factory) comes at the end.
    advice = "give the factory a second argument, def factory(batch_size, seq_len=...)"
    long = f"factory tests.models:f raised ValueError: {'x' * 180}; {advice}"
    assert 250 < len(long) <= 300

    class SaysAtLength(FakeRunner):
        def run(self, request, *args, **kwargs):
            result = super().run(request, *args, **kwargs)
            if result.status is Status.WORKLOAD_ERROR:
                result.message = long
            return result

    with pytest.raises(UserError) as error:
        search(tmp_path, SaysAtLength(fail={"eager": Status.WORKLOAD_ERROR})).run()
    assert f"batch size 1: trial 1, eager: workload_error: {long};" in str(error.value)


# -- a trial measured, then its search killed before Optuna was told ------------------------------

class Killed(BaseException):
    """Stands in for a SIGKILL while the files are written: nothing after it runs."""


def test_a_search_killed_while_it_writes_the_files_leaves_its_trial_told(tmp_path, monkeypatch):
    real, writes = files.export, []

    def export(*args, **kwargs):
        writes.append(1)
        if len(writes) == 2:
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "export", export)
    killed = search(tmp_path, FakeRunner())
    with pytest.raises(Killed):
        killed.run()
    second = killed.fronts.find(2).frozen  # the trial whose files were being written
    assert second.state is TrialState.COMPLETE and len(second.values) == 3


def stored_untold(tmp_path, host: str, pid: int):
    """A trial of the study, claimed by ``host`` ``pid``, its result stored, never told: what
    a search killed between storing a result and telling Optuna leaves."""
    config = next(c for c in SPACE.configs() if c.compiled and c.batch_size == 8
                  and c not in SPACE.baselines())
    first = search(tmp_path, FakeRunner())
    study = first.fronts.of(8)
    study.enqueue_trial(params_of(config), user_attrs={KEY_ATTR: config.key})
    trial = ask(study)
    trial.set_user_attr(CONFIG_ATTR, config.to_dict())
    trial.set_user_attr(OWNER_ATTR, {"host": host, "pid": pid, "pid_namespace": pid_namespace(),
                                     "heartbeat_s": 1})
    storage, trial_id = first.claims.storage, first.fronts.trial_id(study, trial.number)
    storage.record_heartbeat(trial_id)
    store_result(storage, trial_id, FakeRunner().run(TrialRequest(config, WORKLOAD), tmp_path))
    return config, first.fronts.number(study, trial.number)


def check_told(tmp_path, messages, config, number) -> None:
    again = search(tmp_path, FakeRunner(), messages)
    summary = again.run()
    assert config.key not in again.runner.calls
    told = again.fronts.find(number).frozen
    assert told.state is TrialState.COMPLETE and len(told.values) == 3
    row = summary.trials.set_index("config_key").loc[config.key]
    assert row["status"] == "ok" and row["trial_number"] == number
    one_row_each(summary.trials)
    said = [m for m in messages if f"trial {number} " in m]
    assert said and all("result is kept, not measured again" in m for m in said), messages


def test_a_trial_a_dead_search_measured_but_did_not_tell_is_kept_on_resume(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    config, number = stored_untold(tmp_path, socket.gethostname(), dead.pid)
    messages: list[str] = []
    check_told(tmp_path, messages, config, number)
    assert any("was measured by a search that died" in m for m in messages)


def test_a_stale_trial_that_stored_its_result_is_told_it_not_failed(tmp_path, monkeypatch):
    # A worker on another host died after storing its result: its heartbeat goes stale.
    monkeypatch.setenv("TUNER_HEARTBEAT_INTERVAL_S", "1")
    monkeypatch.setenv("TUNER_HEARTBEAT_GRACE_S", "2")
    config, number = stored_untold(tmp_path, "another-host", 1)
    time.sleep(3.2)  # SQLite's clock has whole seconds: the beat is then over 2 seconds old
    messages: list[str] = []
    check_told(tmp_path, messages, config, number)
    assert any("after it stored its result" in m for m in messages)


# -- two searches that create a new study at once -------------------------------------------------

def _open(url: str, start, errors) -> None:
    try:
        start.wait(10)
        storage = make_storage(url, given=False)
        optuna.create_study(study_name="s", storage=storage, load_if_exists=True)
    except BaseException:  # noqa: BLE001 - the parent asserts there were none
        errors.put(traceback.format_exc(limit=1).strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="forks processes that already imported optuna")
def test_searches_that_open_a_new_study_at_once_share_it(tmp_path):
    # Optuna creates a new SQLite file's schema without a lock: one of two processes found a
    # table or a version row the other had just made, and stopped ("UNIQUE constraint failed:
    # alembic_version.version_num").
    fork = multiprocessing.get_context("fork")
    errors = fork.Queue()
    for round_ in range(8):
        url = f"sqlite:///{tmp_path / f'study-{round_}.db'}"
        start = fork.Barrier(4)
        procs = [fork.Process(target=_open, args=(url, start, errors)) for _ in range(4)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(30)
        assert [proc.exitcode for proc in procs] == [0] * 4
        assert optuna.get_all_study_names(storage=url) == ["s"]
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "still failing"])
def test_retry_failed_measures_eager_again_where_the_study_holds_its_failure(tmp_path, fixed):
    # The GPU was shared and eager ran out of memory at batch size 8; with the GPU freed,
    # --retry-failed measures it, then the rest there, and the new rows replace the old.
    fail = {"eager|bs=8": Status.OOM}
    search(tmp_path, FakeRunner(fail=fail)).run()
    messages: list[str] = []
    again = Search(dataclasses.replace(make_spec(tmp_path), retry_failed=True),
                   FakeRunner(fail=None if fixed else fail), on_message=messages.append)
    summary = again.run()
    assert any("eager failed there before" in m and "--retry-failed measures it again" in m
               for m in messages), messages
    one_row_each(summary.trials)
    at8 = summary.trials[summary.trials["batch_size"] == 8].set_index("config_key")
    if fixed:
        assert sorted(again.runner.calls) == AT_8 and again.runner.calls[0] == "eager|bs=8"
        assert (at8["status"] == "ok").all()
    else:  # one trial, not one per config
        assert again.runner.calls == ["eager|bs=8"]
        assert at8.loc["eager|bs=8", "status"] == "oom"
        assert at8.loc["eager|bs=8", "trial_number"] > 2  # the new failure, not the old row
        assert at8.drop(index="eager|bs=8")["message"].str.startswith("not run: ").all()


@pytest.mark.usefixtures("fake_cli")
def test_a_worker_with_retry_failed_measures_the_held_batch_size(tmp_path):
    from click.testing import CliRunner

    from tuner.cli.app import main

    search(tmp_path, FakeRunner(fail={"eager|bs=8": Status.OOM})).run()
    args = ["worker", "--study", "s", "--studies-dir", str(tmp_path), "-q"]
    before = len(files.read(tmp_path / "s")[0])
    held = CliRunner().invoke(main, args)  # without it, the batch size stays skipped
    assert held.exit_code == 0, held.output
    df = files.read(tmp_path / "s")[0]
    assert len(df) == before and (df["status"] != "ok").sum() == len(AT_8)
    retried = CliRunner().invoke(main, [*args, "--retry-failed"])
    assert retried.exit_code == 0, retried.output
    df = files.read(tmp_path / "s")[0]
    one_row_each(df)
    assert (df["status"] == "ok").all()


def test_retry_failed_is_an_option_of_search_and_worker_and_reaches_a_fleets_workers():
    from click.testing import CliRunner

    from tuner.cli.app import main
    from tuner.launch.runner import LaunchSettings
    from tuner.study.fleet import plan_of
    from tuner.study.plan import WorkerPlan

    for command in ("search", "worker"):
        assert "--retry-failed" in CliRunner().invoke(main, [command, "--help"]).output
    plan = plan_of("s", "studies", LaunchSettings(), 0, None, None, False, "resnet18",
                   retry_failed=True)
    assert WorkerPlan.from_json(plan.to_json()).retry_failed is True
