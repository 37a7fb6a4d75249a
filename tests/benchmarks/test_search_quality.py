"""The replay runner (benchmarks/replay.py) and the search-quality benchmark
(benchmarks/search_quality.py), on a tiny landscape written at test time: FakeRunner's records
with latencies and wall times set per config, so every figure below can be worked out by hand."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from benchmarks import search_quality
from benchmarks.replay import Landscape, LandscapeError, ReplayRunner
from benchmarks.search_quality import Outcome, Reached, near_best, reached, search_order
from tests.support.synthetic import write_study
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.space import SearchSpace
from tuner.launch import compile_budget
from tuner.study.search import Search
from tuner.study.spec import StudySpec

SPACE = SearchSpace(("eager", "inductor"), ("default", "reduce-overhead"), (False,), (1,),
                    channels_last=(False, True), options={"coordinate_descent_tuning": (False, True)})
CONFIGS = SPACE.configs()  # 2 eager + 2 modes x 2 memory formats x 2 option values = 10


def inductor(mode: str, channels_last: bool, cdt: bool) -> TrialConfig:
    return TrialConfig("inductor", 1, mode, False, channels_last=channels_last,
                       options={"coordinate_descent_tuning": cdt})


EAGER = TrialConfig("eager", 1, channels_last=False)
BEST = inductor("reduce-overhead", True, True)  # 1.000 ms
NEAR = inductor("reduce-overhead", False, True)  # 1.015 ms: within 2 %
OUTSIDE = inductor("reduce-overhead", True, False)  # 1.030 ms: not within 2 %
WRONG = inductor("default", True, True)  # 0.5 ms, but its output did not match eager
FAILED = inductor("default", False, True)  # out of memory
# Every config's recorded wall time: 10 s, 20 s, ..., 100 s in the grid's order (550 s in all).
WALL_S = {c.key: 10.0 * (i + 1) for i, c in enumerate(CONFIGS)}
LATENCY_MS = {BEST.key: 1.0, NEAR.key: 1.015, OUTSIDE.key: 1.03, WRONG.key: 0.5}


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    """The tiny landscape's trials.parquet (every config of SPACE measured once)."""
    root = tmp_path_factory.mktemp("landscapes")
    changes = {c.key: {"wall_s": WALL_S[c.key], "latency_ms_p50": LATENCY_MS.get(c.key, 2.0)}
               for c in CONFIGS}
    changes[WRONG.key]["correct"] = False
    changes[BEST.key].update(stream_ms_p50=0.75, compile_s_cold=21.5,
                             vram_bytes_steady_reserved=3_000_000_000)
    changes[FAILED.key] = {"wall_s": WALL_S[FAILED.key]}
    return write_study(root, "tiny-grid", trial_configs=CONFIGS, changes=changes,
                       fail={FAILED.key: Status.OOM}) / "trials.parquet"


@pytest.fixture(scope="module")
def landscape(grid) -> Landscape:
    return Landscape.read(grid)


def test_the_replay_runner_answers_with_the_recorded_figures_and_wall_time_without_waiting(
        landscape, tmp_path):
    runner = ReplayRunner(landscape)
    started = time.perf_counter()
    result = runner.run(TrialRequest(BEST, landscape.workload), tmp_path)
    assert time.perf_counter() - started < 1.0  # 30 s recorded, none of it slept
    assert result.status is Status.OK
    assert result.latency_ms_p50 == 1.0 and result.stream_ms_p50 == 0.75
    assert result.compile_s_cold == 21.5
    assert result.vram_bytes_steady_reserved == 3_000_000_000
    assert result.wall_s == WALL_S[BEST.key]
    assert result.fingerprint["gpu_name"] == "NVIDIA H200"
    failed = runner.run(TrialRequest(FAILED, landscape.workload), tmp_path)
    assert (failed.status, failed.message, failed.wall_s) == (Status.OOM, "fake oom",
                                                              WALL_S[FAILED.key])
    assert runner.calls == [BEST.key, FAILED.key]


def test_a_recorded_compile_past_the_requests_budget_is_answered_as_the_runner_would(
        landscape, tmp_path):
    runner = ReplayRunner(landscape)
    kept = runner.run(TrialRequest(BEST, landscape.workload, TrialProtocol(
        compile_timeout_s=21.5)), tmp_path)
    assert kept.status is Status.OK and kept.wall_s == WALL_S[BEST.key]
    # 21.5 s recorded for the first call; a 20 s budget kills it at 20 s.
    killed = runner.run(TrialRequest(BEST, landscape.workload, TrialProtocol(
        compile_timeout_s=20.0)), tmp_path)
    assert killed.status is Status.COMPILE_TIMEOUT
    assert killed.message == compile_budget.message(20.0, 20.0)
    assert killed.latency_ms_p50 is None and killed.compile_s_cold is None
    before = [kept.import_s, kept.build_s, kept.eager_reference_s]
    assert killed.wall_s == pytest.approx(sum(v for v in before if v is not None) + 20.0)
    assert killed.fingerprint["gpu_name"] == "NVIDIA H200"


def test_a_config_missing_from_the_landscape_is_an_error_naming_it(landscape, tmp_path):
    other = inductor("max-autotune", False, True)
    with pytest.raises(LandscapeError, match=re.escape(other.key)):
        ReplayRunner(landscape).run(TrialRequest(other, landscape.workload), tmp_path)


def test_a_file_that_is_not_a_whole_grid_is_refused_naming_what_is_missing(tmp_path):
    path = write_study(tmp_path, "gappy", trial_configs=[c for c in CONFIGS if c != NEAR])
    with pytest.raises(LandscapeError, match=re.escape(f"config {NEAR.key} missing")):
        Landscape.read(path)


