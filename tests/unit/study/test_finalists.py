"""Finalists measured again in fresh processes, with the fake runner: what is re-run, where the
records go, the columns and ranks a user reads, resume, and `tuner confirm`."""

from __future__ import annotations

import dataclasses
import json
import math

import optuna
import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.specs import make_space, make_spec
from tests.support.text import flat
from tuner.cli import app
from tuner.cli import options as cli_options
from tuner.data import files, noise, schema, select
from tuner.domain import layout
from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.space import TrialConfig
from tuner.errors import UserError
from tuner.fake import FakeRunner
from tuner.render import study as report
from tuner.render.study import trial_table
from tuner.study import finalists, remeasurements
from tuner.study.record import is_measured
from tuner.study.repeats import Repeats
from tuner.study.search import Search
from tuner.study.storage import make_storage

# bs 1 and 8 x (eager + inductor default, reduce-overhead x dynamic False, True): 10 configs.
# dynamic=True is 5 % slower at the same cost: never a finalist.
SPACE = make_space(modes=("default", "reduce-overhead"), dynamic=(False, True))
CONFIGS = len(SPACE.configs())


def search(tmp_path, runner=None, repeats=2, on_message=None, **kwargs):
    runner = runner or FakeRunner(jitter=0.02)
    spec = make_spec(tmp_path, space=kwargs.pop("space", SPACE), confirm_repeats=repeats, **kwargs)
    s = Search(spec, runner, on_message=on_message)
    return s, s.run()


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """One search of SPACE, its finalists measured twice, for the tests that only read it: its
    studies folder, the Search, its summary and what it said."""
    root = tmp_path_factory.mktemp("searched")
    said: list[str] = []
    s, summary = search(root, on_message=said.append)
    return root, s, summary, said


def front_numbers(df) -> set[int]:
    return set(select.pareto(df)["trial_number"].astype(int))


def test_each_finalist_is_measured_again_and_kept_on_the_study_not_as_trials(searched):
    _, s, summary, _ = searched
    front = select.pareto(summary.trials)
    assert len(front) >= 4  # at each batch size: eager (no compile) and a faster compiled one
    # Measured trials: one per config, as without confirmation; repeats are not trials.
    assert sum(is_measured(t.frozen) for t in s.fronts.trials()) == CONFIGS == summary.measured
    assert len(s.runner.calls) == CONFIGS + 2 * len(front)
    stored = finalists.repeats_of(s.study, s.claims.storage)
    assert set(stored) == front_numbers(summary.trials)
    for _, row in front.iterrows():
        kinds = [r["kind"] for r in stored[int(row["trial_number"])]]
        assert kinds == (["eager", "eager"] if row["backend"] == "eager" else ["warm", "artifacts"])
        assert all(r["status"] == "ok" and r["torch"] == "2.11.0" for r in stored[
            int(row["trial_number"])])


def test_the_finalist_columns_say_what_the_fresh_processes_measured(searched):
    root, s, summary, said = searched
    df, _ = files.read(root / "s" / layout.TRIALS_FILE)
    front, off = df[df["trial_number"].isin(front_numbers(df))], df[
        ~df["trial_number"].isin(front_numbers(df))]
    assert len(off) >= 1
    stored = finalists.repeats_of(s.study, s.claims.storage)
    for _, row in front.iterrows():
        p50s = list(row["latency_ms_p50_repeats"])
        records = stored[int(row["trial_number"])]
        assert p50s == [row["latency_ms_p50"]] + [r["latency_ms_p50"] for r in records]
        streams = list(row["stream_ms_p50_repeats"])  # back to back, each process's too
        assert streams == [row["stream_ms_p50"]] + [r["stream_ms_p50"] for r in records]
        assert row["stream_ms_p50_median"] == pytest.approx(sorted(streams)[1])
        for tail in ("latency_ms_p90", "latency_ms_p99"):  # the tail one request waits, too
            tails = list(row[f"{tail}_repeats"])
            assert tails == [row[tail]] + [r[tail] for r in records]
            assert row[f"{tail}_median"] == pytest.approx(sorted(tails)[1])
        assert row["throughput_per_s"] == pytest.approx(
            row["batch_size"] * 1e3 / row["stream_ms_p50_median"])
        assert len(set(p50s)) == 3  # the fake jitters each process
        assert row["latency_spread_pct"] == pytest.approx(
            (max(p50s) - min(p50s)) / sorted(p50s)[1] * 100)
        assert row["latency_ms_p50_ci_low"] < min(p50s) and row["latency_ms_p50_ci_high"] > max(p50s)
        assert row["repeats_failed"] == 0 and row["rank_within_noise"] >= 1
        # each re-measurement's progress line gives its p50 and p99, as its row keeps them
        for record in records:
            assert any(f"(trial {row['trial_number']}, {record['kind']}): p50 "
                       f"{record['latency_ms_p50']:.3f} ms, p99 {record['latency_ms_p99']:.3f} ms"
                       in m for m in said), record
        if row["backend"] == "eager":
            assert pd_none(row["compile_s_warm"]) and pd_none(row["artifacts_file"])
            continue
        cold = row["compile_s_cold"]
        assert row["compile_s_warm"] == pytest.approx(cold * FakeRunner.WARM_FACTOR)
        assert row["compile_s_artifacts"] == pytest.approx(cold * FakeRunner.ARTIFACTS_FACTOR + 0.05)
        assert row["artifacts_file"] == layout.artifacts_relative(row["config_key"])
        assert (root / "s" / row["artifacts_file"]).read_bytes().startswith(b"fake artifacts")
        assert row["artifacts_torch"] == "2.11.0"
    for column, _ in schema.FINALIST_FIELDS:  # trials that are not finalists: all empty
        assert off[column].map(pd_none).all(), column
    pareto, _ = files.read(root / "s" / layout.PARETO_FILE)
    assert pareto["rank_within_noise"].notna().all()


