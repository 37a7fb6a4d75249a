"""A max-autotune mode is tried once its compile is known to fit the budget: its baselines after
every other, one probe per mode first, the mode skipped at every batch size where the probe ran
past the budget, decided from the stored rows (resume, workers). Fake runner, milliseconds."""

from __future__ import annotations

import optuna
import pytest

from tests.support.specs import BACKENDS, MODES, make_spec
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialProtocol
from tuner.domain.space import build_space
from tuner.fake import FakeRunner
from tuner.study import probing
from tuner.study.search import Search
from tuner.study.storage import opening

MA, MANC, RO = "max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead"
# FakeRunner.COMPILE_S: reduce-overhead 17 s, max-autotune 90 s, max-autotune-no-cudagraphs 60 s
# cold; default 15 s.
FIVE_MINUTES = TrialProtocol(compile_timeout_s=300.0)  # --compile-timeout's default
# 3 batch sizes x (eager + inductor 3 modes x dynamic false, true) = 21 configs.
SPACE = build_space(device="cuda", batch_sizes=[1, 8, 32], backends=["eager", "inductor"],
                    modes=[MA, RO, MANC], dynamic=[False, True],
                    available_backends=BACKENDS, available_modes=MODES)

# 2 batch sizes x (eager + inductor 2 modes x dynamic false, true) = 10 configs.
FLEET_SPACE = build_space(device="cuda", batch_sizes=[1, 8], backends=["eager", "inductor"],
                          modes=["default", MA], dynamic=[False, True],
                          available_backends=BACKENDS, available_modes=MODES)


def inductor(bs: int, mode: str, dynamic: bool = False) -> str:
    return TrialConfig("inductor", bs, mode, dynamic).key


CHEAP = [TrialConfig("eager", bs).key for bs in (1, 8, 32)] + \
    [inductor(bs, RO) for bs in (1, 8, 32)]
PROBES = [inductor(1, MA), inductor(1, MANC)]
SLOW_PROBE = {"inductor:max-autotune": Status.COMPILE_TIMEOUT}  # as past the budget, at any size


def search(tmp_path, runner=None, protocol=FIVE_MINUTES, space=SPACE, **kwargs):
    said: list[str] = []
    found = Search(make_spec(tmp_path, space=space, protocol=protocol, **kwargs),
                   runner or FakeRunner(), on_message=said.append)
    return found, said


def of_mode(calls: list[str], mode: str) -> list[str]:
    return [key for key in calls if f"|{mode}|" in key]


def test_max_autotune_baselines_come_after_every_other_one_probe_per_mode_first(tmp_path):
    # max-autotune listed first, and still last: cheap results first. Each mode is probed at
    # the smallest batch size; once both compiled within the budget, their other baselines.
    s, _ = search(tmp_path, n_trials=12)
    s.run()
    rest = [inductor(bs, mode) for mode in (MA, MANC) for bs in (8, 32)]
    assert s.runner.calls == CHEAP + PROBES + rest


def test_without_a_compile_budget_the_max_autotune_baselines_come_last_unprobed(tmp_path):
    s, _ = search(tmp_path, protocol=TrialProtocol(), n_trials=12)
    s.run()
    rest = [inductor(bs, mode) for mode in (MA, MANC) for bs in (1, 8, 32)]
    assert s.runner.calls == CHEAP + rest


def test_a_probe_past_the_budget_skips_its_mode_at_the_other_batch_sizes(tmp_path):
    s, said = search(tmp_path, FakeRunner(fail=SLOW_PROBE))
    summary = s.run()
    assert of_mode(s.runner.calls, MA) == [inductor(1, MA)]  # the probe alone ran
    assert sorted(of_mode(s.runner.calls, MANC)) == sorted(  # its probe fit: searched
        c.key for c in SPACE.configs() if c.mode == MANC)
    rows = summary.trials.set_index("config_key")
    elsewhere = rows[(rows["mode"] == MA) & (rows["batch_size"] != 1)]
    assert len(elsewhere) == 4 and (elsewhere["status"] == "compile_timeout").all()
    assert elsewhere["message"].str.startswith(
        "not run: max-autotune's compile at batch size 1 did not fit the 5-minute compile "
        "budget (trial ").all()
    assert rows.loc[inductor(1, MA, True), "message"].startswith("not run: trial ")  # as before
    probe = int(rows.loc[inductor(1, MA), "trial_number"])
    line = (f"max-autotune's compile at batch size 1 did not fit the 5-minute compile budget "
            f"(trial {probe}): it is skipped at batch sizes 8 and 32 too (4 configs not run)")
    assert [m for m in said if "did not fit" in m] == [line]
    assert summary.skipped == 5 and summary.stop_reason.startswith("every config")


