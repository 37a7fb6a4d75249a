"""The sweep (benchmarks/knob_sweep.py, benchmarks/sweep_search.py): every cheap candidate once,
one knob at a time, in one study. Its configs as planned, and calls of record_knobs that measure
them, stop after them, and resume; the searches run in this process, FakeRunner behind them."""

from __future__ import annotations

import contextlib
import json
import signal
import tarfile
from pathlib import Path

import pandas as pd

from benchmarks import knob_catalogue as catalogue
from benchmarks import knob_sweep
from benchmarks.knob_catalogue import Candidate, TorchSettings
from tests.support.knob_search import MODES, OPTIONS, SETTINGS, record
from tuner.cli import output
from tuner.data.derive import listed
from tuner.domain.config import TrialConfig
from tuner.domain.records import NOT_RUN, Status
from tuner.fake import FakeRunner
from tuner.launch import runner as runners
from tuner.study.start_plan import StartFrom

NAME = "resnet50-bf16-bs1-h100"
FOLDER = f"benchmarks/sweeps/{NAME}"
SLOW = [c.name for c in catalogue.CATALOGUE if c.slow]
CHEAP_CNN = {c.name for c in catalogue.CATALOGUE if not c.slow}  # every one applies to a CNN


def differ(config: TrialConfig, base: TrialConfig) -> dict[str, object]:
    """What a config sets otherwise than ``base``: options, channels_last, dynamic."""
    out = {k: v for k, v in config.options if base.option_dict.get(k) != v}
    return out | {k: getattr(config, k) for k in ("channels_last", "dynamic")
                  if getattr(config, k) != getattr(base, k)}


def test_a_sweep_is_the_baselines_then_the_base_with_each_cheap_candidate_alone():
    plans, said = knob_sweep.sweep("resnet50", [1, 16], "s", SETTINGS)
    (plan,) = plans
    assert plan.path == "benchmarks/sweeps/s" and said == [
        f"skipped {name}: compiles for minutes: screen it (DESIGN=screen ARMS=slow)"
        for name in SLOW]
    configs = plan.configs()
    assert len(configs) == 2 * (2 + 10)
    assert [c.label.split(" ")[0] for c in configs[:4]] == ["eager", "eager"] + [
        "inductor:reduce-overhead"] * 2  # the baselines first, torch's settings
    base = {c.batch_size: c for c in configs[2:4]}
    assert all(v == SETTINGS.value(k, "reduce-overhead") for k, v in base[1].options)
    assert base[1].channels_last is False and base[1].dynamic is False
    assert {name for name, _ in plan.queue} == CHEAP_CNN
    union = {c.key for c in plan.space.configs()}
    for name, config in plan.queue:
        candidate = catalogue.BY_NAME[name]
        assert differ(config, base[config.batch_size]) == {candidate.knob: candidate.value}
        assert config.key in union
    assert dict(plan.space.options)["benchmark_combo_kernel"] == (False,)  # torch's, held
    assert [c.key for c in configs] == [c.key for c in plan.configs()]  # one order


def test_candidates_for_another_kind_of_model_are_left_out_with_a_line():
    plans, said = knob_sweep.sweep("tuner.examples:text_transformer", [1], "t", SETTINGS)
    assert said[:3] == ["skipped channels_last: not for a text model",
                        "skipped conv_1x1_as_mm: not for a text model",
                        "skipped layout_optimization: not for a text model"]
    assert len(said) == 3 + len(SLOW)
    assert {name for name, _ in plans[0].queue} == CHEAP_CNN - {
        "channels_last", "conv_1x1_as_mm", "layout_optimization"}
    assert plans[0].space.dynamic == (False, True) and plans[0].space.channels_last == ()


def test_a_held_option_other_than_torchs_is_held_on_its_candidates_config_alone():
    # A torch that benchmarks combo kernels: combo_kernels holds benchmark_combo_kernel=False.
    settings = TorchSettings("3.0", {**OPTIONS, "benchmark_combo_kernel": True}, MODES)
    plan = knob_sweep.sweep("resnet50", [1], "s", settings)[0][0]
    assert dict(plan.space.options)["benchmark_combo_kernel"] == (True, False)
    base = plan.configs()[1]
    assert base.option_dict["benchmark_combo_kernel"] is True  # the base keeps torch's
    held = {name: c.option_dict["benchmark_combo_kernel"] for name, c in plan.queue
            if c.options}
    assert held.pop("combo_kernels") is False and set(held.values()) == {True}
    combo = dict(plan.queue)["combo_kernels"]
    assert differ(combo, base) == {"combo_kernels": True, "benchmark_combo_kernel": False}


