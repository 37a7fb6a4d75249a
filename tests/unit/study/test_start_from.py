"""`tuner search --start-from STUDY`: the configs another study (another GPU's) found best are
measured first, after the baselines, in that study's order of merit, and their rows say so."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest

from tests.support.cli import STUDY, assert_one_line_error, invoke, search_args
from tests.support.specs import SPACE, WORKLOAD, ask, make_spec
from tests.support.synthetic import write_study
from tuner.data import files
from tuner.domain.config import TrialConfig
from tuner.domain.layout import PARETO_FILE
from tuner.domain.records import TrialRequest
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner
from tuner.study.claims import pid_namespace
from tuner.study.search import Search
from tuner.study.spec import StudySpec
from tuner.study.start_from import read_start_from
from tuner.study.start_plan import StartFrom
from tuner.study.storage import CONFIG_ATTR, KEY_ATTR, OWNER_ATTR

H100 = "NVIDIA H100 80GB HBM3"
MNC = "max-autotune-no-cudagraphs"
SOURCE = "h100-src"


def key(backend: str, bs: int, mode: str | None = None, dynamic: bool | None = None) -> str:
    return TrialConfig(backend, bs, mode, dynamic).key


def source_study(root, name=SOURCE, model="resnet18", torch_version="2.11.0"):
    """A study made on an H100 (FakeRunner's numbers, some edited) at batch sizes 1, 8, 32.
    Its order of merit: at 1, inductor:default dynamic=True (a finalist, rank 1), then the
    front by p50: max-autotune-no-cudagraphs dynamic=True (3.0 ms), reduce-overhead,
    cudagraphs, eager; at 8, default dynamic=True (a finalist), max-autotune-no-cudagraphs
    dynamic=True (measured again, off the front), cudagraphs, eager."""
    configs = [c for bs in (1, 8, 32) for c in (
        TrialConfig("eager", bs), TrialConfig("inductor", bs, "default", False),
        TrialConfig("inductor", bs, "default", True), TrialConfig("inductor", bs, MNC, False),
        TrialConfig("inductor", bs, MNC, True), TrialConfig("inductor", bs, "reduce-overhead", False),
        TrialConfig("cudagraphs", bs, None, False))]
    changes = {key("inductor", 1, "default", True): {"latency_ms_p50": 4.0},
               key("inductor", 1, MNC, True): {"latency_ms_p50": 3.0},
               key("inductor", 8, "default", True): {"latency_ms_p50": 4.0},
               key("inductor", 8, MNC, True): {"latency_ms_p50": 5.0}}
    columns = {key("inductor", 1, "default", True): {"latency_ms_p50_repeats": [4.0, 4.02]},
               key("inductor", 8, "default", True): {"latency_ms_p50_repeats": [4.0, 4.02]},
               key("inductor", 8, MNC, True): {"latency_ms_p50_repeats": [5.0, 5.01]}}
    return write_study(root, name, gpu=H100, torch_version=torch_version,
                       workload=Workload(model=model, device="cuda"), trial_configs=configs,
                       changes=changes, columns=columns)


# What the search below measures: its baselines, then what the H100 study gave, in turn per
# batch size, each's best first.
BASELINES = [key("eager", 1), key("eager", 8), key("inductor", 1, "default", False),
             key("inductor", 8, "default", False), key("inductor", 1, MNC, False),
             key("inductor", 8, MNC, False)]
STARTED = [key("inductor", 1, "default", True), key("inductor", 8, "default", True),
           key("inductor", 1, MNC, True), key("inductor", 8, MNC, True)]


def started_search(root, *extra: str, start_from=SOURCE):
    """``search`` on the CPU over eager and inductor (default, max-autotune-no-cudagraphs),
    dynamic false and true, batch sizes 1 and 8: 10 configs, 6 of them baselines."""
    more = [] if start_from is None else ["--start-from", start_from]
    return invoke(*search_args(root, "--confirm", "0", *more, *extra,
                               mode=f"default,{MNC}", dynamic="false,true"))


def rows(root) -> pd.DataFrame:
    df, _ = files.read(root / STUDY)
    return df.sort_values("trial_number").reset_index(drop=True)


def came_from(df: pd.DataFrame) -> list[str | None]:
    """Each row's started_from, None where empty."""
    return [v if isinstance(v, str) else None for v in df["started_from"]]


@pytest.mark.usefixtures("fake_cli")
def test_the_configs_of_another_gpus_study_come_after_the_baselines_in_its_order(tmp_path):
    source_study(tmp_path)
    result = started_search(tmp_path)
    assert result.exit_code == 0, result.stderr
    df = rows(tmp_path)
    assert list(df["config_key"]) == BASELINES + STARTED
    assert came_from(df) == [None] * len(BASELINES) + [SOURCE] * len(STARTED)
    said = result.stderr.splitlines()
    assert f"--start-from {SOURCE} (measured on {H100}): 4 configs of its finalists and " \
        "Pareto fronts are measured first, after the baselines (2 more are baselines here)" in said
    assert f"--start-from {SOURCE}: 3 configs outside this search's space, skipped: " \
        "reduce-overhead (bs 1); cudagraphs (bs 1, 8)" in said
    assert f"--start-from {SOURCE}: batch size 32 is not searched here: 5 configs there " \
        "skipped" in said
    assert f"--start-from {SOURCE}: measured with torch 2.11.0, and this search runs torch " \
        f"{metadata.version('torch')}: its order of merit may not hold here" in said
    # This search's own machine (FakeRunner's), not the H100 the configs came from.
    assert set(df["fp_gpu_name"]) == {"Fake GPU"}


@pytest.mark.usefixtures("fake_cli")
def test_no_torch_note_where_the_study_ran_this_torch(tmp_path):
    source_study(tmp_path, torch_version=metadata.version("torch"))
    result = started_search(tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "measured with torch" not in result.stderr


@pytest.mark.usefixtures("fake_cli")
def test_a_resume_with_the_same_start_from_measures_each_config_once(tmp_path):
    source_study(tmp_path)
    first = started_search(tmp_path, "--trials", "7")
    assert first.exit_code == 0, first.stderr
    assert list(rows(tmp_path)["config_key"]) == BASELINES + STARTED[:1]
    again = started_search(tmp_path)
    assert again.exit_code == 0, again.stderr
    df = rows(tmp_path)
    assert list(df["config_key"]) == BASELINES + STARTED  # the rest, in order, none twice
    assert came_from(df) == [None] * len(BASELINES) + [SOURCE] * len(STARTED)
    # Left out, the study keeps the one it was made with.
    assert started_search(tmp_path, start_from=None).exit_code == 0
    assert len(rows(tmp_path)) == len(BASELINES) + len(STARTED)


@pytest.mark.usefixtures("fake_cli")
def test_a_resume_may_not_change_start_from(tmp_path):
    source_study(tmp_path)
    source_study(tmp_path, name="other-h100")
    assert started_search(tmp_path, "--trials", "2").exit_code == 0
    assert_one_line_error(started_search(tmp_path, start_from="other-h100"),
                          f"study '{STUDY}' was made with --start-from {SOURCE}, asked "
                          "--start-from other-h100: rerun with the same --start-from")
    # A study made without it cannot take one later: its first trials did not follow it.
    assert started_search(tmp_path / "b", "--trials", "2", start_from=None).exit_code == 0
    assert_one_line_error(started_search(tmp_path / "b", start_from=str(tmp_path / SOURCE)),
                          "was made with no --start-from", "rerun with no --start-from")


@pytest.mark.usefixtures("fake_cli")
def test_bad_start_from_is_a_one_line_error(tmp_path):
    source_study(tmp_path, name="vit-h100", model="vit_b_16")
    (tmp_path / "not-a-study").mkdir()
    source_study(tmp_path)
    for given, words in (
            ("nowhere", ["--start-from nowhere: no such study"]),
            (str(tmp_path / "not-a-study"), ["--start-from", "no such file"]),
            (str(tmp_path / SOURCE / PARETO_FILE), ["holds only a study's Pareto-optimal"]),
            ("vit-h100", ["--start-from vit-h100 is a study of vit_b_16, and this search is "
                          "of resnet18"]),
            (STUDY, ["is this study"])):
        if given == STUDY:
            assert started_search(tmp_path, "--trials", "1", start_from=None).exit_code == 0
        assert_one_line_error(started_search(tmp_path, start_from=given), *words)
    assert_one_line_error(started_search(tmp_path, "--start-from", SOURCE),
                          f"--start-from names study '{SOURCE}' twice")


def test_baselines_queued_again_on_a_resume_still_come_before_the_started_configs(tmp_path):
    source_study(tmp_path / "from")
    plan = read_start_from([str(tmp_path / "from" / SOURCE)], tmp_path, "s", WORKLOAD, SPACE)
    started = [s.config.key for s in plan.configs]
    assert started == [key("inductor", 1, "default", True), key("inductor", 8, "default", True)]
    search = Search(make_spec(tmp_path, start_from=plan), FakeRunner(delay_s=5))
    search.on_start = lambda number, config, name: search.abort.set()
    search.run()  # its first baseline abandoned: the others and the started configs wait
    again = Search(make_spec(tmp_path, start_from=plan), FakeRunner())
    again.run()
    baselines = [c.key for c in SPACE.baselines()]
    assert again.runner.calls == baselines + started
    df, _ = files.read(tmp_path / "s")
    assert dict(zip(df["config_key"], came_from(df))) == {
        **dict.fromkeys(baselines), **dict.fromkeys(started, SOURCE)}


def baselines_measured(tmp_path: Path) -> tuple[StartFrom, StudySpec]:
    """A study started from SOURCE whose baselines are measured: its started configs queued."""
    source_study(tmp_path / "from")
    plan = read_start_from([str(tmp_path / "from" / SOURCE)], tmp_path, "s", WORKLOAD, SPACE)
    spec = make_spec(tmp_path, start_from=plan)
    Search(dataclasses.replace(spec, n_trials=len(SPACE.baselines())), FakeRunner()).run()
    return plan, spec


def test_a_started_config_that_a_dead_search_left_running_still_says_where_it_came_from(
        tmp_path):
    plan, spec = baselines_measured(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    fronts = Search(spec, FakeRunner()).fronts
    trial = ask(fronts.of(1))  # the started config queued at batch size 1, taken by a search...
    config = plan.configs[0].config
    assert trial.user_attrs[KEY_ATTR] == config.key
    trial.set_user_attr(CONFIG_ATTR, config.to_dict())
    trial.set_user_attr(OWNER_ATTR, {"host": socket.gethostname(), "pid": dead.pid,
                                     "pid_namespace": pid_namespace()})  # ... that died
    again = Search(spec, FakeRunner())
    again.run()
    assert sorted(again.runner.calls) == sorted(s.config.key for s in plan.configs)
    df, _ = files.read(tmp_path / "s")
    assert dict(zip(df["config_key"], came_from(df)))[config.key] == SOURCE


def test_a_started_config_another_worker_claims_while_its_queued_trial_is_unclaimed_says_so(
        tmp_path):
    # A fleet's worker takes the started config's queued trial (ask), and before it claims it
    # (setting its owner, seconds on a loaded host) another worker's sampler proposes the same
    # config: that one's claim wins, and it measures the config. Its row says where it came from
    # all the same (the queued trial, pruned as its duplicate, has no row).
    plan, spec = baselines_measured(tmp_path)
    other = Search(spec, FakeRunner())
    config = plan.configs[0].config
    taken = ask(other.fronts.of(1))  # the first worker took the queued trial, unclaimed yet
    assert taken.user_attrs[KEY_ATTR] == config.key
    worker = Search(spec, FakeRunner())
    trial, number = worker.claims.ask(worker.fronts.of(1))  # a trial of its sampler's
    assert worker.claims.claim(trial, number, config)
    result = worker.runner.run(TrialRequest(config, spec.workload, spec.protocol),
                               spec.layout.trial_dir(number))
    worker.record(trial, number, result)
    worker.claims.stop_heartbeat()
    number = other.fronts.number(other.fronts.of(1), taken.number)
    assert not other.claims.claim(taken, number, config)  # the first worker steps back
    other.claims.step_back(taken, config)
    worker.export()
    df, _ = files.read(tmp_path / "s")
    assert list(df["config_key"]).count(config.key) == 1
    assert dict(zip(df["config_key"], came_from(df)))[config.key] == SOURCE
