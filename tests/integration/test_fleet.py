"""Several workers on one study (SQLite, one host): `tuner worker`, `tuner search --gpus` (Fleet),
a killed worker's trial recovered through heartbeats, GPU pinning, passwords kept out of output.
The same scenarios against PostgreSQL are in test_postgres.py."""

from __future__ import annotations

import dataclasses
import io
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

from tests.support import workers
from tests.support.processes import gone, wait_until_gone
from tests.support.synthetic import write_study
from tuner import fake
from tuner.cli.app import main
from tuner.data import files
from tuner.domain import layout
from tuner.domain.config import TrialConfig
from tuner.errors import UserError
from tuner.fake import FakeRunner
from tuner.launch import gpus
from tuner.launch.runner import LaunchSettings
from tuner.study import fleet as fleets
from tuner.study.redact import redact, scrub
from tuner.study.search import Search
from tuner.study.storage import OWNER_ATTR

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
              pytest.mark.usefixtures("fake_cli")]


def test_three_workers_on_one_sqlite_study_measure_every_config_once(tmp_path):
    spec = workers.create(tmp_path, "shared", storage=None)
    procs = [workers.start(spec, seed=i) for i in range(3)]
    for proc in procs:
        workers.finish(proc)
    measured = workers.assert_every_config_measured_once(spec)
    assert len({t.user_attrs[OWNER_ATTR]["pid"] for t in measured}) >= 2  # they shared the work
    df, meta = files.read(tmp_path / "shared")
    assert sorted(df["config_key"]) == sorted(c.key for c in spec.space.configs())


def test_search_gpus_runs_one_pinned_worker_per_gpu_on_one_study(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = workers.create(tmp_path, "fleet", storage=None)
    monkeypatch.setenv(fake.FAKE_DELAY_ENV, "0.02")
    fleet = fleets.Fleet.of(spec, [0, 1, 2], LaunchSettings(timeout_s=60), quiet=True)
    assert [fleet.plan(i, g).launch.gpu for i, g in enumerate(fleet.gpus)] == [0, 1, 2]
    assert [fleet.plan(i, g).seed for i, g in enumerate(fleet.gpus)] == [0, 1, 2]
    assert not fleet.plan(0, 0).launch.prestart  # as the command decided it
    assert fleets.Fleet.of(spec, [0], LaunchSettings(60, prestart=True)).plan(0, 0).launch.prestart
    summary = fleet.run(spec)
    assert [e.returncode for e in fleet.exits] == [0, 0, 0]
    workers.assert_every_config_measured_once(spec)
    assert summary.measured == summary.new == len(spec.space.configs())
    assert summary.stop_reason == "all 3 workers finished" and not summary.stopped
    df, _ = files.read(tmp_path / "fleet")
    assert df["config_key"].is_unique and len(df) == len(spec.space.configs())


def test_a_fleet_worker_starts_its_first_trials_process_at_once_and_counts_no_gpus(
        tmp_path, monkeypatch):
    # On the H200 a fleet worker imported torch to count the GPUs its parent had counted, then
    # its first trial imported it again: 7.6 s more start-up for two GPUs than for one.
    from tuner.cli import measure
    from tuner.launch import runner as runners
    from tuner.trial.prebuild import PrebuildRequest

    spec = workers.create(tmp_path, "early", storage=None, space=workers.SPACE_SMALL)
    plan = fleets.WorkerPlan.from_json(
        fleets.Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=60)).plan(1, 1).to_json())
    made: list[FakeRunner] = []
    monkeypatch.setattr(runners, "make_runner",
                        lambda settings, shared=None: made.append(FakeRunner()) or made[-1])

    def counted() -> int:
        raise AssertionError("the fleet worker counted the GPUs again (importing torch)")

    monkeypatch.setattr(gpus, "visible_gpus", counted)
    measure.run_worker(plan, None, as_json=False)
    first = PrebuildRequest(spec.workload, spec.space.batch_sizes[0])
    assert made[0].spares == [(first, 0)]  # before any trial, for the first batch size
    assert len(made[0].calls) == len(spec.space.configs())
    # `tuner worker` has no parent that counted: it still checks, with its one-line error.
    with pytest.raises(AssertionError, match="counted the GPUs"):
        measure.run_worker(dataclasses.replace(plan, gpus_checked=False), None, as_json=False)
    assert made[1].closed == 1  # its first trial's process is not left behind


