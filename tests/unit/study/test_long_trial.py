"""A trial that runs long says so now and then (tuner.study.long_trial): a max-autotune compile
takes minutes, and a search silent that long looks hung."""

from __future__ import annotations

import re
import time

from tests.support.specs import make_space, make_spec
from tuner.domain.config import TrialConfig
from tuner.fake import FakeRunner
from tuner.launch.compile_budget import MARKER_FILE
from tuner.study import long_trial
from tuner.study.long_trial import StillRunning
from tuner.study.search import Search

MAX_AUTOTUNE = TrialConfig("inductor", 8, "max-autotune", False)


def test_a_long_trial_says_it_still_runs_ever_less_often(tmp_path, monkeypatch):
    monkeypatch.setattr(long_trial, "FIRST_S", 0.1)
    said: list[str] = []
    spec = make_spec(tmp_path, space=make_space(batch_sizes=(1,), dynamic=(False,)))
    Search(spec, FakeRunner(delay_s=0.5), on_message=said.append).run()
    for name in ("eager", "default"):
        lines = [m for m in said if m.startswith(f"  ... {name} bs=1 still running after ")]
        # 0.1, 0.2 and 0.4 s in; a gap that did not grow would say it 5 times
        assert 1 <= len(lines) <= 4, said


def test_the_line_says_the_trial_compiles_while_its_first_call_runs(tmp_path):
    said: list[str] = []
    with StillRunning(MAX_AUTOTUNE, tmp_path, said.append, first_s=0.05):
        time.sleep(0.08)
        (tmp_path / MARKER_FILE).write_text("{}")
        time.sleep(0.1)
    assert said[0] == "  ... max-autotune bs=8 still running after 0 s"
    assert said[1] == ("  ... max-autotune bs=8 still running after 0 s (in its first "
                       "call, compiling)")
    assert StillRunning(MAX_AUTOTUNE, tmp_path, said.append).line(150.0) == (
        "  ... max-autotune bs=8 still running after 2 min (in its first call, "
        "compiling)")
    count = len(said)
    time.sleep(0.3)
    assert len(said) == count  # nothing once the trial ended


def test_a_short_trial_says_nothing_more(tmp_path):
    said: list[str] = []
    spec = make_spec(tmp_path, space=make_space(batch_sizes=(1,), dynamic=(False,)))
    Search(spec, FakeRunner(delay_s=0.01), on_message=said.append).run()
    assert not [m for m in said if re.search(r"still running after", m)], said
