"""The compile budget (--compile-timeout): a first call past it is killed with its process group
and kept as a compile_timeout row, the search goes on, and a study made before has none."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import optuna
import pytest

from tests.support.cli import invoke
from tests.support.processes import wait_until_gone
from tests.support.specs import BACKENDS, MODES, make_space, make_spec
from tuner.domain.records import Status, TrialProtocol, TrialRequest, TrialResult
from tuner.domain.space import TrialConfig, build_space
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.files import write_json_atomic
from tuner.launch.compile_budget import MARKER_FILE, CompileWatch
from tuner.launch.runner import ProcessRunner, _wait
from tuner.study.search import Search
from tuner.study.storage import KEY_ATTR, PROTOCOL_ATTR, join_spec
from tuner.trial.compiling import compiling
from tuner.trial.contract import COMPILE_MARKER_ENV

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


def _trial_with_a_child(tmp_path) -> tuple[subprocess.Popen, int]:
    """A stand-in trial process in its own group, with a child (as inductor's compile workers
    are); the child's pid."""
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(["sh", "-c", f"sleep 600 & echo $! > {pid_file}; wait"],
                            start_new_session=True)
    while not pid_file.exists() or not pid_file.read_text().strip():
        time.sleep(0.01)
    return proc, int(pid_file.read_text())


# -- the runner's watch, on a stand-in process: milliseconds -------------------------------------

def test_a_first_call_past_the_budget_is_killed_with_its_group_and_keeps_the_record_so_far(
        tmp_path):
    watch = CompileWatch(tmp_path, budget_s=0.3)
    so_far = TrialResult(status=Status.OK, build_s=1.5, eager_reference_ms=4.0, cache_start="cold",
                         fingerprint={"torch": "2.14.1"})
    write_json_atomic(watch.marker, so_far.to_dict())  # the trial's first call has started
    proc, child = _trial_with_a_child(tmp_path)
    started = time.monotonic()
    outcome = _wait(proc, 5.0, None, tmp_path / "result.json", watch)
    assert outcome == "compile_timeout"
    assert 0.3 <= time.monotonic() - started < 5
    assert proc.returncode is not None and wait_until_gone(child)  # the whole group died

    result = watch.record()
    assert result.status is Status.COMPILE_TIMEOUT
    assert result.message.startswith("the first (compiling) call was still running after 0.")
    assert result.message.endswith("past the compile budget of 0.3 s (--compile-timeout); "
                                   "process group killed")
    assert "\n" not in result.message
    # What the trial had measured before its first call stays in the row; the compile has no time.
    assert (result.build_s, result.eager_reference_ms, result.cache_start) == (1.5, 4.0, "cold")
    assert result.fingerprint == {"torch": "2.14.1"} and result.compile_s_cold is None
    assert not watch.marker.exists()



def test_a_first_call_still_running_at_the_timeout_says_so_and_keeps_the_record_so_far(
        tmp_path):
    watch = CompileWatch(tmp_path, budget_s=60.0)  # within the budget: --timeout ends it
    write_json_atomic(watch.marker, TrialResult(status=Status.OK, build_s=1.5).to_dict())
    proc, child = _trial_with_a_child(tmp_path)
    assert _wait(proc, 0.3, None, tmp_path / "result.json", watch) == "timeout"
    assert wait_until_gone(child) and watch.in_first_call()
    result = watch.timed_out(0.3)
    assert result.status is Status.TIMEOUT and result.build_s == 1.5
    assert result.message.startswith("no result after 0.3 s (--timeout), with its first "
                                     "(compiling) call still running after 0.")
    assert result.message.endswith(" s; process group killed") and not watch.marker.exists()


def test_a_timeout_after_the_first_call_returned_is_not_put_on_the_compile(tmp_path):
    watch = CompileWatch(tmp_path, budget_s=60.0)
    write_json_atomic(watch.marker, TrialResult(status=Status.OK).to_dict())
    proc, _ = _trial_with_a_child(tmp_path)
    threading.Timer(0.1, watch.marker.unlink).start()  # the first call returns
    assert _wait(proc, 0.5, None, tmp_path / "result.json", watch) == "timeout"
    assert not watch.in_first_call()

def test_a_first_call_that_returns_within_the_budget_is_not_killed(tmp_path):
    watch = CompileWatch(tmp_path, budget_s=0.3)
    write_json_atomic(watch.marker, TrialResult(status=Status.OK).to_dict())
    proc = subprocess.Popen(["sleep", "0.8"], start_new_session=True)
    # The first call returns after 0.1 s: the marker goes, and the trial runs on past the budget.
    threading.Timer(0.1, watch.marker.unlink).start()
    assert _wait(proc, 60.0, None, tmp_path / "result.json", watch) == "exited"
    assert proc.returncode == 0