def test_a_fleets_worker_starts_importing_before_its_study_and_joins_it_when_told(
        tmp_path, monkeypatch):
    # On the H200 a fleet's first trial waited for its template's import of torch, started
    # only once the parent had checked the model and made the study: 13 s into the command.
    from tuner.cli import fleet_worker, measure
    from tuner.launch import runner as runners

    plan = fleets.Fleet(fleets.plan_of("waits", tmp_path, LaunchSettings(60), 0, None, None,
                                       True, "tests.support.models:tiny_cnn"), [0]).plan(0, 0)
    assert plan.wait_for_go and plan.factory_module == "tests.support.models"
    assert fleets.plan_of("w", tmp_path, LaunchSettings(60), 0, None, None, True,
                          "resnet18").factory_module is None  # torchvision imports it anyway
    made: list[FakeRunner] = []
    monkeypatch.setattr(runners, "make_runner",
                        lambda settings, shared=None: made.append(FakeRunner()) or made[-1])
    joined: list[object] = []
    monkeypatch.setattr(measure, "run_worker",
                        lambda plan, storage, as_json, runner, stop_cause: joined.append(runner))
    # The command found a bad input: no GO, and the worker exits, its template closed.
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert fleet_worker.main([plan.to_json()]) == 0
    assert made[0].templates == ["tests.support.models"] and made[0].closed == 1 and not joined
    # The study is ready: it joins with the runner whose template is importing.
    monkeypatch.setattr(sys, "stdin", io.StringIO(fleets.GO))
    assert fleet_worker.main([plan.to_json()]) == 0
    assert joined == [made[1]] and made[1].templates == ["tests.support.models"] and not made[1].closed


def test_a_fleets_worker_imports_what_opening_its_study_needs_before_the_go(monkeypatch,
                                                                          tmp_path):
    # On the H200 host a worker's first open of the study took 1.3 s after the go (Optuna
    # imports SQLAlchemy and alembic on first use): benchmarks/fleet_startup.py measures it.
    from tuner.cli import fleet_worker
    from tuner.launch import runner as runners

    events: list[str] = []
    monkeypatch.setattr(runners, "make_runner", lambda settings, shared=None: FakeRunner())
    from tuner.study import storage

    monkeypatch.setattr(storage, "import_ahead", lambda: events.append("imported"))

    class Told(io.StringIO):
        def readline(self, *args: object) -> str:
            events.append("read")
            return ""

    monkeypatch.setattr(sys, "stdin", Told())
    plan = fleets.Fleet(fleets.plan_of("ahead", tmp_path, LaunchSettings(60), 0, None, None,
                                       True, "resnet18"), [0]).plan(0, 0)
    assert fleet_worker.main([plan.to_json()]) == 0
    assert events == ["imported", "read"]