def pd_none(value) -> bool:
    return value is None or (not hasattr(value, "__len__") and pd.isna(value))


def test_the_search_keeps_the_compile_caches_of_the_front_only(searched):
    _, s, summary, _ = searched
    runner, spec = s.runner, s.spec
    compiled = [(r.config, c) for r, c in zip(runner.requests[:CONFIGS],
                                              runner.cache_dirs[:CONFIGS])]
    for config, cache in compiled:  # each compiled trial had a cache folder of its own ...
        assert (cache is None) == (not config.compiled)
    kept = {int(p.name) for p in spec.layout.cache_root.iterdir()}
    front = select.pareto(summary.trials)
    # ... and only the compiled finalists' are left.
    assert kept == set(front[front["backend"] != "eager"]["trial_number"].astype(int))
    warm = [c for r, c in zip(runner.requests[CONFIGS:], runner.cache_dirs[CONFIGS:])
            if r.save_artifacts]
    assert warm and all(c is not None and int(c.name) in kept for c in warm)


def test_a_trial_the_front_was_not_chosen_from_keeps_its_cache(tmp_path):
    # With --gpus, another worker finishes a trial between this worker's frame and its pruning:
    # the frame's front does not hold it, yet it may be on the front now. Its cache stays.
    s, summary = search(tmp_path, repeats=0)
    root = s.spec.layout.cache_root
    cached = sorted(int(p.name) for p in root.iterdir())
    assert cached
    newest = cached[-1]
    older = summary.trials[summary.trials["trial_number"] != newest]
    front = select.pareto(older)
    front = front[front["trial_number"] != newest]
    finalists.prune_caches(s.fronts, s.spec, front, older)
    assert (root / str(newest)).is_dir()
    # Judged from a frame that holds it and a front that does not: off the front, deleted.
    finalists.prune_caches(s.fronts, s.spec, front, summary.trials)
    assert not (root / str(newest)).exists()


class Slower(FakeRunner):
    """reduce-overhead dynamic=False at batch size 1 takes ``factor`` times as long in the
    processes ``slow(n)`` picks (n = 1: its search trial), whose core times the host loop in
    ``loop_ms``; every other process times it in 1 ms."""

    def __init__(self, slow, factor: float, loop_ms: float = 1.0) -> None:
        super().__init__()
        self.slow, self.factor, self.loop_ms = slow, factor, loop_ms

    def run(self, request, workdir, abort=None, cache_dir=None):
        result = dataclasses.replace(super().run(request, workdir, abort, cache_dir),
                                     host_loop_ms=1.0)
        config = request.config
        if (config.label, config.batch_size, config.dynamic) == (
                "inductor:reduce-overhead", 1, False) and self.slow(self.calls.count(config.key)):
            return dataclasses.replace(result, host_loop_ms=self.loop_ms,
                                       latency_ms_p50=result.latency_ms_p50 * self.factor,
                                       latency_ms_p90=result.latency_ms_p90 * self.factor)
        return result


def SlowAgain() -> Slower:  # noqa: N802 - a runner, named as one
    return Slower(lambda n: n > 1, 1.5)


def SlowCore() -> Slower:  # noqa: N802
    return Slower(lambda n: n == 1, 1.8, loop_ms=2.0)


def reduce_overhead_at_1(trials) -> tuple[int, int]:
    """The trial numbers of reduce-overhead at batch size 1: dynamic=False (the one Slower
    slows), dynamic=True."""
    at_1 = trials[(trials["batch_size"] == 1) & (trials["mode"] == "reduce-overhead")]
    by_dynamic = dict(zip(at_1["dynamic"].astype(bool), at_1["trial_number"].astype(int)))
    return by_dynamic[False], by_dynamic[True]


