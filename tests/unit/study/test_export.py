"""A search keeps each finished trial's row between the exports after each trial: the files it
writes are those a fresh export of the same storage writes, and a record that changed gets a
new row."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.specs import WORKLOAD, make_spec
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialResult
from tuner.fake import FakeRunner
from tuner.study.export import TrialRows, study_frame
from tuner.study.search import Search


def test_the_files_a_search_writes_are_those_a_fresh_export_makes(tmp_path):
    spec = make_spec(tmp_path)
    search = Search(spec, FakeRunner())
    search.run()
    written = pd.read_parquet(spec.layout.trials_file)
    fresh = study_frame(search.fronts, spec.name, spec.workload, spec.layout)
    assert len(written) == len(fresh) > 3
    # the rows it kept served (not made again at the last export)...
    assert len(search._rows._made) == len(written)
    # ...and hold what a fresh export holds, cell for cell
    pd.testing.assert_frame_equal(
        written.drop(columns=["tuner_overhead_s"]).reset_index(drop=True),
        pd.read_parquet(_written(fresh, spec)).drop(columns=["tuner_overhead_s"])
        .reset_index(drop=True))


def _written(df: pd.DataFrame, spec) -> str:
    from tuner.data import files

    path = spec.root / "fresh.parquet"
    files.write(df, path, {})
    return str(path)


def test_a_kept_row_serves_only_while_the_record_is_the_same():
    rows = TrialRows()
    config = TrialConfig("eager", 1)
    ok = TrialResult(status=Status.OK, latency_ms_p50=2.0).to_dict()
    result, row = rows.row("s", 0, config, WORKLOAD, ok)
    assert row["latency_ms_p50"] == 2.0 and result.latency_ms_p50 == 2.0
    row["latency_ms_p50"] = 99.0  # the caller's copy: the kept row is not changed
    assert rows.row("s", 0, config, WORKLOAD, dict(ok))[1]["latency_ms_p50"] == 2.0
    changed = {**ok, "latency_ms_p50": 3.0}
    assert rows.row("s", 0, config, WORKLOAD, changed)[1]["latency_ms_p50"] == 3.0
    renamed = rows.row("t", 0, config, WORKLOAD, changed)[1]
    assert renamed["study"] == "t"


@pytest.mark.parametrize("field", ["status", "message"])
def test_a_record_changed_in_place_is_not_served_from_the_kept_copy(field):
    rows = TrialRows()
    config = TrialConfig("eager", 1)
    record = TrialResult(status=Status.OK, latency_ms_p50=2.0).to_dict()
    rows.row("s", 0, config, WORKLOAD, record)
    record[field] = "timeout" if field == "status" else "changed"
    assert rows.row("s", 0, config, WORKLOAD, record)[1][field] == record[field]


def test_the_file_holds_the_memory_a_config_needs_at_most_beside_what_it_serves_in(tmp_path):
    # peak_vram_bytes is the steady state; what --max-vram-gb bounds (compiling included) was in
    # no column, so a pandas filter on peak_vram_bytes let through a config recommend refused.
    from tests.support.synthetic import configs, write_study
    from tuner.use.recommend import recommend

    study = write_study(tmp_path, "mem", trial_configs=configs([1], ["eager", "inductor:default"]),
                        changes={"inductor:default": {"vram_bytes_compile_reserved": 3 * 2**30}})
    d = pd.read_parquet(study / "trials.parquet").set_index("label")
    assert d.loc["inductor:default", "memory_needed_bytes"] == 3 * 2**30
    assert d.loc["inductor:default", "peak_vram_bytes"] < 2**30
    assert d.loc["eager", "memory_needed_bytes"] == d.loc["eager", "peak_memory_bytes"]
    rec = recommend(study, batch_size=1, max_vram_gb=2)
    assert rec.config.label == "eager"
    assert rec.to_dict()["measured"]["memory_needed_bytes"] == d.loc["eager", "memory_needed_bytes"]


@pytest.mark.parametrize("timer", ["cuda_event", "perf_counter"])
def test_a_record_of_a_tuner_that_timed_back_to_back_only_keeps_its_stream_figures(timer):
    # Reading an old file takes its stream times from its latency; exporting the same study
    # again from study.db (a resume) dropped them, and its items/s with them.
    import dataclasses

    from tuner.data.rows import frame, trial_row
    from tuner.domain.records import TrialRequest

    config = TrialConfig("inductor", 8, "default", False)
    new = FakeRunner().run(TrialRequest(config, WORKLOAD), None)
    old = dataclasses.replace(new, timer=timer, stream_timer=None, stream_ms_p50=None,
                              stream_ms_p90=None, stream_ms_p99=None, stream_ms_iqr=None)
    row = trial_row("s", 0, config, WORKLOAD, old)
    assert (row["stream_ms_p50"], row["stream_ms_p99"]) == (old.latency_ms_p50, old.latency_ms_p99)
    assert frame([row])["throughput_per_s"].iloc[0] == pytest.approx(8e3 / old.latency_ms_p50)
    # A record timed one request at a time keeps its own stream figures.
    assert trial_row("s", 0, config, WORKLOAD, new)["stream_ms_p50"] == new.stream_ms_p50
    assert new.timer not in ("cuda_event", "perf_counter")


def test_whole_numbers_read_back_as_integers_where_a_failed_trial_leaves_gaps(tmp_path):
    from tests.support.synthetic import write_study

    study = write_study(tmp_path, "gaps", fail={"inductor:default": Status.COMPILE_ERROR})
    d = pd.read_parquet(study / "trials.parquet")  # as docs/columns.md has a user read it
    failed = d.status == "compile_error"
    assert failed.any() and (~failed).any()
    for column in ("graph_breaks", "recompiles", "peak_vram_bytes"):
        assert str(d[column].dtype) == "Int64", column  # not floats such as 3.0
        compiled = ~failed & (d.backend != "eager")  # eager has no graph breaks
        assert d.loc[failed, column].isna().all() and d.loc[compiled, column].notna().all()


# -- what the configs are named against ---------------------------------------------------------
def _options_spec(tmp_path, **kwargs):
    """A study that searches epilogue_fusion (off first) with inductor's default mode."""
    from tuner.domain.space import build_space

    space = build_space(device="cuda", batch_sizes=[1], backends=["eager", "inductor"],
                        modes=["default"], dynamic=[False], options={
                            "epilogue_fusion": ["false", "true"]},
                        available_backends=["eager", "inductor"], available_modes=["default"],
                        available_options={"epilogue_fusion": bool})
    return make_spec(tmp_path, space=space, **kwargs)


