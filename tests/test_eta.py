"""The search's ETA: never "0 s" while configs remain, compiles and eager trials apart."""

from __future__ import annotations

import time

import pytest

from tuner.spec.config import TrialConfig
from tuner.study.search import _eta

EAGER_1, EAGER_8 = TrialConfig("eager", 1), TrialConfig("eager", 8)
DEFAULT_1, DEFAULT_8 = (TrialConfig("inductor", bs, "default", False) for bs in (1, 8))
REDUCE_8 = TrialConfig("inductor", 8, "reduce-overhead", False)


def test_no_eta_before_the_first_trial_or_with_nothing_left():
    assert _eta([], [EAGER_8], 0, None, None) is None
    assert _eta([(EAGER_1, 2.0)], [], 1, None, None) is None


def test_each_config_left_is_estimated_from_its_own_label_then_its_kind():
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    # inductor:default from its own trial, eager from eager, reduce-overhead from the compiles.
    eta = _eta(history, [EAGER_8, DEFAULT_8, REDUCE_8], 2, None, None)
    assert eta == pytest.approx(2.0 + 30.0 + 30.0)
    # With no trial of its kind yet, from every trial.
    assert _eta([(EAGER_1, 2.0), (EAGER_8, 4.0)], [DEFAULT_8], 2, None, None) == 3.0


def test_three_compiles_left_after_fast_eager_trials_are_not_underestimated():
    history = [(EAGER_1, 1.0), (EAGER_8, 1.0), (DEFAULT_1, 16.0)]
    left = [DEFAULT_8, REDUCE_8, TrialConfig("inductor", 1, "reduce-overhead", False)]
    assert _eta(history, left, 3, None, None) == 48.0


def test_a_trials_target_caps_the_count_and_a_deadline_the_time():
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    left = [EAGER_8, DEFAULT_8]
    assert _eta(history, left, 2, 3, None) == pytest.approx(16.0)
    assert _eta(history, left, 3, 3, None) is None
    soon = time.monotonic() + 5.0
    assert _eta(history, left, 2, None, soon) <= 5.0


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
