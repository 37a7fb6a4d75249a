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

from tuner.data import files
from tuner.errors import UserError
from tuner.spec import layout
from tuner.study.storage import OWNER_ATTR

STUDY = "resnet18-cpu"
# 2 batch sizes x (eager + inductor default x dynamic false/true) = 6 configs.
CONFIGS = 6
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def command(root, delay_s: float) -> list[str]:
    return [sys.executable, "-m", "tests.fake_tuner", "--fake-delay", str(delay_s), "search",
            "--model", "resnet18", "--device", "cpu",
            "--backend", "eager,inductor", "--mode", "default", "--dynamic", "false,true",
            "--batch-sizes", "1,2", "--studies-dir", str(root)]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def finished_trials(root):
    try:
        df, _ = files.read(root / STUDY)
    except UserError:  # not written yet
        return None
    return df


def test_a_killed_search_resumes_without_losing_or_repeating_a_trial(tmp_path):
    with open(tmp_path / "first.log", "wb") as log:
        proc = subprocess.Popen(command(tmp_path, 0.3), stdout=log, stderr=log, env=env(),
                                cwd=tmp_path)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                df = finished_trials(tmp_path)
                if df is not None and len(df) >= 2:
                    break
                time.sleep(0.05)
        finally:
            proc.kill()  # SIGKILL: no handler, no cleanup, like a power cut or the OOM killer
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "first.log").read_text()
    before = finished_trials(tmp_path)
    assert 2 <= len(before) < CONFIGS

    study = optuna.load_study(study_name=STUDY,
                              storage=f"sqlite:///{(tmp_path / STUDY / 'study.db').resolve()}")
    left_running = study.get_trials(states=(TrialState.RUNNING,))

    again = subprocess.run(command(tmp_path, 0.0), capture_output=True, text=True, env=env(),
                           cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stderr
    for trial in left_running:  # killed mid-trial: that trial is noticed and measured again
        if OWNER_ATTR in trial.user_attrs:  # (not yet claimed: nothing to say, still measured)
            assert f"trial {trial.number} " in again.stderr and "measured again" in again.stderr

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


def test_ctrl_c_finishes_the_trial_in_flight_saves_it_and_exits_130(tmp_path):
    proc = subprocess.Popen(command(tmp_path, 0.5), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    started = []
    try:
        for line in proc.stderr:
            if line.startswith("  running "):
                started.append(line.strip())
                if len(started) == 2:  # the second trial is in flight: Ctrl-C once
                    proc.send_signal(signal.SIGINT)
                    break
        stdout, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, rest
    assert "stopping after the current trial" in rest
    assert "stopped: stopped by the user; 2 new trials" in rest

    trials, _ = files.read(tmp_path / STUDY)
    assert len(trials) == 2 and (trials["status"] == "ok").all()
    in_flight = trials.sort_values("trial_number").iloc[-1]
    assert started[1] == f"running {in_flight['label']} bs={in_flight['batch_size']} ..."
    assert (tmp_path / STUDY / layout.PARETO_FILE).exists()
    assert "Pareto-optimal configs" in stdout  # the report of what was measured
    leftovers = [p.name for p in (tmp_path / STUDY).iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
