"""Noise the host causes: measured on every trial, flagged in `tuner show`, and said at the start
of a search."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest

from tests.support.specs import make_spec
from tests.support.text import flat
from tuner.data.derive import derive
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.render import study as report
from tuner.study.search import Search
from tuner.study.storage import OWNER_ATTR
from tuner.trial.host import OtherProcesses

BURN = "import time\nend = time.time() + 5\nwhile time.time() < end: pass\n"


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` has used, from /proc."""
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat")
def test_cpu_another_process_burns_is_counted_and_our_own_is_not():
    # Each window is checked against what ran in it, so another test worker on the host may
    # come and go meanwhile (a quiet window compared with a busy one failed so under -n 2).
    from tuner.trial import host

    with OtherProcesses() as quiet:
        t0, busy0, own0 = time.perf_counter(), host._cpu_s()[0], time.process_time()
        # This process's own work, not interference: 0.5 s of CPU, however busy the host.
        while time.process_time() < own0 + 0.5 and time.perf_counter() < t0 + 10:
            pass
        elapsed = time.perf_counter() - t0
        busy, own = host._cpu_s()[0] - busy0, time.process_time() - own0
    assert own >= 0.3
    assert quiet.other_cpu_cores * elapsed <= busy - own + 0.1  # ours left out
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        time.sleep(0.3)
        with OtherProcesses() as loud:
            t0, burnt0 = time.perf_counter(), _cpu_of(burner.pid)
            while _cpu_of(burner.pid) < burnt0 + 0.5 and time.perf_counter() < t0 + 4:
                time.sleep(0.05)
            elapsed, burnt = time.perf_counter() - t0, _cpu_of(burner.pid) - burnt0
    finally:
        burner.kill()
        burner.wait()
    assert burnt >= 0.3  # it ran
    assert loud.other_cpu_cores * elapsed >= burnt - 0.1  # and all of it is counted
    assert loud.load_1m is not None


