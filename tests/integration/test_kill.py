"""A search killed or interrupted for real (a subprocess and signals) loses nothing it measured."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from tests.support.cli import invoke
from tests.support.processes import wait_until_gone
from tuner.data import files
from tuner.domain import layout
from tuner.errors import UserError
from tuner.study.storage import INTERRUPTED_ATTR, KEY_ATTR, OWNER_ATTR, RETRY_ATTR

STUDY = "resnet18-cpu"
# 2 batch sizes x (eager + inductor default x dynamic false/true) = 6 configs.
CONFIGS = 6
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def search(root) -> list[str]:
    return ["search", "--model", "resnet18", "--device", "cpu",
            "--backend", "eager,inductor", "--mode", "default", "--dynamic", "false,true",
            "--batch-sizes", "1,2", "--studies-dir", str(root)]


def command(root, delay_s: float) -> list[str]:
    """The search in a process of its own, to be killed or signalled; each fake trial takes
    ``delay_s``."""
    return [sys.executable, "-m", "tuner.fake", "--fake-delay", str(delay_s),
            "--export-every-trial", *search(root)]


def run_here(*args: str):
    """A command that no signal reaches (the one that resumes, or makes a study to confirm),
    run in this process with the fake runner behind it (the fake_cli fixture), its trials
    instant: a process of its own would prove nothing more and import torch again (seconds)."""
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    return result


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def finished_trials(root):
    try:
        df, _ = files.read(root / STUDY)
    except UserError:  # not written yet
        return None
    return df


def stored_trials(url: str) -> list[tuple[str, optuna.trial.FrozenTrial]]:
    """Every trial in the storage, with the name of the Optuna study that holds it."""
    return [(name, t) for name in optuna.get_all_study_names(storage=url)
            for t in optuna.load_study(study_name=name, storage=url).get_trials()]


def test_a_killed_search_resumes_without_losing_or_repeating_a_trial(tmp_path, fake_cli):
    # Each fake trial takes 1 s; the search is killed as its third trial starts (claimed, then
    # announced), so that trial is left running.
    proc = subprocess.Popen(command(tmp_path, 1.0), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    started, seen = 0, []
    try:
        for line in proc.stderr:
            seen.append(line)
            started += line.startswith("  running ")
            if started == 3:
                break
    finally:
        proc.kill()  # SIGKILL: no handler, no cleanup, like a power cut or the OOM killer
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL and started == 3, "".join(seen)
    before = finished_trials(tmp_path)
    assert len(before) == 2

    url = f"sqlite:///{(tmp_path / STUDY / 'study.db').resolve()}"
    left_running = [(name, t) for name, t in stored_trials(url) if t.state == TrialState.RUNNING]
    # The trial in flight, claimed by the killed process: nobody will finish it.
    assert [OWNER_ATTR in t.user_attrs for _, t in left_running] == [True]
    where, dead = left_running[0]
    key = dead.user_attrs[KEY_ATTR]

    resumed = run_here(*search(tmp_path))
    # The new search notices it, fails it and queues its config again, which it then measures.
    assert (f"({key}) was left running by search process {proc.pid}, which died; it will be "
            "measured again" in resumed.stderr)
    trials = stored_trials(url)
    [now] = [t for name, t in trials if name == where and t.number == dead.number]
    assert now.state == TrialState.FAIL and now.user_attrs.get(INTERRUPTED_ATTR) is True
    retries = [t for _, t in trials if t.user_attrs.get(RETRY_ATTR) is not None]
    assert [(t.state, t.user_attrs[KEY_ATTR]) for t in retries] == [(TrialState.COMPLETE, key)]

    after, _ = files.read(tmp_path / STUDY)
    assert len(after) == CONFIGS and after["config_key"].is_unique
    assert (after["status"] == "ok").all()
    rows = after.set_index("config_key")
    for _, old in before.iterrows():
        new = rows.loc[old["config_key"]]
        assert new["trial_number"] == old["trial_number"]
        for column in ("latency_ms_p50", "peak_memory_bytes", "time_to_steady_s", "status"):
            assert new[column] == old[column], column
    front, _ = files.read(tmp_path / STUDY / layout.PARETO_FILE)
    assert set(front["batch_size"]) == {1, 2}
    # the dead trial's folder is removed: one folder a row
    assert sorted(int(p.name) for p in (tmp_path / STUDY / "trials").iterdir()) == \
        sorted(after["trial_number"])


def signal_at(proc: subprocess.Popen, prefix: str, signum: int, nth: int = 1
              ) -> tuple[list[str], str, str]:
    """Send ``signum`` to ``proc`` once its stderr has shown ``nth`` lines starting with
    ``prefix``; then its exit. Returns those lines, its stdout and the rest of its stderr."""
    seen: list[str] = []
    try:
        for line in proc.stderr:
            if line.startswith(prefix):
                seen.append(line.strip())
                if len(seen) == nth:
                    proc.send_signal(signum)
                    break
        stdout, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return seen, stdout or "", rest

def test_ctrl_c_finishes_the_trial_in_flight_saves_it_and_exits_130(tmp_path):
    proc = subprocess.Popen(command(tmp_path, 0.5), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    # the second trial is in flight: Ctrl-C once
    started, stdout, rest = signal_at(proc, "  running ", signal.SIGINT, nth=2)
    assert proc.returncode == 130, rest
    assert "stopping after the current trial" in rest
    # how to go on, and that the finalists (--confirm auto) were not measured again
    assert ("stopped: stopped by the user; the finalists are not measured again yet; the same "
            "command resumes; 2 new trials") in rest

    trials, _ = files.read(tmp_path / STUDY)
    assert len(trials) == 2 and (trials["status"] == "ok").all()
    in_flight = trials.sort_values("trial_number").iloc[-1]
    assert started[1] == f"running {in_flight['label']} bs={in_flight['batch_size']} ..."
    assert (tmp_path / STUDY / layout.PARETO_FILE).exists()
    assert "Pareto-optimal configs" in stdout  # the report of what was measured
    leftovers = [p.name for p in (tmp_path / STUDY).iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_ctrl_c_during_the_last_trial_says_the_same_command_measures_the_finalists(tmp_path,
                                                                                   fake_cli):
    # The loop ended as the space did, so the stop line said only "the finalists are not
    # measured again yet", not what measures them, though the run exited 130.
    proc = subprocess.Popen(command(tmp_path, 0.5), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    _, _, rest = signal_at(proc, "  running ", signal.SIGINT, nth=CONFIGS)
    assert proc.returncode == 130, rest
    assert (f"stopped: every config in the search space is measured; the finalists are not "
            f"measured again yet; the same command resumes; {CONFIGS} new trials") in rest, rest
    resumed = run_here(*search(tmp_path))
    assert "[confirm 1]" in resumed.stderr, resumed.stderr


def test_ctrl_c_while_a_search_confirms_its_finalists_stops_after_the_re_measurement(tmp_path):
    proc = subprocess.Popen(command(tmp_path, 0.2), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    _, _, rest = signal_at(proc, "confirming ", signal.SIGINT)
    assert proc.returncode == 130, rest
    assert "stopping after the current re-measurement (Ctrl-C again to abandon it)" in rest, rest
    assert "confirming the finalists was stopped (the same command resumes it)" in rest, rest


def test_sigterm_abandons_the_trial_in_flight_and_exits_143(tmp_path):
    # 128 + SIGTERM, as a shell reports a process SIGTERM killed; Ctrl-C's is 130 (above).
    proc = subprocess.Popen(command(tmp_path, 30.0), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    _, _, rest = signal_at(proc, "  running ", signal.SIGTERM)
    assert proc.returncode == 143, rest
    assert "stopped by the user (the trial in flight was abandoned)" in rest


def test_sigterm_stops_tuner_confirm_with_143(tmp_path, fake_cli):
    run_here(*search(tmp_path), "--confirm", "0", "-q")  # the study to confirm
    proc = subprocess.Popen([sys.executable, "-m", "tuner.fake", "--fake-delay", "30",
                             "confirm", STUDY, "--studies-dir", str(tmp_path), "--repeats", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env(), cwd=tmp_path)
    _, _, rest = signal_at(proc, "confirming ", signal.SIGTERM)  # its handlers are in place
    assert proc.returncode == 143, rest
    assert "stopped by the user" in rest


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (Linux)."""
    kids: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_fleets_workers_stop_when_its_search_is_killed_outright(tmp_path, fake_cli):
    # SIGKILL (or SIGHUP, whose default kills) to `tuner search --gpus 0,1` left both workers,
    # in their own sessions, measuring on: a rerun beside them found their trials running.
    argv = ["search", "--model", "resnet18", "--backend", "eager,inductor", "--mode", "default",
            "--batch-sizes", "1,2", "--gpus", "0,1", "--inductor-option", "none",
            "--channels-last", "false", "--confirm", "0", "--studies-dir", str(tmp_path)]
    proc = subprocess.Popen([sys.executable, "-m", "tuner.fake", "--fake-delay", "30",
                             *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env(), cwd=tmp_path)
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if sum("  running " in s for s in seen) == 2:  # each worker is in its trial
                break
        workers = children(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert len(workers) == 2, "".join(seen)
    assert all(wait_until_gone(pid, within_s=10) for pid in workers), "".join(seen)
    rest = proc.stderr.read()
    proc.stderr.close()
    # each abandoned its trial as a stopped search does, says why (not the user: its search
    # died) and how to go on
    for gpu in ("gpu0", "gpu1"):
        assert (f"{gpu} stopped: the search that started this worker died (the trial in flight "
                "was abandoned); the same command resumes; 0 new trials") in rest, rest

    run_here(*argv)
    trials, _ = files.read(tmp_path / "resnet18-cuda")
    assert len(trials) == 4 and trials["config_key"].is_unique and (trials["status"] == "ok").all()


def test_a_first_trial_abandoned_by_ctrl_c_twice_resumes_with_eager_first_and_no_folder_left(
        tmp_path, fake_cli):
    # The abandoned eager trial's config was queued again behind the other baselines, so the
    # same command measured inductor before eager; and its folder, trials/1, was left behind.
    proc = subprocess.Popen(command(tmp_path, 30.0), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("  running "):  # the first trial, eager at batch size 1
                proc.send_signal(signal.SIGINT)
                time.sleep(0.5)
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "the trial in flight was abandoned" in rest, seen + [rest]
    assert not (tmp_path / STUDY / "trials").exists()  # no folder of the abandoned trial

    resumed = run_here(*search(tmp_path))
    started = [line.strip() for line in resumed.stderr.splitlines()
               if line.startswith("  running ")]
    # eager at every batch size, then inductor's default at every batch size
    assert started[:4] == ["running eager bs=1 ...", "running eager bs=2 ...",
                           "running default bs=1 ...",
                           "running default bs=2 ..."], resumed.stderr
    trials, _ = files.read(tmp_path / STUDY)
    by_number = trials.sort_values("trial_number")
    assert list(by_number["backend"])[:2] == ["eager", "eager"]
    folders = sorted(int(p.name) for p in (tmp_path / STUDY / "trials").iterdir())
    assert folders == sorted(trials["trial_number"])  # one folder a row, none empty
    assert all(any((tmp_path / STUDY / "trials" / str(n)).iterdir()) for n in folders)