def test_a_search_records_its_option_defaults_and_names_its_configs_by_them(tmp_path):
    # A torch whose inductor leaves epilogue fusion off (2.14.1 turns it on): its configs are
    # named by what differs from that, in the files, the report and the progress alike.
    import dataclasses

    from tuner.data import files
    from tuner.domain.naming import OptionDefaults
    from tuner.study.storage import join_spec

    off = OptionDefaults.from_dict({"default": {"epilogue_fusion": False}})
    events = []
    Search(_options_spec(tmp_path, option_defaults=off), FakeRunner(),
           on_trial=events.append).run()
    trials, meta = files.read(tmp_path / "s")
    assert meta["option_defaults"] == {"default": {"epilogue_fusion": False}}
    by_key = dict(zip(trials["config_key"], trials["name"]))
    assert by_key["inductor|default|dynamic=False|bs=1|opt.epilogue_fusion=False"] == "default"
    assert by_key["inductor|default|dynamic=False|bs=1|opt.epilogue_fusion=True"] == \
        "default +epilogue_fusion"
    assert {e.name for e in events} == {"eager", "default", "default +epilogue_fusion"}
    # Resumed under another torch, or joined by a worker, the study keeps what it recorded.
    on = OptionDefaults.from_dict({"default": {"epilogue_fusion": True}})
    again = Search(dataclasses.replace(_options_spec(tmp_path), option_defaults=on),
                   FakeRunner())
    assert again.spec.option_defaults == off
    assert join_spec("s", None, tmp_path).option_defaults == off


def test_a_study_made_before_the_record_is_named_by_the_defaults_known(tmp_path):
    # No record (tuner before 0.3.0, or a spec that carries none): epilogue fusion's default
    # is on in every torch the tuner has met, so off is what differs.
    from tuner.data import files

    Search(_options_spec(tmp_path), FakeRunner()).run()
    trials, meta = files.read(tmp_path / "s")
    assert "option_defaults" not in meta
    assert sorted(trials["name"]) == ["default", "default -epilogue_fusion", "eager"]