def test_steal_is_counted_apart_from_other_processes(monkeypatch):
    """A VM's cores that the hypervisor gave away (/proc/stat's steal) are steal_cores, not
    other processes' CPU: two seconds of /proc/stat, 1 s busy elsewhere and 3 s stolen."""
    from tuner.trial import host

    stat = iter([(100.0, 10.0), (101.0, 13.0)])
    clock = iter([50.0, 52.0])
    monkeypatch.setattr(host, "_cpu_s", lambda: next(stat))
    monkeypatch.setattr(host, "_own_cpu_s", lambda: 0.0)
    monkeypatch.setattr(host.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(host, "core_loop_ms", lambda: 2.5)
    with OtherProcesses() as measured:
        pass
    assert measured.other_cpu_cores == 0.5 and measured.steal_cores == 1.5
    row = {"host_other_cpu_cores": 0.1, "host_steal_cores": 1.5}
    assert "VM starved 1.5 cores" in report.notes(row)
    assert "VM starved" not in report.notes({**row, "host_steal_cores": 0.0})


def test_the_launching_cores_speed_is_the_loop_timed_as_the_window_opens_and_closes(monkeypatch):
    from tuner.trial import host

    loops = iter([2.0, 5.0])
    monkeypatch.setattr(host, "core_loop_ms", lambda: next(loops))
    with OtherProcesses() as measured:
        assert measured.loop_ms is None  # the closing one is taken after the window
    assert measured.loop_ms == 3.5


def test_the_loop_times_this_threads_core():
    from tuner.trial import host

    quick = host.core_loop_ms()
    assert 0 < quick < 1000
    # Twice the loop takes longer: it times the loop, not a constant.
    old = host.LOOP_N
    try:
        host.LOOP_N = old * 8
        assert host.core_loop_ms() > quick * 2
    finally:
        host.LOOP_N = old


def test_show_flags_a_row_measured_on_a_slow_core(tmp_path):
    """`tuner show` flags a row whose loop ran 1.4x or more as long as on the study's fast cores
    of that machine; the quartile is per machine, so a slower host's rows are not flagged."""
    from tests.support.synthetic import configs, write_study
    from tuner.data import files

    loops = dict(zip([c.label for c in configs(batch_sizes=(1,))], [2.4, 2.5, 2.4, 4.6, None]))
    study = write_study(tmp_path, "s", trial_configs=configs(batch_sizes=(1,)),
                        changes={label: {"host_loop_ms": ms} for label, ms in loops.items()})
    df, _, _ = files.load(study)
    slowdown = dict(zip(df["label"], df["host_core_slowdown"]))
    assert slowdown["inductor:max-autotune"] == pytest.approx(4.6 / 2.4)
    assert slowdown["eager"] == pytest.approx(1.0)
    assert pd.isna(slowdown["cudagraphs"])  # no loop measured (an older row): no figure, no flag
    from click.testing import CliRunner

    from tuner.cli.app import main

    shown = CliRunner().invoke(main, ["show", str(study)]).output
    # a long note: a footnote under the table, its number in the row's notes
    flagged = [line for line in shown.splitlines() if "slow host core:" in line]
    assert len(flagged) == 1
    mark, note = flagged[0].split(" ", 1)
    assert note.startswith("slow host core: a fixed loop took 1.9x as long")
    assert [line.split()[0] for line in shown.splitlines() if line.endswith(mark)] == \
        ["max-autotune"]
    shown_json = json.loads(CliRunner().invoke(main, ["show", str(study), "--json"]).output)
    by_label = {r["label"]: r for r in shown_json["pareto"]}
    assert by_label["inductor:max-autotune"]["host_core_slowdown"] == pytest.approx(4.6 / 2.4)
    assert by_label["inductor:max-autotune"]["host_loop_ms"] == 4.6
    # The report says so below the fronts, naming it: a slow-core row may be off the front.
    assert ("1 of 5 trials were measured on a slow host core (a fixed loop took 1.4x as long "
            "or more as on this machine's fast cores): max-autotune bs=1.") in flat(shown)

    # Another machine's rows are against its own fast cores: 6.0 ms there is not slow.
    rows = pd.concat([df, df.assign(fp_host="slowhost",
                                    host_loop_ms=df["host_loop_ms"] * 2.5)], ignore_index=True)
    again = derive(rows)
    assert list(again["host_core_slowdown"].round(2).fillna(0)) == \
        list(df["host_core_slowdown"].round(2).fillna(0)) * 2


def test_show_flags_a_row_measured_while_the_host_was_busy():
    row = {"host_other_cpu_cores": 1.4, "noisy": False}
    assert "host busy 1.4 cores" in report.notes(row)
    assert "host busy" not in report.notes({**row, "host_other_cpu_cores": 0.1})


def test_a_search_says_when_the_host_is_busy(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 2.0, 1.0))
    messages = []
    Search(make_spec(tmp_path), FakeRunner(), on_message=messages.append).run()
    assert any(m.startswith("the host is busy (load average 3.5") for m in messages)


def test_a_search_says_when_other_processes_run_trials_of_its_study_here(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    spec = make_spec(tmp_path, workload=Workload(model="resnet18", device="cpu"))
    other = Search(spec)
    # another live search process on this host holds a trial (in its batch size's study)
    trial = other.fronts.of(spec.space.batch_sizes[0]).ask()
    trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": os.getpid()})
    messages = []
    Search(spec, FakeRunner(), on_message=messages.append).run()
    assert any("1 trial of this study runs in other processes on this host" in m
               for m in messages)



def test_show_json_gives_the_gpus_own_time_a_call_where_it_was_recorded(tmp_path):
    """TUNER_GPU_TIME=1's figure reaches `tuner show` and its --json; a row without it has
    none."""
    from click.testing import CliRunner

    from tests.support.synthetic import configs, write_study
    from tuner.cli.app import main

    labels = [c.label for c in configs(batch_sizes=(1,))]
    study = write_study(tmp_path, "s", trial_configs=configs(batch_sizes=(1,)),
                        changes={labels[0]: {"gpu_time_ms": 1.7}})
    shown = json.loads(CliRunner().invoke(main, ["show", str(study), "--json"]).output)
    by_label = {r["label"]: r for r in shown["pareto"]}
    assert by_label[labels[0]]["gpu_time_ms"] == 1.7
    assert all(r["gpu_time_ms"] is None for label, r in by_label.items() if label != labels[0])
    # The text says how much of that row's p50 the GPU was busy; other rows say nothing of it.
    text = CliRunner().invoke(main, ["show", str(study)]).output
    said = [line for line in text.splitlines() if "GPU busy" in line]
    p50 = by_label[labels[0]]["latency_ms_p50"]
    assert len(said) == 1 and f"GPU busy 1.70 ms a call ({1.7 / p50:.0%} of its p50)" in said[0]