def test_a_held_option_another_candidate_sets_leaves_the_candidate_to_its_screen(monkeypatch):
    settings = TorchSettings("3.0", {**OPTIONS, "benchmark_combo_kernel": True}, MODES)
    plain = Candidate("combo_benchmark_off", "combinations not benchmarked",
                      "benchmark_combo_kernel", False)
    monkeypatch.setattr(knob_sweep, "CATALOGUE", (*catalogue.CATALOGUE, plain))
    plans, said = knob_sweep.sweep("resnet50", [1], "s", settings)
    assert "skipped combo_kernels: it holds benchmark_combo_kernel=false (torch's is true), " \
           "which combo_benchmark_off also set: the union cannot hold it on its config " \
           "alone; screen it" in said
    assert "combo_kernels" not in dict(plans[0].queue)
    assert dict(plans[0].space.options)["benchmark_combo_kernel"] == (True, False)


def trials(root: Path) -> pd.DataFrame:
    return pd.read_parquet(root / FOLDER / "trials.parquet")


def test_a_call_measures_the_sweep_and_stops_after_its_queue(tmp_path, fake_cli, capsys):
    calls: list[list[str]] = []
    code, out = record(tmp_path, tmp_path / "repo", calls, "--design", "sweep")
    assert code == 0 and len(calls) == 1 and calls[0][0].endswith("benchmarks/sweep_search.py")
    args = calls[0]
    assert args[args.index("--confirm") + 1] == "0" and args[args.index("--min-seconds") + 1] \
        == "1" and args[args.index("--compile-timeout") + 1] == "5m"
    with tarfile.open(out) as tar:
        assert sorted(tar.getnames()) == sorted(
            f"{FOLDER}/{name}" for name in ("design.json", "study.db", "trials.parquet",
                                            "pareto.parquet"))
        tar.extractall(tmp_path / "repo", filter="data")
    plan = knob_sweep.sweep("resnet50", [1], NAME, SETTINGS)[0][0]
    df = trials(tmp_path / "repo")
    assert list(df["config_key"]) == [c.key for c in plan.configs()]  # 12 trials, in order
    assert list(df["started_from"].fillna("-")) == ["-", "-", *dict(plan.queue)]
    # The noise floor: the base (the second baseline) in three processes, the rest in one.
    processes = df["latency_ms_p50_repeats"].map(listed)
    assert list(processes) == [0, knob_sweep.NOISE_PROCESSES] + [0] * (len(df) - 2)
    design = json.loads((tmp_path / "repo" / FOLDER / "design.json").read_text())
    assert design["design"] == "sweep" and design["planned"] == {
        NAME: [c.key for c in plan.configs()]}
    assert capsys.readouterr().out.strip().endswith(f"{FOLDER}: every config measured")


@contextlib.contextmanager
def interrupted_after(trials_: int):
    """Progress callbacks that send this process SIGINT after ``trials_`` trials, as
    record_knobs does to its search once its time is spent."""
    seen = []

    def on_trial(event):
        seen.append(event)
        if len(seen) == trials_:
            signal.raise_signal(signal.SIGINT)
    yield {"on_trial": on_trial, "on_message": lambda text: None,
           "on_start": lambda number, config, name: None}


def test_a_stopped_sweep_resumes_and_measures_only_what_is_left(tmp_path, fake_cli,
                                                                monkeypatch):
    calls: list[list[str]] = []
    repo = tmp_path / "repo"
    with monkeypatch.context() as patch:
        patch.setattr(output, "progress", lambda say: interrupted_after(5))
        code, out = record(tmp_path, repo, calls, "--design", "sweep")
    assert code == 0
    with tarfile.open(out) as tar:
        tar.extractall(repo, filter="data")
    first = trials(repo)
    assert len(first) == 5
    # The next call resumes the study carried in the repository, with the same queue.
    code, out = record(tmp_path, repo, calls, "--design", "sweep")
    assert code == 0 and len(calls) == 2
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    both = trials(tmp_path / "back")
    plan = knob_sweep.sweep("resnet50", [1], NAME, SETTINGS)[0][0]
    assert list(both["config_key"]) == [c.key for c in plan.configs()]  # none twice, no other
    assert set(first["trial_number"]) < set(both["trial_number"])