def test_a_trial_that_joins_the_front_in_a_slower_finalists_place_is_measured_again(tmp_path):
    said: list[str] = []
    s, summary = search(tmp_path, runner=SlowAgain(), on_message=said.append)
    df = summary.trials.set_index("trial_number")
    slow, joined = reduce_overhead_at_1(summary.trials)
    assert df.loc[slow, "latency_ms_p50_median"] == pytest.approx(
        1.5 * df.loc[slow, "latency_ms_p50"])
    # dynamic=True (5 % slower, the same memory and warm-up) was dominated in the search; on the
    # median it is faster, so it takes the front, and was measured again in turn.
    front = set(summary.pareto["trial_number"].astype(int))
    assert joined in front and slow not in front
    assert len(finalists.repeats_of(s.study, s.claims.storage)[joined]) == 2
    assert summary.pareto["latency_ms_p50_repeats"].map(len).eq(3).all()
    assert f"on the finalists' medians the Pareto front changed: trial {joined} joined it; " \
        f"trial {slow} left it" in said


def test_a_trial_off_the_front_for_a_slow_cores_sake_is_measured_again(tmp_path):
    said: list[str] = []
    s, summary = search(tmp_path, runner=SlowCore(), on_message=said.append)
    df = summary.trials.set_index("trial_number")
    slow, _ = reduce_overhead_at_1(summary.trials)
    assert df.loc[slow, "host_core_slowdown"] == 2.0
    # 6.75 ms in the search put it behind default (5.0 ms, less memory and warm-up); measured
    # again at 3.75 ms, its median is the fastest at batch size 1, and it is on the front.
    assert len(finalists.repeats_of(s.study, s.claims.storage)[slow]) == 2
    assert df.loc[slow, "latency_ms_p50_median"] == pytest.approx(3.75)
    assert slow in set(summary.pareto["trial_number"])
    assert any(f"also measured again: trial {slow}, off the front" in m for m in said)
    # It took the place of dynamic=True, which its slow search trial had let onto the front.
    assert any(m.startswith("confirming 6 finalists and 1 trial off the front: ") for m in said)
    assert any(m.startswith(f"on the finalists' medians the Pareto front changed: trial {slow} "
                            "joined it; trial ") for m in said)
    again = s.confirm(2)  # nothing left to measure; the finalists are the front's
    assert again.measured == 0 and again.finalists == len(summary.pareto)


class StreamsFast(FakeRunner):
    """reduce-overhead at batch size 1 waits 6 ms a request but streams a call a millisecond
    back to back: the front (per request) leaves it out, throughput picks it."""

    def run(self, request, workdir, abort=None, cache_dir=None):
        result = super().run(request, workdir, abort, cache_dir)
        config = request.config
        if (config.label, config.batch_size, config.dynamic) == (
                "inductor:reduce-overhead", 1, False):
            return dataclasses.replace(result, latency_ms_p50=6.0, latency_ms_p90=6.1,
                                       latency_ms_p99=6.2, stream_ms_p50=1.0)
        return result


def test_the_throughput_pick_off_the_front_is_measured_again_like_a_finalist(tmp_path):
    # recommend --objective throughput picked it, said "measured in one process: `tuner
    # confirm` measures the finalists again", and confirm never measured it.
    from tuner.use.recommend import recommend

    said: list[str] = []
    s, summary = search(tmp_path, runner=StreamsFast(), on_message=said.append)
    pick, _ = reduce_overhead_at_1(summary.trials)
    assert pick not in set(summary.pareto["trial_number"])
    assert len(finalists.repeats_of(s.study, s.claims.storage)[pick]) == 2
    assert (f"also measured again: trial {pick} at batch size 1, off the front (which ranks what "
            "one request waits) but the most items/s back to back, what `tuner recommend "
            "--objective throughput` picks") in said
    rec = recommend(s.spec.directory, batch_size=1, objective="throughput")
    assert rec.trial_number == pick and rec.confirmed
    assert "measured in one process" not in rec.describe()


def test_a_resumed_searchs_progress_names_the_fastest_by_its_median(tmp_path):
    _, first = search(tmp_path, runner=SlowAgain(), n_trials=6)
    row = first.trials.set_index("label").loc["inductor:reduce-overhead"]
    row = row[row["batch_size"] == 1].iloc[0]
    assert row["latency_ms_p50"] == 3.75 and row["latency_ms_p50_median"] == 5.625
    events = []
    Search(make_spec(tmp_path, space=SPACE, confirm_repeats=0), SlowAgain(),
           on_trial=events.append).run()
    # 3.75 ms was one process of three; default's 5.0 ms is the fastest median at batch size 1
    assert events and events[0].best[1] == ("default", 5.0)


def test_a_resumed_search_does_not_measure_confirmed_finalists_again(tmp_path):
    s, _ = search(tmp_path)
    before = finalists.repeats_of(s.study, s.claims.storage)
    again, _ = search(tmp_path)
    assert again.runner.calls == [] and finalists.repeats_of(again.study, again.claims.storage) == before
    more, _ = search(tmp_path, repeats=3)  # a third each, on the warm cache again
    assert len(more.runner.calls) == len(before)
    after = finalists.repeats_of(more.study, more.claims.storage)
    assert all(after[n][:2] == before[n] and len(after[n]) == 3 for n in before)
    assert {after[n][2]["kind"] for n in after} == {"warm", "eager"}