def test_the_search_space_is_the_grid_with_the_recorded_first_values_first(landscape):
    space = landscape.space()
    assert {c.key for c in space.configs()} == {c.key for c in CONFIGS}
    assert space.baselines() == SPACE.baselines()


def test_a_search_over_the_replayed_grid_measures_every_config_exactly_once(landscape, tmp_path):
    runner = ReplayRunner(landscape)
    spec = StudySpec(name="replay", workload=landscape.workload, space=landscape.space(),
                     root=tmp_path)
    summary = Search(spec, runner).run()
    assert summary.stop_reason == "every config in the search space is measured"
    assert sorted(runner.calls) == sorted(c.key for c in CONFIGS)  # each once, none twice


def test_trials_and_gpu_time_until_within_2_percent_of_the_best_in_a_fixed_order(landscape):
    # eager 10 s; WRONG and FAILED are faster or cheaper but do not count; OUTSIDE is 3 % off;
    # NEAR (1.5 % off) is the 5th trial: 10 + wall of WRONG, FAILED, OUTSIDE, NEAR.
    order = [EAGER.key, WRONG.key, FAILED.key, OUTSIDE.key, NEAR.key, BEST.key]
    spent = sum(WALL_S[k] for k in order[:5])
    assert near_best(landscape) == {1: frozenset({BEST.key, NEAR.key})}
    assert reached(landscape, order) == Reached(5, spent, spent / 550.0)
    assert reached(landscape, [BEST.key]) == Reached(1, WALL_S[BEST.key],
                                                     WALL_S[BEST.key] / 550.0)
    with pytest.raises(ValueError, match="never came within 2 %"):
        reached(landscape, order[:4])


def test_a_replayed_search_stops_at_the_first_config_within_2_percent(landscape, tmp_path):
    order = search_order(landscape, None, seed=0, root=tmp_path)
    near = {BEST.key, NEAR.key}
    assert order[-1] in near and not near & set(order[:-1])
    assert order[:2] == [EAGER.key, SPACE.baselines()[1].key]  # the baselines count as trials
    assert reached(landscape, order).trials == len(order)


def test_the_summary_line_is_the_median_over_seeds_for_each_sampler():
    def outcome(sampler, seed, trials, fraction):
        return Outcome(sampler, seed, Reached(trials, 0.0, fraction), 0.1)

    outcomes = [outcome(None, 0, 4, 0.1), outcome(None, 1, 9, 0.3), outcome(None, 2, 6, 0.2),
                outcome("random", 0, 5, 0.2), outcome("random", 1, 10, 0.5),
                outcome("random", 2, 8, 0.4)]
    assert search_quality.summary_line(outcomes) == (
        "search quality: within 2 % of the grid's best after 6 trials (median of 3 seeds) = "
        "0.20 of the grid's GPU time; random: 8 trials")
    assert search_quality.summary_line(outcomes, "tiny-grid") == (
        "search quality on tiny-grid: within 2 % of the grid's best after 6 trials (median of "
        "3 seeds) = 0.20 of the grid's GPU time; random: 8 trials")


def test_the_benchmark_writes_a_table_per_landscape_ending_with_the_summary_line(grid, tmp_path,
                                                                                 capsys):
    out = tmp_path / "search-quality.md"
    assert search_quality.main([str(grid), "--seeds", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert "## tiny-grid" in text and "NVIDIA H200, torch 2.11.0" in text
    assert re.search(r"^\| 0 \| \d+ \| 0\.\d{3} \| \d+ \| 0\.\d{3} \|$", text, re.M)
    assert re.search(r"^search quality on tiny-grid: within 2 % of the grid's best after \d+ "
                     r"trials \(median of 1 seeds\) = \d\.\d\d of the grid's GPU time; "
                     r"random: \d+ trials$", text, re.M)
    last = text.rstrip().splitlines()[-1]
    assert re.fullmatch(r"search quality: within 2 % of the grid's best after \d+ trials "
                        r"\(median of 1 seeds\) = \d\.\d\d of the grid's GPU time; "
                        r"random: \d+ trials", last)
    assert capsys.readouterr().out.strip() == last


def test_a_landscape_that_cannot_be_read_is_a_one_line_error(tmp_path, capsys):
    assert search_quality.main([str(tmp_path / "none.parquet"), "--out",
                                str(tmp_path / "x.md")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "none.parquet: no such file" in err
    assert len(err.strip().splitlines()) == 1


def test_compare_runs_more_samplers_over_the_same_seeds_in_one_table(grid, tmp_path):
    out = tmp_path / "search-quality.md"
    assert search_quality.main([str(grid), "--seeds", "2", "--compare", "nsga2,random",
                                "--out", str(out)]) == 0
    text = out.read_text()
    rows = re.findall(r"^\| (tpe \(default\)|random|nsga2) \| \d+(?:\.5)? \| 0\.\d{3} \| "
                      r"0\.\d{3} \| 0\.\d{3} \|$", text, re.M)
    assert rows == ["tpe (default)", "random", "nsga2"]  # random once, though named twice
    assert text.rstrip().splitlines()[-1].startswith("search quality: within 2 %")


def test_compare_refuses_an_unknown_sampler_in_one_line(grid, tmp_path, capsys):
    assert search_quality.main([str(grid), "--compare", "cmaes", "--out",
                                str(tmp_path / "x.md")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: unknown sampler 'cmaes'") and len(err.strip().splitlines()) == 1