def test_a_sweep_stopped_before_its_noise_floor_is_not_whole_and_the_next_call_measures_it(
        tmp_path, fake_cli, monkeypatch, capsys):
    calls: list[list[str]] = []
    repo = tmp_path / "repo"
    plan = knob_sweep.sweep("resnet50", [1], NAME, SETTINGS)[0][0]
    with monkeypatch.context() as patch:  # Ctrl-C as the last config's trial ends
        patch.setattr(output, "progress", lambda say: interrupted_after(len(plan.configs())))
        record(tmp_path, repo, calls, "--design", "sweep")
    assert capsys.readouterr().out.strip().endswith(
        f"not whole yet, run the same command again: {NAME} 12/12, its bases' noise floor")
    with tarfile.open(tmp_path / "out" / "knobs.tgz") as tar:
        tar.extractall(repo, filter="data")
    assert trials(repo)["latency_ms_p50_repeats"].map(listed).sum() == 0
    code, out = record(tmp_path, repo, calls, "--design", "sweep")
    assert code == 0 and len(calls) == 2
    assert capsys.readouterr().out.strip().endswith(f"{FOLDER}: every config measured")
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    df = trials(tmp_path / "back")
    assert len(df) == 12 and list(df["latency_ms_p50_repeats"].map(listed)) == \
        [0, knob_sweep.NOISE_PROCESSES] + [0] * 10


def test_a_sweep_where_eager_fails_at_a_batch_size_ends_without_the_rest_of_its_union(
        tmp_path, fake_cli, monkeypatch, capsys):
    # Eager runs out of memory at batch size 16: the configs there are rows that say so, the
    # target of trials is out of reach, and the sampler's first config outside the plan is
    # aborted as it starts. (A text model: its union is small.)
    model, name = "tuner.examples:text_transformer", "text_transformer-bf16-bs1-16-h100"
    plan = knob_sweep.sweep(model, [1, 16], name, SETTINGS)[0][0]
    eager_16 = plan.configs()[1]
    assert (eager_16.backend, eager_16.batch_size) == ("eager", 16)
    oom = FakeRunner(fail={eager_16.key: Status.OOM}, delay_s=0.01)  # it heeds an abort
    monkeypatch.setattr(runners, "make_runner", lambda settings, shared_cache=None: oom)
    code, out = record(tmp_path, tmp_path / "repo", [], "--design", "sweep", model=model,
                       batch_sizes="1,16")
    assert code == 0
    assert capsys.readouterr().out.strip().endswith(
        f"benchmarks/sweeps/{name}: every config measured")
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    df = pd.read_parquet(tmp_path / "back" / f"benchmarks/sweeps/{name}/trials.parquet")
    ran = df[~df["message"].fillna("").str.startswith(NOT_RUN)]
    assert set(ran["config_key"]) == {c.key for c in plan.configs()
                                      if c.batch_size == 1} | {eager_16.key}
    assert plan.keys() <= set(df["config_key"])  # every planned config has its row
    # The trials, the sampler's config aborted as it started, then the base at batch size 1
    # measured twice more (the noise floor); the base at 16 did not run, so it is not.
    assert len(oom.calls) == len(ran) + 3 and oom.calls[len(ran)] not in plan.keys()
    base_1 = [c.key for c in plan.configs()
              if c.key in knob_sweep.base_keys(plan.space) and c.batch_size == 1]
    assert oom.calls[len(ran) + 1:] == base_1 * 2


def test_the_queue_file_holds_the_plans_queue_each_config_named_by_its_candidate():
    plan = knob_sweep.sweep("resnet50", [1], NAME, SETTINGS)[0][0]
    start = knob_sweep.start_from(plan)
    assert start.studies == (knob_sweep.SOURCE,)
    assert [(s.source, s.config) for s in start.configs] == list(plan.queue)
    assert StartFrom.from_dict(json.loads(json.dumps(start.to_dict()))) == start