def test_without_a_budget_the_trial_is_given_no_marker_and_never_killed_for_it(tmp_path):
    watch = CompileWatch(tmp_path, budget_s=None)
    assert watch.env == {}
    write_json_atomic(watch.marker, TrialResult(status=Status.OK).to_dict())
    proc = subprocess.Popen(["sleep", "0.3"], start_new_session=True)
    assert _wait(proc, 60.0, None, tmp_path / "result.json", watch) == "exited"
    assert CompileWatch(tmp_path, budget_s=5.0).env == {
        COMPILE_MARKER_ENV: str(tmp_path / MARKER_FILE)}


def test_the_trial_marks_only_a_compiled_first_call_and_removes_the_mark_however_it_ends(
        tmp_path, monkeypatch):
    marker = tmp_path / MARKER_FILE
    monkeypatch.setenv(COMPILE_MARKER_ENV, str(marker))
    result = TrialResult(status=Status.OK, build_s=2.0)
    with compiling(result, compiled=True):
        assert TrialResult.from_dict(__import__("json").loads(marker.read_text())).build_s == 2.0
    assert not marker.exists()
    with pytest.raises(RuntimeError), compiling(result, compiled=True):
        raise RuntimeError("the compile raised")  # a compile_error: its record comes next
    assert not marker.exists()
    with compiling(result, compiled=False):  # eager compiles nothing
        assert not marker.exists()
    monkeypatch.delenv(COMPILE_MARKER_ENV)
    with compiling(result, compiled=True):  # no budget: no marker
        assert list(tmp_path.iterdir()) == []


# -- the search, with the fake runner ------------------------------------------------------------

# Fake cold compiles (FakeRunner.COMPILE_S): default 15 s, max-autotune-no-cudagraphs 60 s.
AUTOTUNE = make_space(batch_sizes=(1,), modes=("default", "max-autotune-no-cudagraphs"),
                      dynamic=(False,))
BUDGET = TrialProtocol(compile_timeout_s=30.0)


def test_a_config_past_the_compile_budget_is_a_failed_row_and_the_search_goes_on(tmp_path):
    spec = make_spec(tmp_path, space=AUTOTUNE, protocol=BUDGET)
    runner = FakeRunner()
    summary = Search(spec, runner).run()
    assert sorted(runner.calls) == sorted(c.key for c in AUTOTUNE.configs())  # every one ran
    assert all(r.protocol.compile_timeout_s == 30.0 for r in runner.requests)
    df = summary.trials.set_index("config_key")
    late = df[df["mode"] == "max-autotune-no-cudagraphs"]
    assert len(late) == 1 and (late["status"] == "compile_timeout").all()
    assert late["message"].str.contains("past the compile budget of 30 s").all()
    assert (df.drop(index=late.index)["status"] == "ok").all()  # its batch size is not broken
    assert "skipped" not in summary.stop_reason
    # The sampler is told it failed: an infeasible point with no objectives.
    for key in late.index:
        bs = int(df.loc[key, "batch_size"])
        study = optuna.load_study(study_name=f"s:bs{bs}", storage=spec.storage_url)
        trial = next(t for t in study.trials if t.user_attrs.get(KEY_ATTR) == key)
        assert trial.values == [float("inf")] * 3
        assert trial.system_attrs["constraints"][0] == 1.0


def test_a_study_made_before_compile_budgets_resumes_without_one(tmp_path):
    spec = make_spec(tmp_path, space=AUTOTUNE, protocol=BUDGET)
    search = Search(spec, FakeRunner())  # created, nothing measured yet
    older = {k: v for k, v in search.study.user_attrs[PROTOCOL_ATTR].items()
             if k != "compile_timeout_s"}
    search.study.set_user_attr(PROTOCOL_ATTR, older)  # as an older tuner stored it

    runner = FakeRunner()
    summary = Search(spec, runner).run()  # the same command, with its (default) budget
    assert {r.protocol.compile_timeout_s for r in runner.requests} == {None}
    assert (summary.trials["status"] == "ok").all()
    assert join_spec("s", None, tmp_path).protocol.compile_timeout_s is None  # and for workers
    assert search.study.user_attrs[PROTOCOL_ATTR] == older  # not rewritten


def test_search_help_says_the_default_budget_and_how_to_have_none():
    result = invoke("search", "--help")
    text = " ".join(result.stdout.split())
    assert "--compile-timeout DURATION" in text and "[default: 5m]" in text
    assert "none: no budget" in text and "6-34 s" in text and "380 s" in text


