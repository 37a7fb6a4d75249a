"""What optuna-dashboard shows of a study: each trial's key results as flat numbers, and no
attribute longer than the 1,024 characters the dashboard cuts it at."""

from __future__ import annotations

import json
import shutil
from typing import Any

import optuna
import pytest

from tests.support import ROOT
from tests.support.dashboard import get
from tests.support.specs import make_spec
from tuner.data import files, select
from tuner.domain.records import Status
from tuner.fake import FakeRunner
from tuner.study.record import SUMMARY_COLUMNS, is_measured
from tuner.study.search import Search
from tuner.study.spec import StudySpec
from tuner.study.storage import KEY_ATTR, MESSAGE_ATTR, RESULT_ATTR, STATUS_ATTR, join_spec

DASHBOARD_LIMIT = 1024  # optuna_dashboard._serializer.MAX_ATTR_LENGTH
FAILING = "inductor|default|dynamic=True|bs=8"  # the one failure of the 6 configs
NUMBERS = ("latency_ms_p50", "latency_ms_p99", "stream_ms_p50", "speedup_vs_eager",
           "peak_memory_bytes")
COMMITTED = sorted((ROOT / "studies").glob("*/study.db"))


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[StudySpec, list[optuna.Study]]:
    """A finished fake search of 6 configs, one failed, its finalists measured again as often as
    --confirm auto allows (noisy processes), and its Optuna studies (the study, then one per
    batch size) loaded from the storage as the dashboard loads them."""
    spec = make_spec(tmp_path_factory.mktemp("studies"), confirm_repeats="auto")
    Search(spec, FakeRunner(fail={FAILING: Status.COMPILE_ERROR}, jitter=0.3)).run()
    names = [spec.name] + [f"{spec.name}:bs{bs}" for bs in spec.space.batch_sizes]
    return spec, [optuna.load_study(study_name=name, storage=spec.storage_url) for name in names]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_no_attribute_of_a_trial_or_the_study_is_cut_by_the_dashboard(searched):
    spec, studies = searched
    df, _ = files.read(spec.directory)
    assert df["latency_ms_p50_repeats"].dropna().map(len).max() == 7  # six repeats kept
    trials = [t for study in studies for t in study.get_trials()]
    assert sum(t.user_attrs.get(STATUS_ATTR) is not None for t in trials) == 6
    attrs = [(t.number, k, v) for t in trials for k, v in t.user_attrs.items()]
    attrs += [(study.study_name, k, v) for study in studies for k, v in study.user_attrs.items()]
    sizes = {(n, k): len(json.dumps(v)) for n, k, v in attrs}
    assert {at: size for at, size in sizes.items() if size > DASHBOARD_LIMIT} == {}
    assert all(RESULT_ATTR not in t.user_attrs for t in trials)  # the record is kept elsewhere


def test_each_measured_trial_shows_its_key_results_as_flat_numbers(searched):
    spec, studies = searched
    measured = [t for study in studies for t in study.get_trials() if is_measured(t)]
    ok = [t for t in measured if t.user_attrs[STATUS_ATTR] == Status.OK.value]
    assert len(ok) == 5
    for t in ok:
        assert all(is_number(t.user_attrs.get(name)) for name in NUMBERS), t.user_attrs
        assert t.user_attrs["correct"] is True
        if not t.user_attrs[KEY_ATTR].startswith("eager"):
            assert is_number(t.user_attrs["compile_s_cold"])
            assert t.user_attrs["graph_breaks"] == 0 and t.user_attrs["recompiles"] == 0
            # counts as the Parquet holds them: 0, not 0.0
            assert type(t.user_attrs["graph_breaks"]) is type(t.user_attrs["recompiles"]) is int
        assert type(t.user_attrs["peak_memory_bytes"]) is int
    # The same numbers as the Parquet file. The speedup is against eager as the search measured
    # it; the Parquet's, once the finalists were measured again, is on their medians (docs/dashboard.md).
    rows = files.read(spec.directory)[0].set_index("config_key")
    for t in ok:
        row = rows.loc[t.user_attrs[KEY_ATTR]]
        for name in SUMMARY_COLUMNS:
            if name in t.user_attrs and name != "speedup_vs_eager":
                assert t.user_attrs[name] == pytest.approx(row[name])
        eager = rows[(rows["backend"] == "eager") & (rows["batch_size"] == row["batch_size"])
                     & (rows["status"] == Status.OK.value)]
        assert t.user_attrs["speedup_vs_eager"] == pytest.approx(
            eager["latency_ms_p50"].min() / row["latency_ms_p50"])
    failed = next(t for t in measured if t.user_attrs[STATUS_ATTR] == Status.COMPILE_ERROR.value)
    assert not set(NUMBERS) & set(failed.user_attrs)  # nothing made up for a failure
    # why it failed, where plain Optuna and the dashboard see it; none on a trial that is ok
    failed_row = rows.loc[failed.user_attrs[KEY_ATTR]]
    assert failed.user_attrs[MESSAGE_ATTR] == " ".join(failed_row["message"].split())[:1000]
    assert failed.user_attrs[MESSAGE_ATTR]
    assert not any(MESSAGE_ATTR in t.user_attrs for t in measured
                   if t.user_attrs[STATUS_ATTR] == Status.OK.value)


