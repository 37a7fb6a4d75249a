"""Every compiled row says what its first call started from (``cache_start``), so that a
``compile_s_cold`` from a warm cache is never taken for a cold compile. The real labels of a
cold, a warm and an artifacts start are checked on real compiles in
tests/unit/use/test_warm_start.py."""

from __future__ import annotations

import pyarrow.parquet as pq

from tests.support.rows import EAGER1, frame, inductor, ok
from tuner.data import files, schema
from tuner.domain import layout
from tuner.render.study import notes
from tuner.runtime import artifacts


def _caches(tmp_path, monkeypatch):
    inductor_dir, triton_dir = tmp_path / "inductor", tmp_path / "triton"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_dir))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton_dir))
    return inductor_dir, triton_dir


def test_empty_or_missing_caches_are_a_cold_start(tmp_path, monkeypatch):
    inductor_dir, _ = _caches(tmp_path, monkeypatch)
    assert artifacts.caches_hold_entries() is False  # neither folder exists yet
    (inductor_dir / "fxgraph" / "ab").mkdir(parents=True)  # folders, no entry
    assert artifacts.caches_hold_entries() is False
    assert artifacts.cache_start(held_entries=False, loaded_artifacts=False) == "cold"


def test_a_cache_holding_any_entry_is_a_warm_start(tmp_path, monkeypatch):
    for folder in _caches(tmp_path, monkeypatch):  # an inductor entry, or a triton kernel
        entry = folder / "xy" / "entry"
        entry.parent.mkdir(parents=True)
        entry.write_text("an earlier trial's kernel")
        assert artifacts.caches_hold_entries() is True
        entry.unlink()
    assert artifacts.cache_start(held_entries=True, loaded_artifacts=False) == "warm"
    # Artifacts loaded: the start is theirs, whatever the caches held.
    assert artifacts.cache_start(held_entries=False, loaded_artifacts=True) == "artifacts"
    assert artifacts.cache_start(held_entries=True, loaded_artifacts=True) == "artifacts"


def test_the_column_round_trips_and_an_older_file_without_it_loads_empty(tmp_path):
    assert schema.SCHEMA.field("cache_start").type == "string"
    cold, warm = ok(8.0), ok(7.0, compile_s=2.0)
    cold.cache_start, warm.cache_start = "cold", "warm"
    files.export(tmp_path, frame((EAGER1, ok(10.0)), (inductor(1), cold),
                                 (inductor(1, "reduce-overhead"), warm)), {"study": "s"})
    back, _ = files.read(tmp_path)
    started = back.set_index("label")["cache_start"]
    assert started["inductor:default"] == "cold" and started["inductor:reduce-overhead"] == "warm"
    assert started.isna()["eager"]  # eager compiles nothing

    table = pq.read_table(tmp_path / layout.TRIALS_FILE)
    pq.write_table(table.drop_columns(["cache_start"]), tmp_path / "old.parquet")
    old, _ = files.read(tmp_path / "old.parquet")
    assert "cache_start" in old and old["cache_start"].isna().all() and len(old) == 3


def test_show_says_when_compile_seconds_are_not_a_cold_compile(tmp_path):
    rows = frame((inductor(1), ok(8.0)), (inductor(1, "reduce-overhead"), ok(7.0)),
                 (inductor(8), ok(9.0)))
    rows["cache_start"] = ["cold", "warm", "artifacts"]
    said = [notes(row) for _, row in rows.iterrows()]
    assert "cache" not in said[0] and "artifacts" not in said[0]
    assert "compile s from a warm cache" in said[1]
    assert "compile s from saved artifacts" in said[2]