def test_two_processes_confirming_one_study_keep_both_their_measurements_and_share_the_work(
        tmp_path):
    s, _ = search(tmp_path, repeats=0)
    storage = s.claims.storage

    class Beside(FakeRunner):
        """While each of its re-measurements runs, another process stores one of the same trial."""

        def run(self, request, workdir, abort=None, cache_dir=None):
            result = super().run(request, workdir, abort, cache_dir)
            trial = next(n for n, key in configs.items() if key == request.config.key)
            other = {**remeasurements.repeat_record("warm", result, request.config.key),
                     "host": "other"}
            remeasurements.add_repeat(s.study, storage, trial, other)
            return result

    df = s.export().trials
    configs = {int(r["trial_number"]): r["config_key"] for _, r in df.iterrows()}
    runner = Beside(jitter=0.02)
    summary = Search(s.spec, runner).confirm(4)
    stored = finalists.repeats_of(s.study, storage)
    assert stored and all(len(v) >= 4 for v in stored.values())
    for records in stored.values():  # every process's kept: none overwrote another's
        assert sum(r["host"] == "other" for r in records) == sum(r["host"] != "other"
                                                                 for r in records)
    # Each counted the other's: 2 of the 4 each, not 4.
    assert summary.measured == len(runner.calls) == 2 * len(stored)


def test_a_measurement_another_process_stores_while_one_is_being_stored_is_kept(
        tmp_path, monkeypatch):
    """The worst moment: another process stores a re-measurement of the same finalist just as
    this one stores its own (after anything it read). Both are kept, and count."""
    s, _ = search(tmp_path, repeats=0)
    configs = {int(r["trial_number"]): r["config_key"] for _, r in s.export().trials.iterrows()}
    store = optuna.storages.RDBStorage.set_study_system_attr
    inside = []

    def beside(self, study_id, key, value):
        if key.startswith("tuner.repeat") and value and not inside:  # a record stored
            number = int(key.split(".")[2])
            ours = value if isinstance(value, dict) else value[-1]
            inside.append(number)  # the other process's own write, just before this one's
            remeasurements.add_repeat(s.study, self, number, {**ours, "host": "other",
                                                              "id": ours["id"] + "-other"})
            inside.clear()
        store(self, study_id, key, value)

    monkeypatch.setattr(optuna.storages.RDBStorage, "set_study_system_attr", beside)
    runner = FakeRunner(jitter=0.02)
    summary = Search(s.spec, runner).confirm(2)
    monkeypatch.undo()
    stored = finalists.repeats_of(s.study, s.claims.storage)
    assert stored and summary.measured == len(runner.calls) == len(stored)
    for number, records in stored.items():
        assert sorted(r["host"] == "other" for r in records) == [False, True]
        assert {r["config_key"] for r in records} == {configs[number]}


def test_forgetting_empties_both_kinds_of_stored_re_measurements(tmp_path):
    """A study made by an older tuner kept each finalist's records as one list; --redo forgets
    those and the one-key-a-record kind alike."""
    s, _ = search(tmp_path)
    storage = s.claims.storage
    study_id = storage.get_study_id_from_name(s.study.study_name)
    number = next(iter(finalists.repeats_of(s.study, storage)))
    old = {"config_key": "x", "kind": "warm", "status": "ok", "latency_ms_p50": 1.0}
    storage.set_study_system_attr(study_id, remeasurements.REPEATS_ATTR + str(number), [old])
    assert finalists.repeats_of(s.study, storage)[number][0] == old
    assert remeasurements.forget(s.study, storage) == len(finalists.repeats_of(s.study, storage))
    assert all(records == [] for records in finalists.repeats_of(s.study, storage).values())


def test_a_finalist_another_process_measured_meanwhile_is_not_measured_again(tmp_path):
    s, _ = search(tmp_path, repeats=0)
    storage = s.claims.storage
    df = s.export().trials
    front = set(select.pareto(df)["trial_number"].astype(int))
    configs = {int(r["trial_number"]): r["config_key"] for _, r in df.iterrows()}

    class Ahead(FakeRunner):
        """During its first re-measurement, another process measures every other finalist."""

        def run(self, request, workdir, abort=None, cache_dir=None):
            result = super().run(request, workdir, abort, cache_dir)
            if len(self.calls) == 1:
                first = int(workdir.parent.name)  # trials/<N>/repeat-<k>
                for n in front - {first}:
                    for _ in range(3):
                        remeasurements.add_repeat(s.study, storage, n, {
                            **remeasurements.repeat_record("warm", result, configs[n]),
                            "host": "other"})
            return result

    runner = Ahead(jitter=0.02)
    summary = Search(s.spec, runner).confirm(3)
    assert summary.measured == len(runner.calls) == 3  # the first finalist's, no more
    stored = finalists.repeats_of(s.study, storage)
    assert sorted(len(v) for v in stored.values()) == [3] * len(front)


