"""The search's ETA: never "0 s" while configs remain, compiles and eager trials apart."""

from __future__ import annotations

import time

import pytest

from tuner.domain.config import TrialConfig
from tuner.study.eta import eta as _eta
from tuner.study.eta import shown_eta as _shown_eta

EAGER_1, EAGER_8 = TrialConfig("eager", 1), TrialConfig("eager", 8)
DEFAULT_1, DEFAULT_8 = (TrialConfig("inductor", bs, "default", False) for bs in (1, 8))
REDUCE_8 = TrialConfig("inductor", 8, "reduce-overhead", False)


def test_no_eta_before_the_first_trial_or_with_nothing_left():
    assert _eta([], [EAGER_8], 0, None) is None
    assert _eta([(EAGER_1, 2.0)], [], 1, None) is None


def test_each_config_left_is_estimated_from_its_own_label_then_its_kind():
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    # inductor:default from its own trial, eager from eager, reduce-overhead from the compiles.
    eta = _eta(history, [EAGER_8, DEFAULT_8, REDUCE_8], 2, None)
    assert eta == pytest.approx(2.0 + 30.0 + 30.0)
    # With no trial of its kind yet, from every trial.
    assert _eta([(EAGER_1, 2.0), (EAGER_8, 4.0)], [DEFAULT_8], 2, None) == 3.0


def test_three_compiles_left_after_fast_eager_trials_are_not_underestimated():
    history = [(EAGER_1, 1.0), (EAGER_8, 1.0), (DEFAULT_1, 16.0)]
    left = [DEFAULT_8, REDUCE_8, TrialConfig("inductor", 1, "reduce-overhead", False)]
    assert _eta(history, left, 3, None) == 48.0


def test_a_trials_target_caps_the_count_and_a_deadline_the_time():
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    left = [EAGER_8, DEFAULT_8]
    assert _eta(history, left, 2, 3) == pytest.approx(16.0)
    assert _eta(history, left, 3, 3) is None
    soon = time.monotonic() + 5.0
    assert _shown_eta(_eta(history, left, 2, None), soon, at_least=False)[0] <= 5.0


def test_workers_sharing_the_study_share_what_is_left():
    # Each of a fleet's workers said the time for all of what was left at its own pace: with
    # 2 GPUs twice as long, with 8 eight times.
    history = [(EAGER_1, 2.0), (DEFAULT_1, 30.0)]
    left = [EAGER_8, DEFAULT_8]
    assert _eta(history, left, 2, None, workers=2) == pytest.approx(16.0)
    assert _eta(history, left, 2, None, workers=1) == pytest.approx(32.0)
    # The search's own seconds between trials (files, sampler) count for each config left: on
    # a busy box they were most of a fake trial's cycle, and the ETA said a third of the time.
    assert _eta(history, left, 2, None, overhead_s=1.5) == pytest.approx(35.0)


def test_a_search_gives_an_eta_while_configs_remain_and_none_at_the_end(tmp_path):
    from tests.support.specs import make_space, make_spec
    from tuner.fake import FakeRunner
    from tuner.study.search import Search

    events = []
    # Only the baselines: all queued at the start, so no config is left unqueued.
    spec = make_spec(tmp_path, space=make_space(backends=("eager", "inductor"), modes=("default",),
                                                 dynamic=(False,)))
    Search(spec, FakeRunner(delay_s=0.01), on_trial=events.append).run()
    assert len(events) == len(spec.space.configs())
    # The baselines are queued first: an ETA from the unqueued configs alone said 0 s here.
    assert all(e.eta_s is not None and e.eta_s > 0 for e in events[:-1])
    assert events[-1].eta_s is None
    # Before any compile was timed, the ETA prices the compiles left at eager's seconds: a
    # floor, said as one (a real CPU search said "ETA 4 s" before 30 s of compiles).
    assert events[0].config.backend == "eager" and events[0].eta_at_least
    assert not any(e.eta_at_least for e in events if any(
        f.config.compiled for f in events[:events.index(e) + 1]))


def test_the_progress_line_says_when_the_eta_is_a_floor():
    from tuner.domain.records import TrialEvent, TrialRequest
    from tuner.domain.workload import Workload
    from tuner.fake import FakeRunner
    from tuner.render.progress import progress_line

    result = FakeRunner().run(TrialRequest(EAGER_1, Workload("resnet18", "cpu")), None)
    event = TrialEvent(number=1, target=3, config=EAGER_1, result=result, best={}, eta_s=4.0)
    assert progress_line(event).endswith("| ETA 4 s")
    floor = TrialEvent(number=1, target=3, config=EAGER_1, result=result, best={}, eta_s=4.0,
                       eta_at_least=True)
    assert progress_line(floor).endswith("| ETA at least 4 s")