def test_the_cli_stores_the_budget_with_the_study(tmp_path, fake_cli):
    from tests.support.cli import search_args
    from tuner.cli.options import Duration

    args = search_args(tmp_path, "--confirm", "0", backend="eager", mode=None, batch_sizes="1",
                       compile_timeout="1m30s")
    assert invoke(*args).exit_code == 0
    assert join_spec("resnet18-cpu", None, tmp_path).protocol.compile_timeout_s == 90.0
    assert Duration(none_ok=True).convert("None", None, None) is None  # --compile-timeout none
    with pytest.raises(Exception, match="cannot read duration 'none'"):
        Duration().convert("none", None, None)  # --timeout none is no duration


# -- a real trial process whose compile hangs: seconds --------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("prestart", [False, True], ids=["fresh", "prestarted"])
def test_a_real_compile_past_its_budget_is_killed_with_its_children(tmp_path, monkeypatch,
                                                                     prestart):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("TUNER_TEST_CHILD_PID_FILE", str(pid_file))
    protocol = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20,
                             compile_timeout_s=2.0)
    request = TrialRequest(TrialConfig("inductor", 2, "default", False),
                           Workload(model="tests.support.models:slow_to_compile", device="cpu"), protocol)
    runner = ProcessRunner(timeout_s=60, prestart=prestart)
    try:
        r = runner.run(request, tmp_path / "trial")
    finally:
        runner.close()
    assert r.status is Status.COMPILE_TIMEOUT, (r.message, r.stderr_tail)
    assert r.prestarted is prestart
    assert "past the compile budget of 2 s (--compile-timeout)" in r.message
    assert 2.0 <= float(r.message.split("after ")[1].split(" s")[0]) < 10
    assert r.wall_s < 60  # not --timeout
    # The row keeps what the trial measured before its first call.
    assert r.eager_reference_ms > 0 and r.build_s is not None and r.fingerprint["torch"]
    assert r.cache_start == "cold" and r.compile_s_cold is None
    children = [int(pid) for pid in pid_file.read_text().split()]
    assert children and all(wait_until_gone(pid) for pid in children)  # they died with it
    assert not (tmp_path / "trial" / MARKER_FILE).exists()
    assert os.path.exists(tmp_path / "trial" / "trial.log")



@pytest.mark.slow
def test_a_real_compile_still_running_at_the_timeout_is_a_timeout_that_says_so(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("TUNER_TEST_CHILD_PID_FILE", str(tmp_path / "child.pid"))
    protocol = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20,
                             compile_timeout_s=60.0)
    request = TrialRequest(TrialConfig("inductor", 2, "default", False),
                           Workload(model="tests.support.models:slow_to_compile", device="cpu"), protocol)
    # The compile hangs for ever. The process must reach it first (import torch, build, eager):
    # with a timeout of 8 s it did not, once, on the 2-core box at a load average of 3.3.
    runner = ProcessRunner(timeout_s=15, prestart=False)
    try:
        r = runner.run(request, tmp_path / "trial")
    finally:
        runner.close()
    assert r.status is Status.TIMEOUT, (r.message, r.stderr_tail)
    assert r.message.startswith("no result after 15 s (--timeout), with its first (compiling) "
                                "call still running after "), r.message
    assert r.eager_reference_ms > 0 and r.build_s is not None and r.prestarted is False

def test_a_resume_skips_the_mode_of_a_compile_past_the_budget_that_a_killed_run_left(
        tmp_path, monkeypatch):
    # The first run stops right after the compile that ran past the budget, before it recorded
    # that mode's other configs as not run: as if killed there. The resume skips them all the same.
    space = build_space(device="cuda", batch_sizes=[1], backends=["eager", "inductor"],
                        modes=["default", "max-autotune-no-cudagraphs"], dynamic=[False, True],
                        options={"epilogue_fusion": ["true", "false"]},
                        available_backends=BACKENDS, available_modes=MODES,
                        available_options={"epilogue_fusion": bool})
    spec = make_spec(tmp_path, space=space, protocol=BUDGET)
    autotune = {c.key for c in space.configs() if c.mode == "max-autotune-no-cudagraphs"}
    killed = Search(spec, FakeRunner())
    monkeypatch.setattr(killed, "_skip_mode", lambda config, number, not_run: 0)
    killed.on_trial = lambda event: event.result.status is Status.COMPILE_TIMEOUT and \
        killed.stop_after_trial.set()
    killed.run()
    assert sum(key in autotune for key in killed.runner.calls) == 1
    said: list[str] = []
    resumed = Search(spec, FakeRunner(), on_message=said.append)
    summary = resumed.run()
    assert not set(resumed.runner.calls) & autotune  # none compiled past the budget again
    rows = summary.trials[summary.trials["config_key"].isin(autotune)]
    assert len(rows) == len(autotune) and (rows["status"] == "compile_timeout").all()
    assert rows["message"].str.startswith("not run").sum() == len(autotune) - 1
    others = len(autotune) - 1
    skipped = "1 other config there is" if others == 1 else f"{others} other configs there are"
    assert any("compiled past --compile-timeout at batch size 1 (trial" in m and
               f"its {skipped} skipped" in m for m in said)


