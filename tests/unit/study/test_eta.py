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


class _Clock:
    """A monotonic clock that moves only as the runner below says: a trial's seconds."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _slow_compiles(clock: _Clock, eager_s: float, compiled_s: float):
    """A FakeRunner whose trials and re-measurements take ``eager_s`` or ``compiled_s`` on
    ``clock``."""
    from tuner.fake import FakeRunner

    class SlowCompiles(FakeRunner):
        def run(self, request, workdir, abort=None, cache_dir=None):
            seconds = compiled_s if request.config.compiled else eager_s
            clock.now += seconds
            result = super().run(request, workdir, abort, cache_dir)
            result.wall_s = seconds  # as the real runner records it
            return result

    return SlowCompiles()


def test_once_a_compile_is_timed_the_eta_is_not_far_below_the_time_left(tmp_path, monkeypatch):
    # make demo on a loaded box said "ETA at least 3 min" after its two eager trials, with two
    # compiles and the finalists' 8 re-measurements, 15 minutes, to go: the re-measurements that
    # follow the search were in no ETA.
    from tests.support.specs import make_space, make_spec
    from tuner.study.search import Search

    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    spec = make_spec(tmp_path, space=make_space(modes=("default", "reduce-overhead"),
                                                dynamic=(False,)), confirm_repeats=2)
    seen: list = []
    Search(spec, _slow_compiles(clock, 1.0, 10.0),
           on_trial=lambda event: seen.append((event, clock.now))).run()
    end = clock.now
    compiled = [i for i, (event, _) in enumerate(seen) if event.config.compiled]
    after = [(event, end - at) for event, at in seen[compiled[0]:] if event.eta_s is not None]
    assert after, seen
    for event, real_s in after:
        assert event.eta_s >= real_s / 2, (event.trial_number, event.eta_s, real_s)
    # before any compile, the ETA is a floor and says so
    assert all(event.eta_at_least for event, _ in seen[:compiled[0]])


def test_the_confirm_eta_falls_as_re_measurements_finish(tmp_path, monkeypatch):
    # On an H100 "ETA at least 3 min" stood for 7 minutes while `tuner confirm` went on: the
    # re-measurements left were priced at the mean of all so far, eager and compiled alike, and
    # a noisy finalist past its fewest counted one more at a time.
    import re

    from tests.support.specs import make_space, make_spec
    from tuner.study.search import Search

    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    spec = make_spec(tmp_path, space=make_space(dynamic=(False,)), confirm_repeats=0)
    Search(spec, _slow_compiles(clock, 1.0, 10.0)).run()
    said: list[tuple[str, float]] = []
    search = Search(spec, _slow_compiles(clock, 1.0, 10.0),
                    on_message=lambda text: said.append((text, clock.now)))
    search.confirm(3)
    end = clock.now
    etas = [(float(m.group(1)), end - at) for text, at in said
            if (m := re.search(r"\| ETA (\d+) s$", text))]
    lines = [text for text, _ in said if text.startswith("[confirm ")]
    assert len(etas) == len(lines) - 1, lines
    for shown, real_s in etas:
        assert real_s / 2 <= shown <= real_s * 2, (shown, real_s, lines)
    assert [shown for shown, _ in etas] == sorted((shown for shown, _ in etas), reverse=True), lines


def test_a_noisy_finalist_past_its_fewest_is_counted_up_to_its_most():
    from tuner.study.confirm_eta import confirm_eta, due
    from tuner.study.repeats import Repeats

    auto = Repeats()
    wide = [1.0, 2.0, 1.5]  # its trial's p50 and two re-measurements': far from narrow
    history = [(EAGER_1, 1.0), (DEFAULT_1, 10.0)]
    # 4 more at most, each priced by its own label's seconds: not "at least" 10 s
    noisy = due(auto, DEFAULT_1, wide, 2, None)
    assert confirm_eta([noisy], history) == (40.0, False)
    assert confirm_eta([due(auto, DEFAULT_1, wide + [1.2], 3, None)], history) == (30.0, False)
    # A finalist short of its fewest: a floor; priced by its own trial before any compile of
    # this run was timed.
    fresh = due(auto, DEFAULT_8, [1.0], 0, 25.0)
    assert confirm_eta([fresh], [(EAGER_1, 1.0)]) == (50.0, True)
    assert confirm_eta([due(auto, DEFAULT_1, [1.0, 1.0, 1.0], 2, None)], history) is None