def test_the_finalists_re_measurement_gives_an_eta(tmp_path, fake_cli):
    # The search's ETA ends with the search; the re-measurement that follows by default (2-6
    # processes a finalist) printed no ETA at all.
    from tests.support.cli import STUDY, invoke, search_args

    assert invoke(*search_args(tmp_path, "--confirm", "0")).exit_code == 0
    fixed = invoke("confirm", STUDY, "--studies-dir", str(tmp_path), "--repeats", "2")
    lines = [x for x in fixed.stderr.splitlines() if x.startswith("[confirm ")]
    assert len(lines) == 8  # 4 finalists, 2 each
    assert all(" | ETA " in x and "at least" not in x for x in lines[:-1]), lines
    assert " | ETA" not in lines[-1]
    # auto (2 to 6 each, until the interval is narrow): the fewest it may take.
    auto = invoke("confirm", STUDY, "--studies-dir", str(tmp_path), "--redo")
    lines = [x for x in auto.stderr.splitlines() if x.startswith("[confirm ")]
    assert lines and " | ETA at least " in lines[0], lines


def test_an_eta_cut_at_the_budgets_end_is_not_a_floor():
    # Compiles left and none timed make the ETA "at least"; but where the --budget ends first,
    # the search stops then, and "ETA at least 5 s" would say it might go on.
    soon = time.monotonic() + 5.0
    eta, at_least = _shown_eta(600.0, soon, at_least=True)
    assert eta is not None and eta <= 5.0
    assert at_least is False
    assert _shown_eta(3.0, soon, at_least=True) == (3.0, True)
    assert _shown_eta(600.0, None, at_least=True) == (600.0, True)


def owned_trial(study, owner: dict, finished: bool) -> None:
    """A trial of ``study`` that ``owner`` claimed: still running, or failed just now."""
    from optuna.trial import TrialState

    from tuner.study.storage import OWNER_ATTR

    trial = study.ask()
    trial.set_user_attr(OWNER_ATTR, owner)
    if finished:
        study.tell(trial, state=TrialState.FAIL)


def test_the_workers_measuring_a_study_include_one_between_two_trials(tmp_path, monkeypatch):
    import os
    import socket
    import subprocess
    import sys

    from tests.support.specs import make_spec
    from tuner.study import claims as claims_module
    from tuner.study.claims import Claims, pid_namespace
    from tuner.study.storage import open_study

    spec = make_spec(tmp_path)
    fronts = open_study(spec)
    study = fronts.of(spec.space.batch_sizes[0])
    here = {"host": socket.gethostname(), "pid_namespace": pid_namespace()}
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    between = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owned_trial(study, {"host": "other-host", "pid": 7}, finished=False)  # running there
        owned_trial(study, {**here, "pid": between.pid}, finished=True)  # between two trials
        owned_trial(study, {"host": "other-host", "pid": 8}, finished=True)  # can't be checked
        owned_trial(study, {**here, "pid": ended.pid}, finished=True)  # a search killed since
        owned_trial(study, {**here, "pid": os.getpid()}, finished=True)  # this one
        state = Claims(fronts, spec.space, lambda message: None).state()
        assert state.workers == {("other-host", None, 7), ("other-host", None, 8),
                                 (here["host"], here["pid_namespace"], between.pid)}
        monkeypatch.setattr(claims_module, "WORKER_RECENT_S", 0.0)
        state = Claims(fronts, spec.space, lambda message: None).state()
        assert state.workers == {("other-host", None, 7)}  # only the one running now
    finally:
        between.kill()
        between.wait()


def test_a_worker_between_two_trials_shares_what_is_left_in_the_eta(tmp_path):
    # Fleet workers that ended their trials at about the same moment each read the study while
    # the other was between trials (nothing of its running), took itself for alone, and said
    # twice the ETA the other did.
    import socket
    import subprocess
    import sys

    from tests.support.specs import BACKENDS, MODES, make_spec
    from tuner.domain.space import build_space
    from tuner.fake import FakeRunner
    from tuner.study.claims import pid_namespace
    from tuner.study.search import Search
    from tuner.study.storage import open_study

    space = build_space(device="cuda", batch_sizes=[1, 2, 4, 8], backends=["eager"],
                        available_backends=BACKENDS, available_modes=MODES)
    alone: list = []
    Search(make_spec(tmp_path / "alone", space=space), FakeRunner(delay_s=0.3),
           on_trial=alone.append).run()
    spec = make_spec(tmp_path / "shared", space=space)
    fronts = open_study(spec)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owned_trial(fronts.of(8), {"host": socket.gethostname(), "pid": other.pid,
                                   "pid_namespace": pid_namespace()}, finished=True)
        shared: list = []
        Search(spec, FakeRunner(delay_s=0.3), on_trial=shared.append).run()
    finally:
        other.kill()
        other.wait()
    # 3 trials left after the first, 0.3 s each: about 0.9 s alone, half that shared by two.
    assert shared[0].eta_s < 0.75 * alone[0].eta_s, (shared[0].eta_s, alone[0].eta_s)
