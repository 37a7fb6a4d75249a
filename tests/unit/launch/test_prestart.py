"""Pre-started trial processes (ProcessRunner(prestart=True)): still one process per trial, each
given its own caches and log, failures still classified, and the process waiting for the next
trial never outlives the runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload
from tuner.launch.prestart import alive
from tuner.launch.runner import ProcessRunner
from tuner.trial import contract, protocol
from tuner.trial.prebuild import PrebuildRequest
from tuner.trial.serve import wait_for_turn

QUICK = TrialProtocol(min_calls=5, min_seconds=0.05, warmup_max_calls=20)


def request(model: str, config: TrialConfig) -> TrialRequest:
    return TrialRequest(config, Workload(model=model, device="cpu"), QUICK)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="zombies are seen through /proc")
def test_a_process_that_exited_but_is_not_reaped_yet_is_not_alive():
    """A forked spare whose template was killed is reaped by the host's init, maybe late: the
    runner's close waits for it only until it has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped
        assert not alive(proc.pid)
    finally:
        proc.wait()
    assert alive(os.getpid())


@pytest.mark.slow
def test_prestarted_trials_get_their_own_cache_and_log_and_failures_stay_data(tmp_path):
    runner = ProcessRunner(timeout_s=240, prestart=True)
    try:
        eager = runner.run(request("tests.support.models:tiny_cnn", TrialConfig("eager", 2)),
                           tmp_path / "0")
        cache = tmp_path / "cache-1"
        compiled = runner.run(request("tests.support.models:tiny_cnn",
                                      TrialConfig("inductor", 2, "default", False)),
                              tmp_path / "1", cache_dir=cache)
        spare = runner._spare.proc.pid  # the process waiting for the next trial
        crashed = runner.run(request("tests.support.models:aborts", TrialConfig("eager", 1)),
                             tmp_path / "2")
    finally:
        runner.close()

    for r in (eager, compiled):
        assert r.status is Status.OK and r.correct is True, r.stderr_tail
        assert r.prestarted is True and r.quiet_wait_s >= 0 and r.latency_ms_p50 > 0
    assert compiled.ran_compiled is True
    # The pre-started process compiled into the cache folder of its trial, not its own.
    assert any((cache / "inductor").rglob("*.py"))
    assert crashed.status is Status.CRASH and "SIGABRT" in crashed.message
    assert "about to abort" in crashed.stderr_tail  # the log of the process that ran it
    assert all((tmp_path / n / "trial.log").exists() for n in "012")
    assert not alive(spare)  # it ran the crashed trial and is gone: one process per trial
    assert runner._spare is None  # closed: nothing left waiting
    assert runner._template.proc.poll() is not None  # and no template left forking


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[1])


@pytest.mark.slow
def test_trial_processes_are_forked_from_a_template_that_imported_once(tmp_path):
    runner = ProcessRunner(timeout_s=240, prestart=True)
    try:
        first = runner.run(request("tests.support.models:tiny_cnn", TrialConfig("eager", 2)),
                           tmp_path / "0")
        waiting = runner._spare.proc.pid  # forked while the first trial ran
        template = runner._template.proc.pid
        assert parent_of(waiting) == template and alive(template)
        second = runner.run(request("tests.support.models:tiny_cnn", TrialConfig("eager", 2)),
                            tmp_path / "1")
    finally:
        runner.close()
    for r in (first, second):
        assert r.status is Status.OK and r.prestarted is True, r.stderr_tail
        # The next process was let build when this trial's first call began, and was ready
        # before the wait gave up on it.
        assert r.quiet_wait_s < contract.QUIET_MAX_WAIT_S
    assert second.prebuilt is True and second.import_s < 0.5  # nothing left to import
    assert not alive(waiting) and not alive(template)


@pytest.mark.slow
def test_a_factory_module_that_starts_cuda_when_imported_gets_fresh_processes(tmp_path, capfd):
    runner = ProcessRunner(timeout_s=240, prestart=True)
    model = "tests.support.starts_cuda_at_import:tiny_cnn"
    try:
        results = [runner.run(request(model, TrialConfig("eager", 2)), tmp_path / str(n))
                   for n in range(2)]
        assert runner._template.proc.poll() == 3  # it refused to fork anything
        assert parent_of(runner._spare.proc.pid) == os.getpid()  # a fresh process instead
    finally:
        runner.close()
    for r in results:
        assert r.status is Status.OK and r.prestarted is True, r.stderr_tail
    err = capfd.readouterr().err
    assert err.count("trial processes now start fresh") == 1, err  # said once
    assert "importing tests.support.starts_cuda_at_import started CUDA" in err