def test_a_fleets_worker_starts_its_template_before_it_imports_the_commands(tmp_path):
    # The commands and what they import (pandas, the study's modules) took 0.5 s on this
    # machine and 0.8 s on the H200 host, before the template's import of torch could start.
    plan = fleets.Fleet(fleets.plan_of("first", tmp_path, LaunchSettings(60), 0, None, None,
                                       True, "resnet18"), [0]).plan(0, 0)
    code = ("import sys\n"
            "from tuner.launch import runner\n"
            "class Started:\n"
            "    def start_template(self, module):\n"
            "        print(sorted(m for m in ('tuner.cli.measure', 'pandas', 'optuna', 'torch')\n"
            "                     if m in sys.modules))\n"
            "    def close(self): pass\n"
            "runner.make_runner = lambda settings, shared=None: Started()\n"
            "from tuner.cli import fleet_worker\n"
            "sys.exit(fleet_worker.main([sys.argv[1]]))\n")
    done = subprocess.run([sys.executable, "-c", code, plan.to_json()], input="",
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


def test_once_imported_ahead_opening_a_study_imports_nothing_more(tmp_path):
    code = ("import sys; from tuner.study import storage; storage.import_ahead(); "
            "before = set(sys.modules); "
            f"storage.make_storage('sqlite:///{tmp_path}/study.db', given=False); "
            "print(sorted(set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_bad_input_to_search_gpus_is_one_line_and_its_waiting_workers_exit(
        tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(gpus, "visible_gpus", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    started: list[fleets.Fleet] = []
    spawn = fleets.Fleet.spawn
    monkeypatch.setattr(fleets.Fleet, "spawn", lambda self: started.append(self) or spawn(self))
    result = CliRunner().invoke(main, ["search", "--model", "resnet1800", "--gpus", "all",
                                       "--studies-dir", str(tmp_path)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: unknown model 'resnet1800'")
    assert result.stderr.count("\n") == 1
    assert len(started) == 1 and len(started[0]._procs) == 2  # they had started, before the check
    assert [proc.poll() for proc in started[0]._procs] == [0, 0]  # and are gone, quietly
    assert capfd.readouterr().err == ""
    assert list(tmp_path.iterdir()) == []  # no study made


def test_search_gpus_naming_indices_starts_its_workers_before_counting_the_gpus(
        tmp_path, monkeypatch, capfd):
    # Counting imports torch: 2.6-3.1 s on the H200 host before the workers could start.
    events: list[object] = []
    monkeypatch.setattr(gpus, "visible_gpus", lambda: events.append("counted") or 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    started: list[fleets.Fleet] = []
    spawn = fleets.Fleet.spawn

    def spawned(self: fleets.Fleet) -> None:
        events.append(("spawned", self.gpus))
        started.append(self)
        spawn(self)

    monkeypatch.setattr(fleets.Fleet, "spawn", spawned)
    argv = ["search", "--model", "resnet18", "--backend", "eager", "--batch-sizes", "1,2",
            "--channels-last", "false", "--confirm", "0", "--studies-dir", str(tmp_path)]
    result = CliRunner().invoke(main, [*argv, "--gpus", "1,0", "--name", "listed"])
    assert result.exit_code == 0, result.stderr
    assert events[0] == ("spawned", [1, 0]) and "counted" in events
    assert "one worker per GPU (1, 0)" in result.stderr
    # A GPU that is not there: one line; the workers started for it are gone, quietly.
    events.clear()
    capfd.readouterr()
    result = CliRunner().invoke(main, [*argv, "--gpus", "0,5", "--name", "missing"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == "Error: --gpus: there is no GPU 5; torch sees 2 (0-1)\n"
    assert events[0] == ("spawned", [0, 5])
    assert [proc.poll() for proc in started[-1]._procs] == [0, 0]
    assert capfd.readouterr().err == ""
    assert not (tmp_path / "missing").exists()  # no study made


def test_a_fleets_worker_for_a_gpu_this_host_lacks_waits_without_a_word(monkeypatch, capfd,
                                                                         tmp_path):
    # The parent checks its indices after it starts the workers (above): a worker whose GPU
    # CUDA_VISIBLE_DEVICES does not show makes no runner and exits when the parent cancels.
    from tuner.cli import fleet_worker
    from tuner.launch import runner as runners

    made: list[FakeRunner] = []

    def make_runner(settings: LaunchSettings, shared: object = None) -> FakeRunner:
        gpus.pin(settings.gpu, {"CUDA_VISIBLE_DEVICES": "0"})  # what the real one checks
        made.append(FakeRunner())
        return made[-1]

    monkeypatch.setattr(runners, "make_runner", make_runner)
    plan = fleets.Fleet(fleets.plan_of("lacks", tmp_path, LaunchSettings(60), 0, None, None,
                                       True, "resnet18"), [1]).plan(0, 1)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert fleet_worker.main([plan.to_json()]) == 0
    assert not made and capfd.readouterr().err == ""


def test_a_search_starts_its_first_trials_process_before_its_first_trial(tmp_path,
                                                                         monkeypatch):
    from tuner.domain import workload
    from tuner.launch import runner as runners

    made: list[FakeRunner] = []
    settings: list[LaunchSettings] = []
    monkeypatch.setattr(runners, "make_runner", lambda s, shared=None: settings.append(s) or
                        made.append(FakeRunner()) or made[-1])
    # The checks of the input take seconds (they import torch, torchvision and dynamo): the
    # first trial's process imports beside them, not after.
    validate, started_before = workload.validate, []
    monkeypatch.setattr(workload, "validate",
                        lambda w: started_before.append(len(made[0].spares)) or validate(w))
    result = CliRunner().invoke(main, ["search", "--model", "resnet18", "--device", "cpu",
                                       "--batch-sizes", "8,1", "--backend", "eager",
                                       "--studies-dir", str(tmp_path), "-q"])
    assert result.exit_code == 0, result.output
    assert started_before == [1]
    (prebuild, calls_before), = made[0].spares
    assert calls_before == 0 and prebuild.batch_size == 8 and prebuild.workload.model == "resnet18"
    # A bad input still ends in one line, and the process started for it is closed.
    result = CliRunner().invoke(main, ["search", "--model", "resnet9999", "--device", "cpu",
                                       "--batch-sizes", "8", "--studies-dir", str(tmp_path)])
    assert result.exit_code != 0 and "unknown model 'resnet9999'" in result.output
    assert made[-1].spares and made[-1].closed == 1
    # Pre-started processes, forked from a template: on by default (measured on the H200 and
    # on the CPU box), as asked otherwise.
    assert settings[0].prestart is True
    assert runners.prestart_for(None) and runners.prestart_for(True)
    assert not runners.prestart_for(False)


def test_ctrl_c_stops_every_worker_after_its_trial_in_flight(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = workers.create(tmp_path, "stopped", storage=None)
    monkeypatch.setenv(fake.FAKE_DELAY_ENV, "1.0")
    fleet = fleets.Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=60), quiet=True)
    fleet.start(spec)
    in_flight = [workers.wait_for_trial(spec, proc.pid) for proc in fleet._procs]
    fleet.send_signal(signal.SIGINT)
    fleet.wait()
    summary = fleet.finish()
    assert [e.returncode for e in fleet.exits] == [fleets.EXIT_STOPPED] * 2
    assert summary.stop_reason == "stopped by the user" and summary.stopped
    assert sorted(summary.trials["trial_number"]) == sorted(t.number for t in in_flight)
    assert (summary.trials["status"] == "ok").all()


def test_sigterm_stops_every_worker_and_the_fleet_reads_their_143_as_stopped(tmp_path,
                                                                              monkeypatch):
    # A SIGTERM'd worker exits 143 (128 + SIGTERM), not 130: the fleet still reports "stopped",
    # not a worker error.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = workers.create(tmp_path, "termed", storage=None)
    monkeypatch.setenv(fake.FAKE_DELAY_ENV, "30")
    fleet = fleets.Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=60), quiet=True)
    fleet.start(spec)
    for proc in fleet._procs:
        workers.wait_for_trial(spec, proc.pid)
    fleet.send_signal(signal.SIGTERM)
    fleet.wait()
    summary = fleet.finish()
    assert [e.returncode for e in fleet.exits] == [fleets.EXIT_TERMINATED] * 2 == [143] * 2
    assert summary.stop_reason == "stopped by the user" and summary.stopped
    assert summary.new == 0  # both trials in flight were abandoned, and left no row


def test_a_fleet_stopped_while_its_workers_start_reports_stopped_not_a_worker_error(
        tmp_path, monkeypatch):
    # SIGTERM to `tuner search --gpus` 3.3 s in (the workers starting) said "Error: the worker
    # on GPU 0 stopped with exit code -15 ... (its error is above)": none was above.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = workers.create(tmp_path, "early-stop", storage=None, space=workers.SPACE_SMALL)
    fleet = fleets.Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=60), quiet=True)
    fleet.spawn()
    fleet.send_signal(signal.SIGTERM)  # before the workers' interpreters are up
    fleet.start(spec)
    fleet.wait()
    assert all(e.returncode in (0, -signal.SIGTERM, 143) for e in fleet.exits), fleet.exits
    summary = fleet.finish()
    assert summary.stop_reason == "stopped by the user" and summary.stopped


def test_a_fleet_stopped_before_its_workers_began_is_stopped_though_they_exit_0(tmp_path,
                                                                               monkeypatch):
    # A worker still waiting for the go exits 0 when stopped; the summary said "all 2 workers
    # finished; 0 new trials" for a fleet the user had stopped.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = workers.create(tmp_path, "not-begun", storage=None, space=workers.SPACE_SMALL)
    fleet = fleets.Fleet.of(spec, [0], LaunchSettings(timeout_s=60), quiet=True)
    fleet.run(spec)
    assert [e.returncode for e in fleet.exits] == [0]
    assert fleet.finish().stop_reason == "all 1 workers finished"
    fleet.passed_on.append(signal.SIGINT)
    assert fleet.finish().stopped


def test_a_fleets_worker_killed_by_a_signal_is_named_as_such_not_an_error_above(tmp_path,
                                                                                 monkeypatch):
    # A worker SIGKILLed (the out-of-memory killer) was "stopped with exit code -9 (its error
    # is above)": it wrote none. Its trial is measured again by the other worker.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = workers.create(tmp_path, "oom-killed", storage=None, space=workers.SPACE_SMALL)
    monkeypatch.setenv(fake.FAKE_DELAY_ENV, "1")
    for name, value in workers.FAST_HEARTBEAT.items():
        monkeypatch.setenv(name, value)
    fleet = fleets.Fleet.of(spec, [0, 1], LaunchSettings(timeout_s=60), quiet=True)
    fleet.start(spec)
    workers.wait_for_trial(spec, fleet._procs[1].pid)
    fleet._procs[1].kill()
    fleet.wait()
    with pytest.raises(UserError) as raised:
        fleet.finish()
    assert str(raised.value) == ("the worker on GPU 1 was killed by SIGKILL, leaving no error; "
                                 "the study keeps what was measured")
    workers.assert_every_config_measured_once(spec)


@pytest.mark.parametrize("raised, code", [(KeyboardInterrupt, 130), ("sigterm", 143)])
def test_a_fleets_worker_stopped_while_it_joins_its_study_exits_quietly(
        tmp_path, monkeypatch, capfd, raised, code):
    # Ctrl-C passed on while the worker joined its study printed a traceback and exited -2.
    import os

    from tuner.cli import fleet_worker, measure
    from tuner.launch import runner as runners

    made: list[FakeRunner] = []
    monkeypatch.setattr(runners, "make_runner",
                        lambda settings, shared=None: made.append(FakeRunner()) or made[-1])

    def joining(plan, storage, as_json, runner, stop_cause):
        if raised == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at once
        else:
            raise raised

    monkeypatch.setattr(measure, "run_worker", joining)
    monkeypatch.setattr(sys, "stdin", io.StringIO(fleets.GO))
    got: list[int] = []
    # Ours, in case the worker's is not in place: the test fails rather than pytest dying.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        plan = fleets.Fleet(fleets.plan_of("joins", tmp_path, LaunchSettings(60), 0, None, None,
                                           True, "resnet18"), [0]).plan(0, 0)
        started = time.monotonic()
        try:
            exited: object = fleet_worker.main([plan.to_json()])
        except KeyboardInterrupt:  # caught here: let out, it would stop pytest itself
            exited = "KeyboardInterrupt"
        assert exited == code
        assert time.monotonic() - started < 4 and got == []
        assert signal.getsignal(signal.SIGTERM) is not fleet_worker._terminated  # put back
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert capfd.readouterr().err == ""


def test_search_gpus_from_the_command_line(tmp_path, monkeypatch, capfd):
    events: list[object] = []
    monkeypatch.setattr(gpus, "visible_gpus", lambda: events.append("counted") or 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spawn = fleets.Fleet.spawn
    monkeypatch.setattr(fleets.Fleet, "spawn",
                        lambda self: events.append(("spawned", self.gpus)) or spawn(self))
    result = CliRunner().invoke(main, [
        "search", "--model", "resnet18", "--backend", "eager,inductor",
        "--mode", "default", "--batch-sizes", "1,2", "--gpus", "all", "--json",
        "--inductor-option", "none", "--channels-last", "false",
        "--studies-dir", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert "one worker per GPU (0, 1)" in result.stderr
    assert events[:2] == ["counted", ("spawned", [0, 1])]  # `all` needs the count first
    workers_err = capfd.readouterr().err  # the workers write to this process's stderr
    # Both workers ran and reported; which of them measured which trial is up to the scheduler.
    assert "gpu0 " in workers_err and "gpu1 " in workers_err
    assert workers_err.count(" [") >= 4  # one progress line per measured trial
    assert "stopped: all 2 workers finished; 4 new trials, 4 in the study" in result.stderr
    assert '"pareto"' in result.stdout
    df, meta = files.read(tmp_path / "resnet18-cuda")
    assert df["config_key"].is_unique and len(df) == 4 and meta["workload"]["device"] == "cuda"


def test_search_gpus_start_from_measures_the_studys_configs_and_says_so_once(
        tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(gpus, "visible_gpus", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    faster = {TrialConfig("inductor", bs, "default", True).key: {"latency_ms_p50": 1.0}
              for bs in (1, 2)}
    write_study(tmp_path, "h100", gpu="NVIDIA H100", changes=faster, trial_configs=[
        c for bs in (1, 2) for c in (TrialConfig("eager", bs),
                                     TrialConfig("inductor", bs, "default", True))])
    result = CliRunner().invoke(main, [
        "search", "--model", "resnet18", "--backend", "eager,inductor", "--mode", "default",
        "--dynamic", "false,true", "--batch-sizes", "1,2", "--gpus", "all", "--confirm", "0",
        "--inductor-option", "none", "--channels-last", "false", "--studies-dir", str(tmp_path),
        "--start-from", "h100"])
    assert result.exit_code == 0, result.stderr
    # The fleet's parent says it once; its workers measure what it queued.
    said = result.stderr + capfd.readouterr().err
    assert said.count("--start-from h100 (measured on NVIDIA H100): 2 configs") == 1
    df, _ = files.read(tmp_path / "resnet18-cuda")
    came = {key: value for key, value in zip(df["config_key"], df["started_from"])
            if isinstance(value, str)}
    assert came == dict.fromkeys(faster, "h100")


def test_a_killed_workers_trial_goes_stale_and_is_measured_again(tmp_path):
    spec = workers.create(tmp_path, "killed", storage=None, space=workers.SPACE_SMALL)
    workers.kill_one_worker_and_check_recovery(spec)


def test_a_worker_killed_on_this_host_is_found_by_its_pid_without_waiting_for_the_grace(
        tmp_path):
    spec = workers.create(tmp_path, "killed-here", storage=None, space=workers.SPACE_SMALL)
    workers.kill_one_worker_and_check_recovery(spec, elsewhere=False)


def test_a_result_for_a_trial_another_worker_gave_up_as_dead_is_dropped_not_counted(tmp_path):
    spec = workers.create(tmp_path, "late", storage=None, space=workers.SPACE_SMALL)
    messages, given_up = [], []
    search = Search(spec, FakeRunner(), on_message=messages.append)

    def on_start(number, config, name):
        if not given_up:  # another worker fails this trial as stale while it runs here
            stored = search.fronts.find(number)
            search.claims.storage.set_trial_state_values(
                search.claims.trial_id(number), TrialState.FAIL)
            search.claims.requeue(stored.study, stored.frozen)  # its stale-trial callback
            given_up.append(config.key)

    search.on_start = on_start
    summary = search.run()
    workers.assert_every_config_measured_once(spec)
    assert search.runner.calls.count(given_up[0]) == 2 and summary.new == 4
    assert any("was failed by another worker" in m and "measured again" in m for m in messages)


def test_a_worker_joins_with_the_studys_workload_space_and_protocol(tmp_path):
    spec = workers.create(tmp_path, "joined", storage=None, space=workers.SPACE_SMALL)
    out, err = workers.finish(workers.start(spec, "--json", "--trials", "2"))
    assert '"pareto"' in out and "study joined in" in err
    df, meta = files.read(tmp_path / "joined")
    assert len(df) == 2 and meta["workload"] == spec.workload.to_dict()
    assert meta["space"] == spec.space.to_dict() and meta["protocol"] == spec.protocol.to_dict()


def test_export_only_writes_the_parquet_files_and_measures_nothing(tmp_path):
    spec = workers.create(tmp_path, "exported", storage=None, space=workers.SPACE_SMALL)
    measured = CliRunner().invoke(main, ["worker", "--study", "exported", "--studies-dir",
                                         str(tmp_path), "--trials", "2"])  # in this process
    assert measured.exit_code == 0, measured.stderr
    (tmp_path / "exported" / layout.TRIALS_FILE).unlink()
    workers.finish(workers.start(spec, "--export-only"))
    df, _ = files.read(tmp_path / "exported")
    assert len(df) == 2


def test_joining_a_study_that_does_not_exist_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["worker", "--study", "nope", "--studies-dir",
                                       str(tmp_path)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: no study 'nope'") and result.stderr.count("\n") == 1
    assert not (tmp_path / "nope").exists()  # nothing created


def test_gpus_on_a_machine_without_cuda_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(gpus, "visible_gpus", lambda: 0)
    result = CliRunner().invoke(main, ["search", "--model", "resnet18", "--gpus", "all",
                                       "--studies-dir", str(tmp_path)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == ("Error: --gpus needs CUDA GPUs and torch sees none on this "
                             "machine: drop --gpus to search on the CPU\n")


@pytest.mark.parametrize("text, available, chosen", [
    ("all", 2, [0, 1]), ("1", 2, [1]), ("0, 1,1", 4, [0, 1]), (" ALL ", 1, [0])])
def test_choose_gpus(text, available, chosen):
    assert gpus.choose_gpus(text, available) == chosen


@pytest.mark.parametrize("text, words", [("2", "no GPU 2"), ("a,b", "indices"), ("", "indices")])
def test_choose_gpus_refuses_what_is_not_there(text, words):
    with pytest.raises(UserError, match=words):
        gpus.choose_gpus(text, 2)


def test_listed_gpus_reads_indices_without_counting():
    assert gpus.listed_gpus(" 3,1, 3") == [3, 1] and gpus.listed_gpus("All") is None
    with pytest.raises(UserError, match="indices"):
        gpus.listed_gpus("0,x")


def test_pin_respects_an_existing_cuda_visible_devices():
    assert gpus.pin(1, {}) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert gpus.pin(1, {"CUDA_VISIBLE_DEVICES": "4,6"}) == {"CUDA_VISIBLE_DEVICES": "6"}
    with pytest.raises(UserError, match="shows this process 1 GPU"):
        gpus.pin(1, {"CUDA_VISIBLE_DEVICES": "GPU-abc"})


def test_the_storage_url_reaches_workers_in_their_environment_not_their_argv(tmp_path):
    url = "postgresql://tuner:s3cret-pw@db/tuner"
    spec = workers.create(tmp_path, "envonly", storage=None)
    fleet = fleets.Fleet.of(dataclasses.replace(spec, storage=url), [0], LaunchSettings(timeout_s=60))
    assert not any("s3cret" in arg for arg in fleet.command(0, 0))
    assert fleet.environment()[fleets.STORAGE_ENV] == url
    assert "s3cret" not in repr(fleet.base) + repr(dataclasses.replace(spec, storage=url))


@pytest.mark.parametrize("url, shown", [
    ("postgresql://tuner:s3cret-pw@db:5432/tuner", "postgresql://tuner:***@db:5432/tuner"),
    ("postgresql+psycopg2://tuner:s3cret%40pw@db/tuner",
     "postgresql+psycopg2://tuner:***@db/tuner"),
    ("postgresql://db/tuner?user=tuner&password=s3cret-pw",
     "postgresql://db/tuner?user=tuner&password=***"),
    ("sqlite:////tmp/study.db", "sqlite:////tmp/study.db"),
    ("sqlite:///:memory:", "sqlite:///:memory:")])  # as given, not as SQLAlchemy encodes it
def test_redact_hides_the_password(url, shown):
    assert redact(url) == shown


def test_scrub_masks_a_password_in_any_message():
    url = "postgresql://tuner:s3cret%40pw@db:notaport/tuner?sslpassword=k3y"
    message = (f"could not parse {url}; password s3cret@pw rejected; "
               "connect postgresql://x:other@db failed; sslpassword=k3y")
    clean = scrub(message, url)
    for secret in ("s3cret", "other", "k3y"):
        assert secret not in clean, clean


PARENT = """
import os, subprocess, sys, time
env = {**os.environ, "TUNER_PARENT_PID": str(os.getpid())}
trial = subprocess.Popen(
    [sys.executable, "-c", "import time; from tuner.trial.serve import die_with_parent; "
     "die_with_parent(); print('ready', flush=True); time.sleep(60)"],
    env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
print(trial.pid, trial.stdout.readline().strip(), flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_trial_dies_with_the_search_process_that_started_it():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    pid, ready = parent.stdout.readline().split()
    assert ready == "ready" and not gone(int(pid))
    parent.kill()  # SIGKILL: it cannot clean up after itself
    parent.wait()
    assert wait_until_gone(int(pid), within_s=10)