def test_the_dashboard_app_shows_sortable_results_and_no_cut_attribute(searched):
    import optuna_dashboard

    spec, studies = searched
    app = optuna_dashboard.wsgi(spec.storage_url)
    listed = {s["study_name"]: s["study_id"] for s in get(app, "/api/studies")["study_summaries"]}
    assert sorted(listed) == sorted(study.study_name for study in studies)
    for study in studies[1:]:  # the trials live in the studies of the batch sizes
        detail = get(app, f"/api/studies/{listed[study.study_name]}")
        shown = [a for t in detail["trials"] for a in t["user_attrs"]] + detail["user_attrs"]
        assert max(len(a["value"]) for a in shown) < DASHBOARD_LIMIT  # nothing reached the cut
        sortable = {a["key"] for a in detail["union_user_attrs"] if a["sortable"]}
        assert set(NUMBERS) <= sortable
        by_number = {t["number"]: {a["key"]: a["value"] for a in t["user_attrs"]}
                     for t in detail["trials"]}
        ok = [t for t in study.get_trials() if t.user_attrs.get(STATUS_ATTR) == Status.OK.value]
        assert ok and all(float(by_number[t.number]["latency_ms_p50"]) > 0 for t in ok)


def test_the_dashboard_shows_each_batch_sizes_front_as_the_tuner_does(searched):
    """Each batch size's study, opened in optuna-dashboard, has the tuner's Pareto set of that
    batch size as its best trials, on each trial's own p50 (what Optuna was told; the tuner's
    is on the finalists' medians once they are measured again); the failed trial is on no
    front."""
    import optuna_dashboard

    spec, studies = searched
    df, _ = files.read(spec.directory)
    app = optuna_dashboard.wsgi(spec.storage_url)
    listed = {s["study_name"]: s["study_id"] for s in get(app, "/api/studies")["study_summaries"]}
    for bs in spec.space.batch_sizes:
        detail = get(app, f"/api/studies/{listed[f'{spec.name}:bs{bs}']}")
        best = sorted(t["trial_id"] for t in detail["best_trials"])
        as_told = df[df["batch_size"] == bs].assign(latency_ms_p50_repeats=None)
        front = select.pareto(as_told)
        assert best == sorted(front["trial_number"]) and best
        assert {t["trial_id"] for t in detail["trials"]} >= set(df[df["batch_size"] == bs][
            "trial_number"])  # the trial numbers of the files are the dashboard's trial ids
    assert FAILING not in set(select.pareto(df)["config_key"])


@pytest.mark.parametrize("db", COMMITTED, ids=[p.parent.name for p in COMMITTED])
def test_a_study_made_before_the_record_moved_still_exports_and_resumes(db, tmp_path):
    (tmp_path / db.parent.name).mkdir()
    shutil.copy(db, tmp_path / db.parent.name / db.name)
    spec = join_spec(db.parent.name, None, root=tmp_path, confirm_repeats=0)
    if any(":bs" in name for name in optuna.get_all_study_names(spec.storage_url)):
        # a study this tuner made (make demo's, say): one Optuna study per batch size
        pytest.skip(f"{db.parent.name} was made by this tuner, per batch size")
    old = optuna.load_study(study_name=spec.name, storage=spec.storage_url)
    before = {t.user_attrs[KEY_ATTR] for t in old.get_trials() if RESULT_ATTR in t.user_attrs}
    if not before and any(RESULT_ATTR in t.system_attrs for t in old.get_trials()):
        pytest.skip(f"{db.parent.name} keeps its records where this tuner writes them")
    assert before  # the record is the old user attribute there
    search = Search(spec, FakeRunner())
    summary = search.run()
    assert not before & set(search.runner.calls)  # no config measured again
    assert before <= set(summary.trials["config_key"])  # every old trial exported