def test_redo_forgets_earlier_measurements(tmp_path):
    s, _ = search(tmp_path)
    before = finalists.repeats_of(s.study, s.claims.storage)
    redo = Search(s.spec, FakeRunner(jitter=0.02))
    summary = redo.confirm(2, redo=True)
    assert summary.measured == 2 * len(before) and not summary.stopped
    after = finalists.repeats_of(redo.study, redo.claims.storage)
    assert set(after) == set(before) and all(len(v) == 2 for v in after.values())
    assert after != before


def test_without_the_trials_cache_the_first_repeat_compiles_cold_then_warm(tmp_path):
    s, _ = search(tmp_path, repeats=0)
    assert finalists.repeats_of(s.study, s.claims.storage) == {}
    for path in s.spec.layout.cache_root.iterdir():
        for item in path.iterdir():
            item.unlink()
    runner = FakeRunner()
    Search(s.spec, runner).confirm(3)
    stored = finalists.repeats_of(s.study, s.claims.storage)
    compiled = [v for v in stored.values() if v[0]["kind"] != "eager"]
    assert compiled and all([r["kind"] for r in v] == ["cold", "warm", "artifacts"]
                            for v in compiled)
    df = s.export().trials
    row = df[df["trial_number"] == next(n for n, v in stored.items() if v[0]["kind"] == "cold")]
    assert row["compile_s_warm"].iloc[0] == pytest.approx(
        row["compile_s_cold"].iloc[0] * FakeRunner.WARM_FACTOR)


def test_a_warm_repeat_that_missed_the_cache_gives_no_warm_compile_time():
    result = FakeRunner().run(TrialRequest(TrialConfig("inductor", 1, "default", False),
                                           make_spec_workload()), None)
    record = remeasurements.repeat_record("warm", result, "k")  # FakeRunner without a cache: a miss
    assert record["fxgraph_cache_misses"] == 1
    columns = noise.repeat_columns(result, [record], "k")
    assert columns["compile_s_warm"] is None and columns["latency_ms_p50_repeats"] == [
        result.latency_ms_p50, result.latency_ms_p50]


def make_spec_workload():
    from tests.support.specs import WORKLOAD

    return WORKLOAD


def test_a_finalist_that_fails_a_re_measurement_is_left_out_and_not_measured_more(tmp_path):
    # It crashed in a fresh process: not one to serve, however fast its search trial was. It
    # leaves the front (so show and recommend never call it fastest), its next repeats are
    # not run, and the next config on the front is measured in its place.
    class FailsSecond(FakeRunner):
        def run(self, request, workdir, abort=None, cache_dir=None):
            result = super().run(request, workdir, abort, cache_dir)
            if request.load_artifacts:
                return type(result).failure(Status.CRASH, "fake crash")
            return result

    messages: list[str] = []
    s, summary = search(tmp_path, FailsSecond(jitter=0.02), repeats=3,
                        on_message=messages.append)
    df = s.export().trials
    failed = df[df["repeats_failed"].fillna(0) > 0]
    assert len(failed) and (failed["backend"] != "eager").all()
    assert (failed["repeats_failed"] == 1).all()
    stored = finalists.repeats_of(s.study, s.claims.storage)
    for number in failed["trial_number"]:  # no repeat after the one that crashed
        assert stored[int(number)][-1]["status"] == Status.CRASH.value
    assert not set(failed["trial_number"]) & front_numbers(df)
    assert not set(failed["trial_number"]) & set(select.eligible(df)["trial_number"])
    assert "1 re-measurement failed" in report.notes(failed.iloc[0])
    for number in failed["trial_number"]:
        assert any(f"(trial {number}) failed in a fresh process (crash): it is left out" in m
                   for m in messages), messages
    text = report.render(df, select.pareto(df), {"study": "s", "workload": {}})
    assert "left out of the fronts and recommendations" in text
    assert not any("stayed noisy" in m for m in messages)
    # Resuming does not retry a failed repeat: it was measured, and failed.
    again, _ = search(tmp_path, FailsSecond(), repeats=3)
    assert again.runner.calls == []
    # --redo forgets them all before the front is chosen: fixed, the config is back.
    said: list[str] = []
    redo = Search(s.spec, FakeRunner(jitter=0.02), on_message=said.append)
    redo.confirm(3, redo=True)
    df = redo.export().trials
    assert set(failed["trial_number"]) <= set(select.eligible(df)["trial_number"])
    assert any(m.startswith("--redo: the re-measurements of ") for m in said)


def test_stopping_during_confirmation_keeps_what_was_measured_and_resume_finishes(tmp_path):
    spec = make_spec(tmp_path, space=SPACE, confirm_repeats=2)
    s = Search(spec, FakeRunner(jitter=0.02))
    s.on_message = lambda text: text.startswith("[confirm 3/") and s.stop_after_trial.set()
    summary = s.run()
    assert "confirming the finalists was stopped" in summary.stop_reason
    assert sum(len(v) for v in finalists.repeats_of(s.study, s.claims.storage).values()) == 3
    rest, _ = search(tmp_path)
    front = len(select.pareto(rest.export().trials))
    assert len(rest.runner.calls) == 2 * front - 3