def test_a_probe_moves_to_the_next_batch_size_where_the_model_fails_at_the_smallest(tmp_path):
    s, _ = search(tmp_path, FakeRunner(fail={TrialConfig("eager", 1).key: Status.OOM}),
                  n_trials=9)
    s.run()
    # eager alone at batch size 1, then the probes at 8, then max-autotune's other baseline
    assert s.runner.calls == [TrialConfig("eager", bs).key for bs in (1, 8, 32)] + \
        [inductor(bs, RO) for bs in (8, 32)] + \
        [inductor(8, MA), inductor(8, MANC), inductor(32, MA), inductor(32, MANC)]


def test_a_resume_keeps_a_probe_s_verdict_from_the_stored_rows(tmp_path, monkeypatch):
    # Stopped right after the probe ran past the budget, before the rows of the other batch
    # sizes were written (as if killed there). The resume reads the verdict from the probe's
    # row: max-autotune would fit now (90 s), and is not tried again.
    first, _ = search(tmp_path, FakeRunner(fail=SLOW_PROBE))
    monkeypatch.setattr(probing, "skip_elsewhere", lambda *args: 0)
    first.on_trial = lambda event: event.config.key == inductor(1, MA) and \
        first.stop_after_trial.set()
    first.run()
    assert of_mode(first.runner.calls, MA) == [inductor(1, MA)]
    monkeypatch.undo()

    resumed, said = search(tmp_path, n_trials=12)
    summary = resumed.run()
    assert len(resumed.runner.calls) == 5 and of_mode(resumed.runner.calls, MA) == []
    rows = summary.trials
    assert rows[rows["mode"] == MA]["message"].str.contains("did not fit the 5-minute").sum() == 4
    assert sum("did not fit" in m for m in said) == 1


def test_a_resume_searches_a_mode_whose_probe_fit(tmp_path, monkeypatch):
    # Stopped right after both probes fit, before their modes' other baselines were queued.
    first, _ = search(tmp_path)
    monkeypatch.setattr(probing, "queue_first", lambda *args: None)
    first.on_trial = lambda event: event.config.key == inductor(1, MANC) and \
        first.stop_after_trial.set()
    first.run()
    assert first.runner.calls[-2:] == PROBES
    monkeypatch.undo()

    # Resumed, max-autotune's compile runs past the budget at batch size 8 (as it may at a
    # larger batch): its configs there are skipped, and no others. Its probe fit, so it is
    # still tried at 32, on the next resume too.
    resumed, said = search(tmp_path, FakeRunner(fail=SLOW_PROBE), n_trials=9)
    resumed.run()
    assert resumed.runner.calls == [inductor(8, MA)]
    again, said_again = search(tmp_path, n_trials=12)
    again.run()
    assert again.runner.calls == [inductor(32, MA), inductor(8, MANC), inductor(32, MANC)]
    assert not [m for m in said + said_again if "did not fit" in m]


class ProposesMaxAutotune(optuna.samplers.RandomSampler):
    """Proposes inductor in max-autotune wherever it may, as a sampler does at times."""

    def sample_independent(self, study, trial, param_name, param_distribution):
        wanted = {"backend": "inductor", "mode": MA}.get(param_name)
        if wanted in getattr(param_distribution, "choices", ()):
            return wanted
        return super().sample_independent(study, trial, param_name, param_distribution)


@pytest.mark.parametrize("fits", [False, True], ids=["past the budget", "within it"])
def test_other_workers_wait_for_a_probe_running_elsewhere(tmp_path, monkeypatch, fits):
    # While this worker runs max-autotune's probe, another measures what is left of the other
    # modes and then waits: no config of a mode whose probe has no result yet runs, however
    # often its sampler proposes one.
    monkeypatch.setattr(opening, "make_sampler",
                        lambda kind, seed: ProposesMaxAutotune(seed=seed))
    class OtherWorkerMeanwhile(FakeRunner):
        other: Search | None = None

        def run(self, request, workdir, abort=None, cache_dir=None):
            if request.config.key == inductor(1, MA):
                other, said = search(tmp_path, space=FLEET_SPACE)
                other.on_message = lambda text: said.append(text) or (
                    text.startswith("waiting for") and other.stop_after_trial.set())
                other.run()
                self.other = other
                assert said[-1].startswith("waiting for 1 trial other workers are running")
            return super().run(request, workdir, abort, cache_dir=cache_dir)

    runner = OtherWorkerMeanwhile(fail={} if fits else SLOW_PROBE)
    s, _ = search(tmp_path, runner, space=FLEET_SPACE)
    summary = s.run()
    assert runner.other is not None
    assert of_mode(runner.other.runner.calls, MA) == []
    assert runner.other.runner.calls  # it measured the other configs meanwhile
    assert len(of_mode(runner.calls, MA)) == (4 if fits else 1)
    assert len(summary.trials) == len(FLEET_SPACE.configs())
