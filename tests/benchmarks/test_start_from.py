"""The start-from benchmark (benchmarks/start_from.py) on two synthetic studies of one GPU, the
trial order and latencies set by hand, so every count below can be worked out by hand."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from benchmarks import start_from
from benchmarks.replay import Landscape
from tests.support.synthetic import write_study
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status
from tuner.domain.space import SearchSpace
from tuner.study.storage.attrs import STARTED_FROM_ATTR

EAGER1, EAGER16 = TrialConfig("eager", 1), TrialConfig("eager", 16)


def ro(bs: int, cdt: bool = False, fusion: bool = True) -> TrialConfig:
    return TrialConfig("inductor", bs, "reduce-overhead", False,
                       options={"coordinate_descent_tuning": cdt, "epilogue_fusion": fusion})


DEFAULT1 = TrialConfig("inductor", 1, "default", False)
# p50 ms per config: at batch size 1 the best is 1.00 (ro(1, fusion=False)), 1.015 is within 2 %;
# at batch size 16 the best is 4.00, 4.10 is not within 2 %.
P50 = {EAGER1.key: 5.0, EAGER16.key: 20.0, DEFAULT1.key: 2.0, ro(1).key: 1.015,
       ro(1, fusion=False).key: 1.0, ro(16).key: 4.10, ro(16, fusion=False).key: 4.0,
       ro(16, cdt=True).key: 3.0}


def study(root: Path, name: str, order: list[TrialConfig], taken: tuple[TrialConfig, ...] = (),
          fail: dict[str, Status] | None = None) -> Path:
    changes = {c.key: {"latency_ms_p50": P50[c.key], "wall_s": 10.0} for c in order}
    columns = {c.key: {"started_from": "h200-resnet50"} for c in taken}
    return write_study(root, name, gpu="NVIDIA H100 80GB HBM3", trial_configs=order,
                       changes=changes, columns=columns, fail=fail)


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    # With --start-from: baselines, then the other GPU's two finalists, then its sampler.
    with_ = study(tmp_path, "h100-resnet50-from-h200",
                  [EAGER1, EAGER16, ro(1), ro(16, fusion=False), DEFAULT1, ro(16)],
                  taken=(ro(1), ro(16, fusion=False)))
    # Without: the sampler finds the same configs later, and a faster one that fails.
    without = study(tmp_path, "h100-resnet50",
                    [EAGER1, EAGER16, DEFAULT1, ro(16), ro(1), ro(1, fusion=False),
                     ro(16, fusion=False), ro(16, cdt=True)],
                    fail={ro(16, cdt=True).key: Status.OOM})
    return with_, without


def test_trials_until_within_two_percent_of_the_own_and_the_pairs_best(pair):
    with_, without = start_from.measure_pair(*pair)
    assert with_.trials == 6 and with_.started_from == 2
    assert with_.best_ms == {1: 1.015, 16: 4.0}
    # Own best: batch size 1 at trial 3 (ro(1) is its own best), 16 at trial 4.
    assert with_.own == start_from.Reached(4, 40.0)
    # The pair's best at batch size 1 is 1.00 (the other study's): 1.015 is within 2 %.
    assert with_.known == start_from.Reached(4, 40.0)
    # Without: 4.10 is not within 2 % of 4.00, so batch size 16 waits for trial 7; the OOM
    # trial (faster on paper) is no best.
    assert without.best_ms == {1: 1.0, 16: 4.0}
    assert without.own == start_from.Reached(7, 70.0)


def test_a_study_that_never_measured_the_pairs_best_has_not_reached_it(tmp_path):
    with_ = study(tmp_path, "a-from-h200", [EAGER1, EAGER16, DEFAULT1, ro(16)])
    without = study(tmp_path, "a", [EAGER1, EAGER16, ro(1, fusion=False), ro(16, fusion=False)])
    first, _ = start_from.measure_pair(with_, without)
    assert first.own.trials == 4
    assert first.known == start_from.Reached(None, None)


def test_the_report_ends_with_the_issues_line_and_pairs_are_found_by_name(pair, tmp_path):
    assert start_from.discover(tmp_path) == [pair]
    out = tmp_path / "start-from.md"
    assert start_from.main(["--out", str(out), "--landscapes", str(tmp_path), *map(str, pair)]) == 0
    text = out.read_text()
    assert text.splitlines()[-1] == ("start-from: within 2 % of the best after 4 trials with "
                                     "--start-from, 7 without (median over landscapes)")
    assert "| 4 (40) | 4 (40) |" in text and "not reached" not in text


def test_a_pair_whose_taken_configs_still_wait_in_the_queue_does_not_count(pair, tmp_path):
    # The --start-from search stopped at its budget before the configs it took ran: they wait
    # in study.db's queue, so its early "within 2 %" says nothing of --start-from.
    import optuna

    with_, without = pair
    study_db = optuna.create_study(study_name=with_.name, storage=f"sqlite:///{with_}/study.db")
    study_db.enqueue_trial({}, user_attrs={STARTED_FROM_ATTR: "h200-resnet50"})
    study_db.enqueue_trial({})  # a queued config of its own does not matter
    first, _ = start_from.measure_pair(with_, without)
    assert first.queued == 1 and not first.complete
    out = tmp_path / "start-from.md"
    start_from.main(["--out", str(out), "--landscapes", str(tmp_path), str(with_), str(without)])
    text = out.read_text()
    assert "| 2, 1 still queued |" in text
    assert text.splitlines()[-1].startswith("start-from: no pair yet: 1 --start-from study has")


# A grid recorded on two GPUs: every config of GRID_SPACE, its best a config the baselines are
# not (reduce-overhead with coordinate descent and channels_last), the same on both.
GRID_SPACE = SearchSpace(("eager", "inductor"), ("default", "reduce-overhead"), (False,), (1,),
                         channels_last=(False, True),
                         options={"coordinate_descent_tuning": (False, True)})
GRID_BEST = TrialConfig("inductor", 1, "reduce-overhead", False, channels_last=True,
                        options={"coordinate_descent_tuning": True})


def grid(root: Path, gpu: str, best_ms: float) -> Path:
    configs = GRID_SPACE.configs()
    changes = {c.key: {"latency_ms_p50": best_ms if c.key == GRID_BEST.key else 2.0 + i / 10,
                       "wall_s": 10.0} for i, c in enumerate(configs)}
    folder = write_study(root / "studies", f"tiny-bs1-{gpu}", gpu=f"NVIDIA {gpu.upper()}",
                         trial_configs=configs, changes=changes)
    file = root / "landscapes" / f"tiny-bs1-{gpu}.parquet"
    file.parent.mkdir(exist_ok=True)
    file.write_bytes((folder / "trials.parquet").read_bytes())
    return file


def test_a_grid_recorded_on_two_gpus_is_replayed_both_ways_and_counted_in_the_line(tmp_path):
    h100, h200 = grid(tmp_path, "h100", 1.0), grid(tmp_path, "h200", 0.8)
    grid(tmp_path, "other", 1.0).rename(tmp_path / "landscapes" / "another-design-h100.parquet")
    assert start_from.landscape_pairs(tmp_path / "landscapes") == [(h100, h200), (h200, h100)]
    baselines = len(GRID_SPACE.baselines())
    assert GRID_BEST.key not in {c.key for c in GRID_SPACE.baselines()}
    replayed = start_from.replay(h100, h200, range(2))
    # Started from the H200's grid, its best comes right after the baselines.
    assert (replayed.target, replayed.source) == ("tiny-bs1-h100", "tiny-bs1-h200")
    assert replayed.with_trials == baselines + 1 and replayed.taken >= 1
    assert replayed.without_trials > replayed.with_trials
    assert len(Landscape.read(h100).configs) == len(GRID_SPACE.configs())
    back = start_from.replay(h200, h100, range(2))
    out = tmp_path / "start-from.md"
    assert start_from.main(["--out", str(out), "--landscapes", str(tmp_path / "landscapes"),
                            "--studies-dir", str(tmp_path / "studies"), "--seeds", "2"]) == 0
    text = out.read_text()
    assert f"| `tiny-bs1-h100` | `tiny-bs1-h200` | {replayed.taken} | {baselines + 1} |" in text
    assert text.splitlines()[-1] == (
        f"start-from: within 2 % of the best after "
        f"{statistics.median([replayed.with_trials, back.with_trials]):g} trials with "
        f"--start-from, {statistics.median([replayed.without_trials, back.without_trials]):g} "
        "without (median over landscapes)")
