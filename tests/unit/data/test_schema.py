"""Each Parquet column's unit and meaning, in one place (tuner.data.schema.CATALOGUE): in the
files the tuner writes, as Arrow field metadata, and in docs/columns.md, generated from it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.support import ROOT
from tests.support.synthetic import write_study
from tuner.data import column_docs, schema
from tuner.domain.config import TrialConfig

OPTION = TrialConfig("inductor", 1, "default", False, options={"epilogue_fusion": False})


@pytest.mark.parametrize("name", ["trials.parquet", "pareto.parquet"])
def test_the_written_files_hold_each_columns_unit_and_meaning(tmp_path, name):
    study = write_study(tmp_path, "meta", trial_configs=[TrialConfig("eager", 1), OPTION])
    fields = pq.read_schema(study / name)
    latency = fields.field("latency_ms_p50").metadata
    assert latency[b"unit"] == b"ms"
    assert latency[b"description"].startswith(b"median time one request waits")
    assert fields.field("peak_memory_bytes").metadata[b"unit"] == b"bytes"
    assert fields.field("fp_gpu_memory_bytes").metadata[b"unit"] == b"bytes"
    assert fields.field("opt_epilogue_fusion").metadata[b"description"].startswith(
        b"an inductor option the study searched")
    # every column says what it is
    assert all(fields.field(c).metadata and fields.field(c).metadata[b"description"]
               for c in fields.names)


def test_every_column_has_a_meaning_and_integers_a_unit_or_none():
    assert [c.name for c in schema.CATALOGUE] == schema.COLUMNS
    assert all(c.description for c in schema.CATALOGUE)
    assert {c.unit for c in schema.CATALOGUE if c.name.endswith("_bytes")} == {"bytes"}
    assert {c.unit for c in schema.CATALOGUE if c.name.endswith("_ms")
            or "_ms_" in c.name} == {"ms"}


def test_the_committed_column_reference_is_the_generated_one():
    page = (ROOT / "docs" / "columns.md").read_text()
    assert page == column_docs.render(page), "run: python -m tuner.data.column_docs"
    assert "| `latency_ms_p50` | float | ms | median time one request waits" in page


def test_the_generator_checks_and_writes_the_page(tmp_path, monkeypatch):
    page = tmp_path / "columns.md"
    page.write_text("# The Parquet columns\n\nprose\n")
    monkeypatch.setattr(column_docs, "PAGE", page)
    assert column_docs.main(["--check"]) == 1
    assert column_docs.main([]) == 0 and column_docs.main(["--check"]) == 0
    text = page.read_text()
    assert text.startswith("# The Parquet columns\n\nprose\n") and column_docs.END in text
    page.write_text(text.replace("median time one request waits", "something else"))
    assert column_docs.main(["--check"]) == 1