def test_an_abandoned_repeat_is_not_recorded(tmp_path):
    class Interrupted(FakeRunner):
        def run(self, request, workdir, abort=None, cache_dir=None):
            return type(super().run(request, workdir)).failure(Status.INTERRUPTED, "stopped")

    s, _ = search(tmp_path, repeats=0)
    summary = Search(s.spec, Interrupted()).confirm(2)
    assert summary.stopped and summary.measured == 0
    assert finalists.repeats_of(s.study, s.claims.storage) == {}


# -- ranks within noise ----------------------------------------------------------------------------
def test_a_rank_is_one_below_the_configs_faster_beyond_noise_and_it_is_not_chained():
    fast, noisy, slow = [1.0, 1.01, 0.99], [1.0, 2.0, 1.5], [2.0, 2.02, 1.98]
    # The noisy config is within noise of both; the slow one is slower than the fast one
    # beyond noise and must not share its rank.
    assert noise.within_noise(*({"latency_ms_p50_repeats": v} for v in (fast, noisy)))
    assert noise.within_noise(*({"latency_ms_p50_repeats": v} for v in (noisy, slow)))
    assert noise.faster_beyond_noise(fast, slow) and not noise.faster_beyond_noise(slow, fast)
    assert noise.rank_within_noise([slow, noisy, fast]) == [2, 1, 1]
    assert noise.rank_within_noise([slow, [0.5, 0.51, 0.49], fast, [4.0, 4.1, 3.9]]) == \
        [3, 1, 2, 4]
    assert noise.rank_within_noise([]) == []


def test_a_slow_noisy_config_never_ranks_above_a_steadier_faster_one():
    # The H200 vit_b_16 bf16 study at batch size 8 (studies/h200-vit_b_16-bf16-extended): eager
    # channels_last is within noise of inductor's default only because its processes spread;
    # eager contiguous, faster in every process, is not. Ranked by the test alone, the slower
    # eager would read rank 2 above the faster one's 3.
    reduce_overhead = [[1.253, 1.247, 1.239], [1.287, 1.277, 1.235]]
    default = [[2.348, 2.393, 2.541], [2.897, 2.396, 2.273]]
    eager, eager_channels_last = [2.92, 2.919, 2.723], [3.115, 3.296, 2.789]
    assert noise.faster_beyond_noise(default[0], eager)
    assert not noise.faster_beyond_noise(default[0], eager_channels_last)
    assert noise.rank_within_noise([*reduce_overhead, *default, eager, eager_channels_last]) == \
        [1, 1, 2, 2, 3, 3]
    # Order does not matter, and within noise still is not passed on.
    assert noise.rank_within_noise([eager_channels_last, eager, *default]) == [2, 2, 1, 1]


def test_a_config_faster_in_every_process_is_faster_beyond_noise_though_intervals_overlap():
    # The H200 resnet18 fp32 study at batch size 32 (benchmarks/noise_rule.py): eager's
    # third process read 3.277 ms, which widened its interval to 1.338-4.599 ms, over
    # reduce-overhead's 1.112-1.356 ms; every reduce-overhead process was faster.
    reduce_overhead, eager = [1.198, 1.286, 1.203], [2.032, 2.292, 3.277]
    (_, ro_high), (eager_low, _) = noise.interval(reduce_overhead), noise.interval(eager)
    assert eager_low < ro_high  # the intervals overlap ...
    assert noise.faster_beyond_noise(reduce_overhead, eager)  # ... the Welch test separates them
    # Two processes of nearly the same p50 each, a 1 % apart: within noise.
    assert not noise.faster_beyond_noise([1.0, 1.02], [1.01, 1.03])
    assert not noise.faster_beyond_noise([1.0], [2.0, 2.1])  # one process says nothing


class Scripted(FakeRunner):
    """The p50 of each process of a config (by label), in the order they run."""

    def __init__(self, p50s: dict[str, list[float]]) -> None:
        super().__init__()
        self.p50s = {label: list(values) for label, values in p50s.items()}

    def run(self, request, workdir, abort=None, cache_dir=None):
        result = super().run(request, workdir, abort, cache_dir)
        if self.p50s.get(request.config.label):
            result.latency_ms_p50 = self.p50s[request.config.label].pop(0)
        return result


