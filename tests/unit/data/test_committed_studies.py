"""Every study committed under studies/ still loads, shows and recommends: files written by
every earlier schema version stay readable by this tuner."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support import ROOT as REPO
from tuner.cli.app import main
from tuner.data import files, schema, select
from tuner.errors import UserError
from tuner.use.recommend import recommend

ROOT = REPO / "studies"
COMMITTED = sorted(p.parent for p in ROOT.glob("*/trials.parquet"))


def test_the_committed_studies_span_old_schema_versions():
    versions = {files.read(study)[1]["schema_version"] for study in COMMITTED}
    assert {1, 2} <= versions and max(versions) <= schema.SCHEMA_VERSION


@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_a_committed_study_loads_with_every_column_and_its_derived_ones(study):
    trials, meta = files.read(study)
    pareto, _ = files.read(study / "pareto.parquet")
    assert list(trials.columns[:len(schema.COLUMNS)]) == schema.COLUMNS
    ok = trials[trials["status"] == "ok"]
    assert ok["throughput_per_s"].notna().all() and ok["time_to_steady_s"].notna().all()
    assert ok["peak_memory_bytes"].notna().all()
    # The stored Pareto file and the one computed now hold the same trials. A file written
    # before the finalists' medians chose its front on each trial's own p50.
    import pyarrow.parquet as pq

    before = "latency_ms_p50_median" not in pq.read_schema(study / "trials.parquet").names
    rows = trials.assign(latency_ms_p50_repeats=None) if before else trials
    assert sorted(pareto["trial_number"]) == sorted(select.pareto(rows)["trial_number"])


@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_counts_and_byte_sizes_of_a_file_of_any_version_read_as_integers(study):
    trials, _ = files.read(study)
    for name in ("memory_needed_bytes", "peak_memory_bytes", "peak_vram_bytes", "graph_breaks",
                 "recompiles", "batch_size", "trial_number"):
        assert pd.api.types.is_integer_dtype(trials[name]), (name, trials[name].dtype)
    ok = trials[trials["status"] == "ok"]
    assert len(ok.nsmallest(1, "memory_needed_bytes")) == 1  # sorts as numbers


@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_show_and_recommend_read_a_committed_study(study):
    shown = CliRunner().invoke(main, ["show", str(study)])
    assert shown.exit_code == 0, shown.output
    assert "Pareto-optimal configs" in shown.stdout
    trials, _ = files.read(study)
    for batch_size in sorted(set(select.eligible(trials)["batch_size"])):
        try:
            rec = recommend(study, batch_size=int(batch_size))
        except UserError as exc:  # another machine with --strict off never raises; nothing else may
            pytest.fail(f"batch size {batch_size}: {exc}")
        assert rec.measured.latency_ms_p50 > 0


@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_a_committed_study_names_its_storage_without_the_authors_folders(study):
    assert files.read(study)[1]["storage"] == "study.db"


def test_a_new_study_names_its_embedded_storage_relative_to_its_folder(tmp_path):
    from tests.support.specs import make_spec
    from tuner.fake import FakeRunner
    from tuner.study.search import Search

    Search(make_spec(tmp_path), FakeRunner()).run()
    _, meta = files.read(tmp_path / "s")
    assert meta["storage"] == "study.db" and str(tmp_path) not in json.dumps(meta)


def _too_wide(args: list[str], width: int | None) -> list[str]:
    """The lines of ``tuner ARGS`` longer than ``width`` (None: COLUMNS unset, stdout no
    terminal: 120)."""
    out = CliRunner().invoke(main, args, env={"COLUMNS": None if width is None else str(width)})
    assert out.exit_code == 0, out.output
    return [line for line in out.stdout.splitlines() if len(line) > (width or 120)]


@pytest.mark.parametrize("width", [None, 120, 100])
@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_show_of_a_committed_study_fits_the_terminal(study, width):
    assert _too_wide(["show", str(study)], width) == []
    if width == 120:  # every trial's table, and the importances
        for view in (["--all"], ["--importance"]):
            assert _too_wide(["show", str(study), *view], width) == [], view


@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_recommend_of_a_committed_study_fits_120_columns(study):
    trials, _ = files.read(study)
    for batch_size in sorted(set(select.eligible(trials)["batch_size"])):
        assert _too_wide(["recommend", str(study), "--batch-size", str(batch_size)], 120) == []


def test_compare_of_the_h100_and_h200_studies_fits_120_columns():
    pair = [str(ROOT / f"{gpu}-resnet50-bf16-extended") for gpu in ("h100", "h200")]
    assert _too_wide(["compare", *pair], 120) == []
    assert _too_wide(["compare", str(ROOT / "h200-resnet18"), str(ROOT / "cpu-resnet18")],
                     120) == []