# A mode past the budget at every batch size. Not a max-autotune one: those are probed at one
# batch size and skipped at the others once the probe runs past it (tests/unit/study/test_probe.py).
SLOW = "reduce-overhead"  # FakeRunner.COMPILE_S: 17 s cold, default 15 s
SLOW_BUDGET = TrialProtocol(compile_timeout_s=16.0)


def _slow_space():
    """Batch sizes 1 and 8: eager, and inductor default and reduce-overhead, each with dynamic
    and epilogue_fusion off and on."""
    return build_space(device="cuda", batch_sizes=[1, 8], backends=["eager", "inductor"],
                       modes=["default", SLOW], dynamic=[False, True],
                       options={"epilogue_fusion": ["true", "false"]},
                       available_backends=BACKENDS, available_modes=MODES,
                       available_options={"epilogue_fusion": bool})


def test_a_mode_that_compiled_past_the_budget_is_not_tried_again_at_that_batch_size(tmp_path):
    # A night must not go to compile timeouts: once a config of a mode ran past the compile
    # budget at a batch size, that mode's other configs there are rows saying so, not trials.
    space = _slow_space()
    spec = make_spec(tmp_path, space=space, protocol=SLOW_BUDGET)
    runner = FakeRunner()
    summary = Search(spec, runner).run()
    df = summary.trials
    slow = df[df["mode"] == SLOW]
    assert len(slow) == 8 and (slow["status"] == "compile_timeout").all()
    ran = slow[~slow["message"].str.startswith("not run")]
    assert sorted(ran["batch_size"]) == [1, 8]  # one trial a batch size spent the budget
    slow_keys = {c.key for c in space.configs() if c.mode == SLOW}
    assert sum(key in slow_keys for key in runner.calls) == 2
    skipped = slow[slow["message"].str.startswith("not run")]
    assert skipped["message"].str.contains("compiled past --compile-timeout at batch size").all()
    # Everything else ran, once.
    assert sorted(runner.calls) == sorted(
        c.key for c in space.configs() if c.mode != SLOW or c.key in set(ran["config_key"]))
    assert (df[df["mode"] != SLOW]["status"] == "ok").all()
    assert summary.stop_reason.startswith("every config in the search space is measured")


def test_configs_skipped_for_the_compile_budget_do_not_count_toward_trials(tmp_path):
    # --trials 10 stopped after 4 trials where a compile past the budget skipped its mode's
    # other configs: each not-run row counted as a measured trial.
    space = _slow_space()
    runner = FakeRunner()
    events = []
    search = Search(make_spec(tmp_path, space=space, protocol=SLOW_BUDGET, n_trials=10), runner,
                    on_trial=events.append)
    summary = search.run()
    assert len(runner.calls) == 10 and summary.new == 10 and summary.measured == 10
    assert summary.skipped == 6  # 4 reduce-overhead configs a batch size, one of them run
    assert summary.stop_reason == "reached 10 trials"
    assert [e.number for e in events] == list(range(1, 11))
    assert {e.target for e in events} == {10}


def test_the_cli_counts_skipped_configs_apart(tmp_path, fake_cli):
    from tests.support.cli import search_args

    # FakeRunner's max-autotune-no-cudagraphs compiles 60 s cold: past a 30 s budget.
    args = search_args(tmp_path, "--confirm", "0", "--device", "cuda", backend="inductor",
                       mode="max-autotune-no-cudagraphs", batch_sizes="1", compile_timeout="30s",
                       device=None)
    args += ["--inductor-option", "epilogue_fusion=true,false", "--channels-last", "false"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    # eager, the baseline, and max-autotune with epilogue_fusion on and off
    assert "3 configs in the space, target 3 trials" in result.stderr
    assert "[2/3] trial 2 max-autotune-no-cudagraphs bs=1: " in result.stderr
    assert ("2 new trials, 2 in the study (1 config skipped, not run)" in result.stderr), \
        result.stderr
    assert "1 trial failed and 1 config was not run (kept in trials.parquet):" in result.stdout