def test_two_configs_within_noise_get_one_rank_and_the_report_says_so(tmp_path):
    # reduce-overhead's trial was faster than default's (and it needs more memory: both are
    # finalists), but their processes overlap; eager is slower beyond noise.
    runner = Scripted({"inductor:default": [8.0, 8.3, 7.8],
                       "inductor:reduce-overhead": [7.9, 7.7, 8.2], "eager": [10.0, 10.1, 9.9]})
    search(tmp_path, runner, space=make_space(batch_sizes=(1,), modes=("default",
                                                                         "reduce-overhead"),
                                                dynamic=(False,)))
    df, meta = files.read(tmp_path / "s")
    assert len(select.pareto(df)) == 3
    ranks = dict(zip(df["label"], df["rank_within_noise"]))
    assert ranks == {"inductor:reduce-overhead": 1, "inductor:default": 1, "eager": 2}
    text = report.render(df, select.pareto(df), meta)
    assert "rank" in text and "p50 95% CI ms" in text and "warm s" not in text
    assert "warm s" in report.render(df, select.pareto(df), meta, columns=trial_table.COLUMNS)
    said = flat(text)
    assert "Configs of equal rank are within noise of each other" in said
    assert "3 fresh processes" in said


def test_the_verdict_does_not_call_a_compiled_config_faster_when_it_is_within_noise(tmp_path):
    runner = Scripted({"eager": [10.0, 10.4, 9.7], "inductor:default": [9.9, 10.3, 9.6]})
    search(tmp_path, runner, space=make_space(batch_sizes=(1,), modes=("default",),
                                              dynamic=(False,)))
    df, _ = files.read(tmp_path / "s")
    verdict = report.verdicts(df)[1]
    assert "within noise" in verdict and "Use eager" in verdict and "faster than eager" not in verdict


