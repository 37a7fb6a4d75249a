"""benchmarks/trials_per_hour.py: every GPU set measures the same fixed list of configs (the whole
grid, searched until it is exhausted), and the report ends with the rate line.

The script's commands run here through the real CLI and Fleet, the workers as threads (the
fleet's processes themselves are tested in tests/integration/test_fleet.py);
`python benchmarks/trials_per_hour.py --fake-runner` runs them as processes."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import re
import subprocess
import sys
import threading
import types
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import trials_per_hour as tph
from tuner.cli.app import main
from tuner.data import files
from tuner.fake import FakeRunner
from tuner.study import fleet as fleets
from tuner.study.fleet import STORAGE_ENV, WorkerPlan
from tuner.study.search import Search
from tuner.study.storage import join_spec

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
LAST_LINE = re.compile(r"trials per hour: 1 GPU \d+, 2 GPUs \d+, ratio \d+\.\d\d x")


class ThreadWorker:
    """A fleet worker (:class:`tuner.study.fleet.Fleet` starts one per GPU, ``Popen``) as a
    thread of this process: the worker's own search loop on the study, FakeRunner behind it,
    without a process's start-up (seconds of imports each: the test stays fast). It joins the
    study once told GO on its stdin, as a worker does."""

    def __init__(self, command: list[str], env: dict[str, str], **_: object) -> None:
        self.plan, self.env = WorkerPlan.from_json(command[-1]), env
        self.returncode: int | None = None
        self.thread: threading.Thread | None = None
        self.stdin = self  # what the fleet writes GO to
        self._told = b""

    def write(self, data: bytes) -> None:
        self._told += data

    def close(self) -> None:
        if self._told.decode() != fleets.GO:
            self.returncode = 0  # exits, measuring nothing
            return
        plan = self.plan
        spec = join_spec(plan.study, self.env.get(STORAGE_ENV), Path(plan.root),
                         n_trials=plan.n_trials, budget_s=plan.budget_s, seed=plan.seed)
        self.thread = threading.Thread(target=self._run, args=(spec,))
        self.thread.start()

    def _run(self, spec) -> None:
        self.returncode = 1
        Search(spec, FakeRunner()).run()
        self.returncode = 0

    def poll(self) -> int | None:
        return None if self.thread is not None and self.thread.is_alive() else self.returncode

    def wait(self) -> int | None:
        if self.thread is not None:
            self.thread.join()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        pass


@pytest.fixture
def in_process(monkeypatch, fake_cli):
    """The script's search commands (`tuner search --gpus SET`, fake runner) run by the real CLI
    in this process, its fleet's workers as threads."""
    monkeypatch.delenv("TUNER_STORAGE", raising=False)
    monkeypatch.setattr(fleets, "subprocess",
                        types.SimpleNamespace(Popen=ThreadWorker, DEVNULL=subprocess.DEVNULL,
                                              PIPE=subprocess.PIPE))
    commands = []

    def launch(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
        commands.append(cmd)
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                main(cmd[cmd.index("search"):], prog_name="tuner")
            except SystemExit as exc:
                return int(exc.code or 0), err.getvalue()
        return 0, err.getvalue()

    monkeypatch.setattr(tph, "launch", launch)
    return commands


def test_one_gpu_and_two_measure_the_same_configs_and_the_report_ends_with_the_rate(
        tmp_path, in_process):
    keep, out = tmp_path / "keep", tmp_path / "tph.md"
    argv = ["--fake-runner", "--fake-delay", "0", "--gpus", "0", "--gpus", "0,1",
            "--batch-sizes", "1", "--keep", str(keep), "--out", str(out)]
    tph.main(argv)

    assert [cmd[cmd.index("--gpus") + 1] for cmd in in_process] == ["0", "0,1"]
    assert all("--budget" not in cmd and "--trials" not in cmd for cmd in in_process)
    grid = tph.grid("1")
    assert len(grid) == 5
    for study in ("tph-0", "tph-0-1"):
        df, _ = files.read(keep / study)
        assert sorted(df["config_key"]) == sorted(grid)  # the whole list, each config once
    lines = out.read_text().splitlines()
    assert LAST_LINE.fullmatch(lines[-1]), lines[-1]
    assert lines[0].startswith(f"# trials per hour, {datetime.date.today()}, fake runner")
    assert "torch " in lines[0]
    assert "| tuner_overhead_s |" in out.read_text()

    # A set already complete in --keep is read, not run again: the same figures.
    assert tph.main(argv).splitlines()[-1] == lines[-1]
    assert len(in_process) == 2
    # ... unless it measured other work.
    with pytest.raises(SystemExit, match="tph-0.json was run with"):
        tph.main([*argv, "--batch-sizes", "1,2"])
    assert len(in_process) == 2


def rows(keys: list[str], **extra: object) -> pd.DataFrame:
    return pd.DataFrame({"config_key": keys, "wall_s": [1.0] * len(keys), "status": "ok",
                         **extra})


def one_set(gpus: str, df: pd.DataFrame, rate: float) -> dict:
    return {"gpus": gpus, "storage": "sqlite", "workers": len(gpus.split(",")), "rows": df,
            "configs": len(df), "ok": len(df), "wall_s": 10.0, "trials_per_hour": rate,
            "startup_s": 1.0, "search_s": 8.0, "winddown_s": 1.0, "search_per_hour": rate}


def test_a_set_that_misses_or_repeats_a_config_is_refused():
    grid = tph.grid("1,32")
    tph.check_same_work([one_set("0", rows(grid), 1), one_set("0,1", rows(grid[::-1]), 2)], grid)
    with pytest.raises(SystemExit, match=r"--gpus 0,1 .*missing \['eager\|bs=32'\]"):
        tph.check_same_work([one_set("0", rows(grid), 1),
                             one_set("0,1", rows([k for k in grid if k != "eager|bs=32"]), 2)],
                            grid)
    with pytest.raises(SystemExit, match=r"measured twice \['eager\|bs=1'\]"):
        tph.check_same_work([one_set("0", rows(grid + ["eager|bs=1"]), 1)], grid)


def test_the_header_names_the_rows_gpu_and_torch_and_the_pairs_are_per_config():
    grid = tph.grid("1")
    first = one_set("0", rows(grid, fp_gpu_name="NVIDIA H200", fp_torch="2.11.0+cu130",
                              import_s=[7.0] * 5), 3600)
    second = one_set("0,1", rows(grid, fp_gpu_name="NVIDIA H200", fp_torch="2.11.0+cu130",
                                 import_s=[9.0] * 5, wall_s=[1.5] * 5), 6300)
    args = argparse.Namespace(fake_runner=False)
    assert tph.header([first, second], args) == \
        f"# trials per hour, {datetime.date.today()}, NVIDIA H200, torch 2.11.0+cu130"
    assert tph.summary_line([first, second]) == "trials per hour: 1 GPU 3600, 2 GPUs 6300, ratio 1.75 x"
    assert tph.summary_line([first]) == "trials per hour: 1 GPU 3600"  # one GPU: no ratio
    text = "\n".join(tph.section([first, second], args))
    assert "| import_s | 7.000 | 9.000 | 1.29x |" in text
    assert "| eager&#124;bs=1 | 1.00 | 1.50 | 1.50 |" in text
    assert "median wall_s ratio, --gpus 0,1 / --gpus 0, same config: 1.50 (5 configs)" in text
