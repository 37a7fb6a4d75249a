"""The search's ETA: never "0 s" while configs remain, compiles and eager trials apart."""

from __future__ import annotations

import time

import pytest

from tuner.spec.config import TrialConfig
from tuner.study.search import _eta

EAGER_1, EAGER_8 = TrialConfig("eager", 1), TrialConfig("eager", 8)
DEFAULT_1, DEFAULT_8 = (TrialConfig("inductor", bs, "default", False) for bs in (1, 8))
REDUCE_8 = TrialConfig("inductor", 8, "reduce-overhead", False)


@pytest.mark.parametrize("left_in_space", [0, -1])
def test_no_eta_when_only_queued_configs_may_be_left(left_in_space):
    # The caller counts configs no one has queued: the queued baselines are not in it, so at
    # zero a 33 s compile may still be to run, and "ETA 0 s" would be wrong.
    assert _eta([2.0, 33.0], 2, None, left_in_space, None) is None


def test_each_config_left_is_estimated_from_its_own_label_then_its_kind():
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    # inductor:default from its own trial, eager from eager, reduce-overhead from the compiles.
    eta = _eta([2.0, 30.0], 2, None, 0, None, history=history,
               left=[EAGER_8, DEFAULT_8, REDUCE_8])
    assert eta == pytest.approx(2.0 + 30.0 + 30.0)


def test_three_compiles_left_after_fast_eager_trials_are_not_underestimated():
    history = [(EAGER_1, 1.0), (EAGER_8, 1.0), (DEFAULT_1, 16.0)]
    left = [DEFAULT_8, REDUCE_8, TrialConfig("inductor", 1, "reduce-overhead", False)]
    assert _eta([1.0, 1.0, 16.0], 3, None, 0, None, history=history, left=left) == 48.0


def test_a_trials_target_caps_the_count_and_a_deadline_the_time():
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    left = [EAGER_8, DEFAULT_8]
    assert _eta([], 2, 3, 0, None, history=history, left=left) == pytest.approx(16.0)
    assert _eta([], 3, 3, 0, None, history=history, left=left) is None
    soon = time.monotonic() + 5.0
    assert _eta([], 2, None, 0, soon, history=history, left=left) <= 5.0


def test_the_mean_of_this_runs_trials_without_a_history():
    assert _eta([10.0, 20.0], 2, None, 3, None) == pytest.approx(45.0)
    assert _eta([10.0, 20.0], 2, 3, 3, None) == pytest.approx(15.0)
    assert _eta([], 0, None, 3, None) is None


def test_a_search_gives_an_eta_while_configs_remain_and_none_at_the_end(tmp_path):
    from tests.fakes import FakeRunner
    from tuner.study.search import Search

    from .test_study import make_space, make_spec

    events = []
    # Only the baselines: all queued at the start, so no config is left unqueued.
    spec = make_spec(tmp_path, space=make_space(backends=("eager", "inductor"), modes=("default",),
                                                 dynamic=(False,)))
    Search(spec, FakeRunner(delay_s=0.01), on_trial=events.append).run()
    assert len(events) == len(spec.space.configs())
    # The baselines are queued first: an ETA from the unqueued configs alone said 0 s here.
    assert all(e.eta_s is not None and e.eta_s > 0 for e in events[:-1])
    assert events[-1].eta_s is None