def test_interval_spread_and_t():
    assert noise.interval([2.0]) is None and noise.spread_pct([2.0]) is None
    assert noise.interval([2.0, 2.0, 2.0]) == (pytest.approx(2.0), pytest.approx(2.0))
    low, high = noise.interval([1.0, 1.1, 1.2])
    logs = [math.log(v) for v in (1.0, 1.1, 1.2)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert low == pytest.approx(math.exp(mean - 4.303 * sd / math.sqrt(3)))
    assert high == pytest.approx(math.exp(mean + 4.303 * sd / math.sqrt(3)))
    assert noise.spread_pct([1.0, 1.1, 1.2]) == pytest.approx(20 / 1.1)
    assert noise.t975(1) == 12.706 and noise.t975(11) == 2.228 and noise.t975(500) == 1.96


# -- records and the command line ----------------------------------------------------------------
def test_requests_of_older_tuners_still_load():
    request = TrialRequest(TrialConfig("eager", 1), make_spec_workload(), TrialProtocol())
    old = request.to_dict()
    del old["save_artifacts"], old["load_artifacts"]
    assert TrialRequest.from_dict(json.loads(json.dumps(old))) == request


def test_the_cli_default_is_the_librarys():
    assert Repeats.parse(cli_options.CONFIRM_REPEATS) == finalists.DEFAULT_REPEATS


def invoke(*args):
    return CliRunner().invoke(app.main, list(args))


def test_tuner_confirm_on_an_existing_study(tmp_path, fake_cli):
    args = ["search", "--model", "resnet18", "--device", "cpu", "--backend",
            "eager,inductor", "--mode", "default", "--batch-sizes", "1,8",
            "--studies-dir", str(tmp_path), "--name", "st"]
    result = invoke(*args, "--confirm", "0")
    assert result.exit_code == 0, result.output
    assert "confirming" not in result.stderr and "rank" not in result.stdout
    study = str(tmp_path / "st")

    first = invoke("confirm", study)  # auto: the fake's processes agree, so two each
    assert first.exit_code == 0, first.output
    assert "confirming 4 finalists: 2 to 6 each, until the 95% interval is within 5%" in first.stderr
    assert "[confirm 8]" in first.stderr and "warm" in first.stderr
    assert "rank" in first.stdout and "p50 95% CI ms" in first.stdout  # the table, on stdout
    df, _ = files.read(tmp_path / "st")
    assert df["latency_ms_p50_repeats"].map(len).eq(3).all()

    again = invoke("confirm", "st", "--studies-dir", str(tmp_path), "--json")
    assert again.exit_code == 0, again.output
    assert ("4 finalists on the fronts now; 0 re-measurements now; each already has its "
            "--repeats (--redo measures them again)") in again.stderr
    data = json.loads(again.stdout)
    assert all(len(r["latency_ms_p50_repeats"]) == 3 for r in data["pareto"])
    assert all(r["rank_within_noise"] is not None for r in data["pareto"])

    more = invoke("confirm", study, "--repeats", "3")
    assert "4 re-measurements now" in more.stderr and "already has" not in more.stderr
    redo = invoke("confirm", study, "--redo", "--repeats", "2", "-q")
    assert redo.exit_code == 0 and redo.stderr == ""
    storage = make_storage(f"sqlite:///{tmp_path / 'st' / 'study.db'}")
    stored = optuna.load_study(study_name="st", storage=storage)
    assert all(len(v) == 2 for v in finalists.repeats_of(stored, storage).values() if v)


def test_tuner_confirm_dot_in_the_study_folder_as_show_suggests(tmp_path, fake_cli,
                                                                monkeypatch):
    args = ["search", "--model", "resnet18", "--device", "cpu", "--backend", "eager,inductor",
            "--mode", "default", "--batch-sizes", "1", "--studies-dir", str(tmp_path),
            "--name", "st", "--confirm", "0", "-q"]
    assert invoke(*args).exit_code == 0
    monkeypatch.chdir(tmp_path / "st")
    result = invoke("confirm", ".", "--repeats", "1")
    assert result.exit_code == 0, result.output
    assert "2 re-measurements now" in result.stderr
    too_many = invoke("confirm", ".", "--repeats", "101")
    assert_one_line("--repeats 101: at most 100 re-measurements a finalist", too_many)


def test_nothing_to_confirm_names_the_folder_show_needs(tmp_path, monkeypatch):
    from tuner import fake

    fake.install(setattr=monkeypatch.setattr)
    monkeypatch.setattr("tuner.launch.runner.make_runner",
                        lambda settings, shared_cache=None: FakeRunner(fail={
                            "eager": Status.WRONG_RESULT, "inductor:default": Status.CRASH}))
    args = ["search", "--model", "resnet18", "--device", "cpu", "--backend", "inductor",
            "--mode", "default", "--batch-sizes", "1", "--studies-dir", str(tmp_path),
            "--name", "bad", "--confirm", "0", "-q"]
    invoke(*args)
    result = invoke("confirm", "bad", "--studies-dir", str(tmp_path))
    assert_one_line(f"`tuner show {tmp_path / 'bad'} --all` lists how each ended", result)


def assert_one_line(said: str, result) -> None:
    assert result.exit_code != 0 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert said in result.stderr, result.stderr


def test_tuner_confirm_of_a_study_that_is_not_there_is_a_one_line_error(tmp_path, fake_cli):
    result = invoke("confirm", "nope", "--studies-dir", str(tmp_path))
    assert result.exit_code != 0 and result.stdout == ""
    assert result.stderr.startswith("Error: no study 'nope'") and result.stderr.count("\n") == 1


# -- auto: as many repeats as the interval needs -----------------------------------------------

def test_auto_stops_at_two_repeats_when_the_processes_agree(tmp_path):
    messages = []
    s = Search(make_spec(tmp_path, space=SPACE, confirm_repeats="auto"), FakeRunner(jitter=0.001),
               on_message=messages.append)
    s.run()
    assert all(len(v) == 2 for v in finalists.repeats_of(s.study, s.claims.storage).values())
    assert not any("stayed noisy" in m for m in messages)


def test_auto_measures_a_noisy_finalist_up_to_six_times_and_says_it_stayed_noisy(tmp_path):
    messages = []
    s = Search(make_spec(tmp_path, space=SPACE, confirm_repeats="auto"), FakeRunner(jitter=0.3),
               on_message=messages.append)
    s.run()
    counts = [len(v) for v in finalists.repeats_of(s.study, s.claims.storage).values()]
    assert max(counts) == 6 and min(counts) >= 2
    noisy = [m for m in messages if "stayed noisy after 6 repeats" in m]
    assert noisy and all("host interference was not measured" in m for m in noisy)


def test_repeats_parse_auto_or_a_number():
    assert Repeats.parse("auto") == Repeats()
    assert Repeats.parse("3").fixed == 3 and not Repeats.parse(0).any
    with pytest.raises(UserError, match="give auto or a whole number"):
        Repeats.parse("lots")


def test_finalists_measured_again_load_the_eager_references_the_search_kept(searched):
    _, s, summary, _ = searched
    trials, repeats = s.runner.requests[:CONFIGS], s.runner.requests[CONFIGS:]
    assert len(repeats) == 2 * len(select.pareto(summary.trials))
    kept = str(s.spec.layout.references_dir)
    assert {r.references for r in trials} == {r.references for r in repeats} == {kept}


def test_confirm_redo_says_at_the_start_that_the_same_command_would_not_resume(tmp_path, fake_cli):
    # Its opening line said "`tuner confirm` or the same command resumes"; the same command
    # forgets the re-measurements again (its closing line already said "without --redo").
    from tests.support.cli import STUDY, invoke, search_args

    assert invoke(*search_args(tmp_path, "--confirm", "0")).exit_code == 0
    redo = invoke("confirm", STUDY, "--studies-dir", str(tmp_path), "--redo", "--repeats", "1")
    assert redo.exit_code == 0, redo.output
    opening = next(line for line in redo.stderr.splitlines() if line.startswith("confirming "))
    assert opening.endswith("(Ctrl-C stops; the same command without --redo resumes)")
    plain = invoke("confirm", STUDY, "--studies-dir", str(tmp_path), "--repeats", "2")
    opening = next(line for line in plain.stderr.splitlines() if line.startswith("confirming "))
    assert opening.endswith("(Ctrl-C stops; `tuner confirm` or the same command resumes)")