@pytest.mark.slow
def test_a_prestarted_process_that_died_is_replaced_and_deadlines_still_hold(tmp_path):
    runner = ProcessRunner(timeout_s=20, prestart=True)
    try:
        first = runner.run(request("tests.support.models:tiny_cnn", TrialConfig("eager", 1)),
                           tmp_path / "0")
        os.killpg(runner._spare.proc.pid, signal.SIGKILL)  # dies while waiting for its trial
        runner._spare.proc.wait()
        # The template has imported: the replacement is forked in milliseconds, so a deadline
        # of seconds holds it as one of minutes would, without the test waiting for one.
        runner.timeout_s = 3
        late = runner.run(request("tests.support.models:sleeps", TrialConfig("eager", 1)),
                          tmp_path / "1")
        waiting = runner._spare.proc
    finally:
        runner.close()
    assert first.status is Status.OK, first.stderr_tail
    assert late.status is Status.TIMEOUT and late.prestarted is None  # killed: no record
    assert waiting.poll() is not None  # close() ended the process waiting for a next trial


def test_a_trial_waits_for_the_next_process_to_finish_importing(tmp_path, monkeypatch):
    ready = tmp_path / "ready"
    monkeypatch.setenv(contract.QUIET_FILE_ENV, str(ready))
    threading.Timer(0.3, ready.touch).start()
    waited = protocol.wait_until_quiet()
    assert ready.exists() and waited >= 0.25


def test_without_a_next_process_a_trial_does_not_wait(monkeypatch):
    monkeypatch.delenv(contract.QUIET_FILE_ENV, raising=False)
    assert protocol.wait_until_quiet() is None


def test_a_waiting_worker_that_gets_no_job_exits_quietly(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tuner.trial", "--wait", str(tmp_path / "r")],
                          input="", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and (tmp_path / "r").exists()


def test_a_waiting_process_builds_once_the_trial_before_it_compiles_or_its_job_comes(tmp_path):
    import subprocess
    import sys
    import time

    build = tmp_path / "build"
    threading.Timer(0.3, build.touch).start()
    t = time.perf_counter()
    quiet, _ = os.pipe()  # no job comes
    wait_for_turn(build, quiet)
    assert build.exists() and time.perf_counter() - t >= 0.25
    # Its job came first (a trial that failed before its first call): it builds at once.
    code = ("import sys, pathlib; from tuner.trial.serve import wait_for_turn; "
            "wait_for_turn(pathlib.Path(sys.argv[1])); print('built')")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "never")],
                          input='{"request": "..."}\n', capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "built", proc.stderr


def test_a_trial_lets_the_next_process_build_when_it_starts_compiling(tmp_path, monkeypatch):
    build = tmp_path / "build"
    monkeypatch.setenv(contract.BUILD_FILE_ENV, str(build))
    protocol.let_next_build()
    assert build.exists()


def test_the_runner_holds_the_next_build_until_the_trial_beside_it_compiles(tmp_path, monkeypatch):
    made = []

    class Stub:
        def __init__(self, prebuild, build_now):
            self.prebuild, self.build_now, self.given = prebuild, build_now, None
            self.ready = self.build = tmp_path / f"{len(made)}" / "build"
            self.proc = subprocess_like()

        def started(self, timeout_s):
            return True

        def give(self, request_path, result_path, env):
            self.given = env

    def subprocess_like():
        return type("P", (), {"poll": lambda self: None})()

    runner = ProcessRunner(timeout_s=10, prestart=True)
    monkeypatch.setattr(runner, "_new_spare", lambda workload, prebuild=None, build_now=True:
                        made.append(Stub(prebuild, build_now)) or made[-1])
    first = request("tests.support.models:tiny_cnn", TrialConfig("eager", 2))
    runner.start_spare(PrebuildRequest(first.workload, 2))
    trial = runner._hand_over(first, tmp_path / "req", tmp_path / "res", {})
    assert trial is made[0] and made[0].build_now  # no trial runs beside the first: at once
    assert made[1].prebuild is not None and made[1].build_now is False
    assert trial.given[contract.BUILD_FILE_ENV] == str(made[1].build)


def test_tuner_template_0_turns_the_template_off(monkeypatch):
    monkeypatch.setenv(contract.TEMPLATE_ENV, "0")
    assert ProcessRunner(timeout_s=10, prestart=True).use_template is False
    monkeypatch.delenv(contract.TEMPLATE_ENV)
    assert ProcessRunner(timeout_s=10, prestart=True).use_template is True
