"""The Parquet product: typed schema with units, fingerprints, Pareto sets, atomic writes, and
one-line errors for files that are not tuner studies."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.rows import EAGER1, EAGER8, FINGERPRINT, WORKLOAD, failed, frame, inductor, ok
from tuner.data import files, schema, select
from tuner.data.derive import serving_memory
from tuner.domain import layout
from tuner.domain.records import FINGERPRINT_FIELDS, Status, TrialResult
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload, validate
from tuner.errors import UserError

# -- schema -------------------------------------------------------------------------------------

def test_measurement_columns_carry_their_unit():
    for name in ("latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "compile_s_cold",
                 "time_to_steady_s", "peak_vram_bytes", "peak_memory_bytes", "throughput_per_s",
                 "host_rss_bytes_peak", "wall_s", "break_even_calls", "speedup_vs_eager"):
        assert name in schema.COLUMNS
    unit = re.compile(r"(^|_)(ms|s|bytes|calls|per_s|pct)(_|$)")
    for name in schema.COLUMNS:
        measures = r"(^|_)(latency|compile|warmup|time|memory|vram|rss|wall|import|build|measure)_"
        if re.search(measures, name) and schema.SCHEMA.field(name).type != pa.string():
            assert unit.search(name), f"{name} has no unit in its name"


def test_a_records_dict_is_plain_data_of_its_own_and_round_trips():
    import dataclasses

    from tuner.domain.records import Status, TrialResult

    r = TrialResult(status=Status.OK, latency_ms_p50=1.5, schedule_latency_ms=[1.0, 2.0],
                    recompile_reasons=["x"], fingerprint={"gpu": "H200", "nested": {"a": [1]}})
    data = r.to_dict()
    assert data == {**dataclasses.asdict(r), "status": "ok"}
    assert TrialResult.from_dict(json.loads(json.dumps(data))) == r
    data["schedule_latency_ms"].append(3.0)
    data["fingerprint"]["nested"]["a"].append(2)  # the caller's to change: the record keeps its own
    assert r.schedule_latency_ms == [1.0, 2.0] and r.fingerprint["nested"] == {"a": [1]}


def test_workload_with_a_shape_schedule_round_trips_and_is_validated():
    import json

    w = Workload(model="resnet18", shape_schedule=(1, 8, 32, 8))
    assert w.to_dict()["shape_schedule"] == [1, 8, 32, 8]
    assert Workload.from_dict(json.loads(json.dumps(w.to_dict()))) == w
    assert "shape_schedule" not in WORKLOAD.to_dict()  # studies made before it resume unchanged
    assert Workload.from_dict(WORKLOAD.to_dict()).shape_schedule == ()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(UserError, match="shape schedule entry"):
            validate(Workload(model="resnet18", shape_schedule=(1, bad)))


def test_schedule_columns_round_trip_and_old_files_load_them_empty(tmp_path):
    for name in ("schedule_recompiles", "schedule_recompile_s", "schedule_total_s",
                 "schedule_batch_sizes", "schedule_latency_ms"):
        assert name in schema.COLUMNS
    assert schema.SCHEMA.field("schedule_batch_sizes").type == pa.list_(pa.int64())
    replayed = ok(8.0)
    replayed.schedule_recompiles, replayed.schedule_recompile_s = 2, 1.5
    replayed.schedule_total_s = 2.0
    replayed.schedule_batch_sizes, replayed.schedule_latency_ms = [1, 2, 4], [0.1, 0.2, 0.4]
    files.export(tmp_path, frame((EAGER1, ok(10.0)), (inductor(1), replayed)), {"study": "s"})
    back, _ = files.read(tmp_path)
    row = back[back["backend"] == "inductor"].iloc[0]
    assert row["schedule_recompiles"] == 2 and list(row["schedule_batch_sizes"]) == [1, 2, 4]
    assert list(row["schedule_latency_ms"]) == [0.1, 0.2, 0.4]

    table = pq.read_table(tmp_path / layout.TRIALS_FILE)  # a file written before the columns
    old = table.drop([n for n in table.schema.names if n.startswith("schedule_")])
    pq.write_table(old, tmp_path / "old.parquet")
    back, _ = files.read(tmp_path / "old.parquet")
    assert back["schedule_recompiles"].isna().all() and len(back) == 2


def test_written_file_has_schema_version_and_fingerprint_on_rows_and_metadata(tmp_path):
    df = frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(8.0)),
               (inductor(1, "reduce-overhead"), failed()))
    files.export(tmp_path, df, {"study": "s", "workload": WORKLOAD.to_dict()})

    for name in (layout.TRIALS_FILE, layout.PARETO_FILE):
        table = pq.read_table(tmp_path / name)
        assert table.schema.names == schema.COLUMNS
        assert table.schema.field("latency_ms_p50").type == pa.float64()
        assert table.schema.field("batch_size").type == pa.int64()
        meta = table.schema.metadata
        assert meta[b"tuner.schema_version"] == str(schema.SCHEMA_VERSION).encode()

    back, meta = files.read(tmp_path / layout.TRIALS_FILE)
    assert len(back) == 3 and (back["schema_version"] == schema.SCHEMA_VERSION).all()
    for field in FINGERPRINT_FIELDS:  # failed rows too: every row says where it was measured
        assert (back[f"fp_{field}"] == FINGERPRINT[field]).all(), field
    assert meta["fingerprints"] == [FINGERPRINT]
    assert meta["study"] == "s" and meta["workload"]["model"] == "resnet18"


def test_read_of_a_study_folder_means_its_trials_file(tmp_path):
    df = frame((EAGER1, ok(10.0)))
    files.export(tmp_path, df, {"study": "s"})
    back, _ = files.read(tmp_path)
    assert list(back["config_key"]) == ["eager|bs=1"]


def test_failed_trials_keep_status_message_and_stderr(tmp_path):
    df = frame((EAGER1, ok(10.0)), (inductor(1), failed(Status.OOM)))
    files.export(tmp_path, df, {"study": "s"})
    back, _ = files.read(tmp_path)
    row = back.set_index("config_key").loc[inductor(1).key]
    assert row["status"] == "oom" and row["message"] == "it broke"
    assert row["stderr_tail"] == "Traceback ..."


# -- derived columns ----------------------------------------------------------------------------

def test_speedup_vs_eager_and_break_even_calls():
    df = frame((EAGER1, ok(10.0, compile_s=0.0, warmup_s=0.2)),
               (inductor(1), ok(8.0, compile_s=15.0, warmup_s=0.2)),  # 2 ms saved per call
               (inductor(1, "max-autotune"), ok(12.5)),  # slower than eager: never pays back
               (EAGER8, ok(40.0, compile_s=0.0)), (inductor(8), ok(20.0, compile_s=9.0, warmup_s=1.0)),
               (inductor(8, "reduce-overhead"), failed()))
    rows = df.set_index("config_key")
    assert rows.loc[inductor(1).key, "speedup_vs_eager"] == pytest.approx(1.25)
    assert rows.loc[inductor(1).key, "break_even_calls"] == pytest.approx(15.2e3 / 2.0)
    assert rows.loc[inductor(1, "max-autotune").key, "speedup_vs_eager"] == pytest.approx(0.8)
    assert math.isnan(rows.loc[inductor(1, "max-autotune").key, "break_even_calls"])
    # Each batch size is compared with eager at the same batch size.
    assert rows.loc[inductor(8).key, "speedup_vs_eager"] == pytest.approx(2.0)
    assert rows.loc[inductor(8).key, "break_even_calls"] == pytest.approx(10e3 / 20.0)
    assert rows.loc[EAGER8.key, "speedup_vs_eager"] == pytest.approx(1.0)
    assert math.isnan(rows.loc[EAGER8.key, "break_even_calls"])
    assert math.isnan(rows.loc[inductor(8, "reduce-overhead").key, "speedup_vs_eager"])
    assert rows.loc[inductor(1).key, "throughput_per_s"] == pytest.approx(125.0)
    assert rows.loc[inductor(1).key, "time_to_steady_s"] == pytest.approx(15.2)


def test_speedup_vs_eager_is_against_eager_in_the_same_precision():
    def at(backend: str, dtype: str, bs: int = 1, channels_last: bool | None = None):
        mode, dynamic = (None, None) if backend == "eager" else ("default", False)
        return TrialConfig(backend, bs, mode, dynamic, dtype=dtype, channels_last=channels_last)

    df = frame((at("eager", "float32"), ok(10.0)), (at("eager", "bfloat16"), ok(4.0)),
               (at("eager", "float16", channels_last=True), ok(3.0)),
               (at("eager", "float16", channels_last=False), ok(6.0)),
               (at("inductor", "float32"), ok(8.0)), (at("inductor", "bfloat16"), ok(2.0)),
               (at("inductor", "float16", channels_last=False), ok(1.5)),
               (at("inductor", "bfloat16", bs=8), ok(5.0)))
    speedup = df.set_index("config_key")["speedup_vs_eager"]
    # float32 against eager float32, not the faster bfloat16 eager: compiling gained 1.25x.
    assert speedup[at("inductor", "float32").key] == pytest.approx(10.0 / 8.0)
    assert speedup[at("inductor", "bfloat16").key] == pytest.approx(4.0 / 2.0)
    # The fastest eager of the precision, whichever its memory format.
    assert speedup[at("inductor", "float16", channels_last=False).key] == pytest.approx(3.0 / 1.5)
    # No eager row of that precision at that batch size: no speedup, not another's.
    assert math.isnan(speedup[at("inductor", "bfloat16", bs=8).key])


def test_no_speedup_without_a_successful_eager_row():
    df = frame((EAGER1, failed(Status.CRASH)), (inductor(1), ok(8.0)))
    assert df["speedup_vs_eager"].isna().all() and df["break_even_calls"].isna().all()


def test_memory_objective_is_device_memory_on_cuda_and_rss_on_cpu():
    on_gpu = ok(5.0, vram=123)
    on_cpu = TrialResult(status=Status.OK, latency_ms_p50=5.0, host_rss_bytes_peak=456)
    assert serving_memory(on_gpu.vram_bytes_steady_reserved, on_gpu.host_rss_bytes_peak) == (123, "cuda_reserved")
    assert serving_memory(on_cpu.vram_bytes_steady_reserved, on_cpu.host_rss_bytes_peak) == (456, "host_max_rss")


# -- Pareto -------------------------------------------------------------------------------------

def synthetic() -> pd.DataFrame:
    rows = [  # label, batch size, p50 ms, memory bytes, warm-up s, status, correct
        ("eager", 1, 10.0, 100, 0.0, "ok", True),
        ("fast", 1, 8.0, 100, 15.0, "ok", True),
        ("fast-twin", 1, 8.0, 100, 15.0, "ok", True),  # ties are not domination
        ("dominated", 1, 9.0, 120, 16.0, "ok", True),  # worse than "fast" on every objective
        ("lean", 1, 12.0, 50, 20.0, "ok", None),  # not checked: not vouched for, not eligible
        ("failed", 1, 1.0, 10, 0.0, "compile_error", None),
        ("wrong", 1, 1.0, 10, 0.0, "ok", False),
        ("unmeasured", 1, None, 100, 1.0, "ok", True),
        # At batch size 8 this row would be dominated by "fast", but only its own batch counts.
        ("bs8", 8, 12.0, 150, 16.0, "ok", True),
        ("bs8-dominated", 8, 13.0, 150, 16.0, "ok", True),
    ]
    return pd.DataFrame(rows, columns=["label", "batch_size", *select.PARETO_OBJECTIVES, "status",
                                       "correct"])


def test_pareto_keeps_non_dominated_ok_rows_per_batch_size():
    front = select.pareto(synthetic())
    assert sorted(front[front["batch_size"] == 1]["label"]) == ["eager", "fast", "fast-twin"]
    assert list(front[front["batch_size"] == 8]["label"]) == ["bs8"]
    assert list(front["batch_size"]) == sorted(front["batch_size"])  # sorted by batch, latency


@pytest.mark.parametrize("chunk", [1, 3, 256])
def test_pareto_domination_is_pairwise_over_every_chunk_of_rows(chunk):
    # Whole arrays a chunk at a time (select._dominated) must say what the definition says, pair
    # by pair: no worse in every objective and better in one; equal rows dominate neither.
    import itertools

    import numpy as np

    values = np.array(list(itertools.product([1.0, 2.0, 3.0], repeat=3)) * 2)  # ties included
    expected = [any((o <= v).all() and (o < v).any() for o in values) for v in values]
    assert list(select._dominated(values, chunk=chunk)) == expected
    assert sum(not d for d in expected) == 2  # (1, 1, 1) twice


def test_pareto_of_nothing_is_empty():
    assert select.pareto(synthetic().iloc[:0]).empty
    df = synthetic()
    assert select.pareto(df[df["status"] != "ok"]).empty


# -- writing and reading ------------------------------------------------------------------------

def test_write_is_atomic_and_leaves_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / layout.TRIALS_FILE
    files.write(frame((EAGER1, ok(10.0))), path, {"study": "s"})
    assert [p.name for p in tmp_path.iterdir()] == [layout.TRIALS_FILE]

    def crash_halfway(table, where, **kwargs):
        with open(where, "wb") as f:
            f.write(b"PAR1 half a file")
        raise KeyboardInterrupt  # the user pressed Ctrl-C mid-write

    monkeypatch.setattr(files.atomic.pq, "write_table", crash_halfway)
    with pytest.raises(KeyboardInterrupt):
        files.write(frame((EAGER1, ok(99.0)), (inductor(1), ok(5.0))), path, {"study": "s"})
    assert [p.name for p in tmp_path.iterdir()] == [layout.TRIALS_FILE]
    back, _ = files.read(path)  # the old file, whole
    assert list(back["latency_ms_p50"]) == [10.0]


def test_a_write_removes_what_a_killed_write_left_but_not_a_temp_file_being_written(tmp_path):
    # A SIGKILL between writing the temporary file and renaming it left .trials.parquet.*.tmp
    # in the study folder for good: cleaned only where write() itself raised.
    import os
    import time

    path = tmp_path / layout.TRIALS_FILE
    old, live = tmp_path / f".{path.name}.k1ll3d00.tmp", tmp_path / f".{path.name}.wr1t1ng0.tmp"
    other = tmp_path / f".{layout.PARETO_FILE}.k1ll3d00.tmp"  # another file's: left to its write
    mine = tmp_path / ".notes.tmp"  # not the tuner's: never touched
    for leftover in (old, live, other, mine):
        leftover.write_bytes(b"PAR1 half a file")
    long_ago = time.time() - files.STALE_TEMP_S - 60
    for leftover in (old, other, mine):
        os.utime(leftover, (long_ago, long_ago))
    files.write(frame((EAGER1, ok(10.0))), path, {"study": "s"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [layout.TRIALS_FILE, live.name, other.name, mine.name])
    files.write(frame((EAGER1, ok(10.0))), tmp_path / layout.PARETO_FILE, {"study": "s"})
    assert not other.exists() and live.exists() and mine.exists()


def test_a_write_is_on_disk_before_its_rename(tmp_path, monkeypatch):
    import os

    done: list[str] = []
    synced: list[int] = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(files.atomic.os, "fsync",
                        lambda fd: done.append("fsync") or synced.append(fd) or fsync(fd))
    monkeypatch.setattr(files.atomic.os, "replace", lambda a, b: done.append("rename") or replace(a, b))
    files.write(frame((EAGER1, ok(10.0))), tmp_path / layout.TRIALS_FILE, {"study": "s"})
    assert done == ["fsync", "rename"]
    with pytest.raises(OSError):  # and its descriptor closed
        os.fstat(synced[0])


def test_a_study_whose_front_cannot_be_written_keeps_both_files_of_one_moment(tmp_path,
                                                                              monkeypatch):
    # Killed (or the disk full) while the front was written: trials.parquet was already the
    # new one, pareto.parquet the old, until the next search wrote them again.
    before = frame((EAGER1, ok(10.0)))
    files.export(tmp_path, before, {"study": "s"})
    write_table, writes = pq.write_table, []

    class Killed(BaseException):
        """Stands in for a kill: not an OSError, nothing after it runs."""

    def killed_at_the_second(table, where, **kwargs):
        writes.append(where)
        if len(writes) == 2:
            raise Killed
        return write_table(table, where, **kwargs)

    monkeypatch.setattr(files.atomic.pq, "write_table", killed_at_the_second)
    with pytest.raises(Killed):
        files.export(tmp_path, frame((EAGER1, ok(10.0)), (inductor(1), ok(5.0))), {"study": "s"})
    assert len(files.read(tmp_path / layout.TRIALS_FILE)[0]) == 1  # the old trials, as the front
    assert len(files.read(tmp_path / layout.PARETO_FILE)[0]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [layout.PARETO_FILE, layout.TRIALS_FILE]
    monkeypatch.undo()
    files.export(tmp_path, frame((EAGER1, ok(10.0)), (inductor(1), ok(5.0))), {"study": "s"})
    assert len(files.read(tmp_path / layout.TRIALS_FILE)[0]) == 2


def test_a_full_disk_names_the_file_and_that_the_storage_holds_every_trial(tmp_path, monkeypatch):
    # pyarrow's own error, as the CLI printed it: "Error writing bytes to file. Detail:
    # [errno 28] No space left on device", naming no file.
    path = tmp_path / layout.TRIALS_FILE
    files.write(frame((EAGER1, ok(10.0))), path, {"study": "s"})

    def full(table, where, **kwargs):
        with open(where, "wb") as f:
            f.write(b"PAR1 half")
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(files.atomic.pq, "write_table", full)
    with pytest.raises(UserError) as exc:
        files.write(frame((EAGER1, ok(99.0))), path, {"study": "s", "storage": "study.db"})
    assert str(exc.value) == (f"cannot write {path}: No space left on device; study.db holds "
                              "every trial, so once you free disk space the same command "
                              "writes the file again")
    assert [p.name for p in tmp_path.iterdir()] == [layout.TRIALS_FILE]  # no temp file left
    assert list(files.read(path)[0]["latency_ms_p50"]) == [10.0]  # the old file, whole


def test_a_file_that_cannot_be_replaced_is_named_not_its_temp_file(tmp_path, monkeypatch):
    # chattr +i trials.parquet: the rename's error named the temporary file, gone by then.
    import errno
    import os

    path = tmp_path / layout.TRIALS_FILE

    def immutable(src, dst):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(src), None, str(dst))

    monkeypatch.setattr(files.atomic.os, "replace", immutable)
    with pytest.raises(UserError) as exc:
        files.write(frame((EAGER1, ok(10.0))), path,
                    {"study": "s", "storage": "postgresql://u:***@db/tuner"})
    assert str(exc.value) == (f"cannot write {path}: Operation not permitted; "
                              "postgresql://u:***@db/tuner holds every trial: make trials.parquet "
                              "and its folder writable (chmod u+w; chattr -i) and the same command "
                              "writes the file again")
    assert ".tmp" not in str(exc.value) and list(tmp_path.iterdir()) == []


def test_columns_no_row_filled_read_back_empty(tmp_path):
    """A frame's empty text and list columns come back as NaN floats from pandas; Arrow reads
    those as empty in text, but cannot make lists of them: the file holds empty cells."""
    df = frame((EAGER1, ok(10.0)), (inductor(1), ok(5.0)))
    df["message"] = float("nan")
    df["graph_break_reasons"] = float("nan")
    df.loc[0, "stderr_tail"] = float("nan")
    df.loc[1, "stderr_tail"] = "tail"
    path = tmp_path / layout.TRIALS_FILE
    files.write(df, path, {"study": "s"})
    back = pq.read_table(path)
    assert back.schema.field("graph_break_reasons").type == pa.list_(pa.string())
    assert back["graph_break_reasons"].to_pylist() == [None, None]
    assert back["message"].to_pylist() == [None, None]
    assert back["stderr_tail"].to_pylist() == [None, "tail"]


def one_line_error(path) -> str:
    with pytest.raises(UserError) as exc:
        files.read(path)
    message = str(exc.value)
    assert message and "\n" not in message
    return message


def test_reading_a_parquet_file_that_is_not_a_tuner_study_fails_clearly(tmp_path):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    assert "not a tuner study file" in one_line_error(path)


def test_reading_a_corrupt_file_fails_clearly(tmp_path):
    good = tmp_path / "good.parquet"
    files.write(frame((EAGER1, ok(10.0))), good, {"study": "s"})
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    assert "not a readable Parquet file" in one_line_error(cut)
    text = tmp_path / "notes.parquet"
    text.write_text("hello\nworld\n")
    assert "not a readable Parquet file" in one_line_error(text)


def test_reading_a_missing_path_fails_clearly(tmp_path):
    assert "no such file" in one_line_error(tmp_path / "nope.parquet")
    assert "no such file" in one_line_error(tmp_path)  # a folder without a study


def test_reading_a_study_before_its_first_trial_finished_says_so(tmp_path):
    # It said "trials.parquet: no such file (give a study folder or a tuner Parquet file)" of a
    # study folder that was one: the search had made its study.db, and no trial had finished.
    folder = tmp_path / "studies" / "s"
    folder.mkdir(parents=True)
    (folder / layout.DB_FILE).write_bytes(b"")
    for given in (folder, folder / layout.TRIALS_FILE):
        message = one_line_error(given)
        assert message.startswith(f"study {folder} has no finished trial to read yet: a search "
                                  "writes its trials.parquet once its first trial finishes")
        assert f"`tuner worker --study s --studies-dir {tmp_path / 'studies'} --export-only` " \
            "writes it again from study.db" in message
        assert "no such file" not in message


def test_a_newer_schema_version_asks_to_upgrade(tmp_path):
    path = tmp_path / "t.parquet"
    files.write(frame((EAGER1, ok(10.0))), path, {"study": "s"})
    table = pq.read_table(path)
    meta = {**table.schema.metadata, b"tuner.schema_version": b"99"}
    pq.write_table(table.replace_schema_metadata(meta), path)
    assert "upgrade tuner" in one_line_error(path)


def test_an_older_file_without_some_columns_still_loads(tmp_path):
    path = tmp_path / "t.parquet"
    files.write(frame((EAGER1, ok(10.0))), path, {"study": "s"})
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["break_even_calls"]), path)
    back, _ = files.read(path)
    assert "break_even_calls" in back and back["break_even_calls"].isna().all()


def test_a_version_1_file_loads_with_the_version_2_columns_empty(tmp_path):
    path = tmp_path / "t.parquet"
    files.write(frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(8.0))), path,
                  {"study": "s"})
    table = pq.read_table(path)
    added = ["eager_fallback_reasons", "recompile_limit_hits", "recompile_limit_reasons",
             "cudagraph_skip_reasons", "ran_compiled", "flops_per_call", "achieved_tflops",
             "peak_tflops_measured", "fraction_of_peak"]
    v1 = table.drop_columns(added).set_column(
        table.schema.get_field_index("schema_version"), "schema_version",
        pa.array([1] * table.num_rows, pa.int32()))
    pq.write_table(v1.replace_schema_metadata(
        {**table.schema.metadata, b"tuner.schema_version": b"1"}), path)

    back, meta = files.read(path)
    assert meta["schema_version"] == 1 and list(back["schema_version"]) == [1, 1]
    assert set(schema.COLUMNS) <= set(back.columns)
    assert back[added].isna().all().all()
    # Without the column a compiled row counts as compiled, as it did before.
    assert len(select.pareto(back)) == 2
    assert "inductor" in select.pareto(back)["backend"].tolist()


# -- ran eager, FLOPs ---------------------------------------------------------------------------

def ran_eager(p50: float) -> TrialResult:
    result = ok(p50)
    result.ran_compiled, result.unique_graphs, result.eager_fallback_frames = False, 0, 1
    return result


def test_a_compiled_config_that_ran_eager_is_no_compiled_speedup_and_not_on_the_front():
    from tuner.render import study as report

    # The fallback's latency is noise around eager's, here a little lower: never a speedup.
    df = frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ran_eager(9.9)),
               (inductor(1, "reduce-overhead"), ok(12.0, compile_s=20.0)))
    row = df.set_index("config_key").loc[inductor(1).key]
    assert row["ran_compiled"] == False  # noqa: E712
    assert math.isnan(row["speedup_vs_eager"]) and math.isnan(row["break_even_calls"])
    assert inductor(1).key not in set(select.pareto(df)["config_key"])
    assert report.notes(row).startswith("RAN EAGER")
    verdict = report.verdicts(df)[1]
    assert verdict.startswith("compiling does not pay at batch size 1")
    assert "Use eager. default produced no compiled graph" in verdict


def test_flops_give_achieved_tflops_and_the_fraction_of_the_machines_measured_peak():
    eager, compiled, elsewhere = ok(10.0), ok(5.0), ok(5.0)
    for r in (eager, compiled, elsewhere):
        r.flops_per_call = 2 * 10**9
    eager.peak_tflops_measured = 0.5  # this machine measured twice: its best counts
    compiled.peak_tflops_measured = 0.8
    elsewhere.fingerprint = {**FINGERPRINT, "host": "other-box"}  # measured no peak
    df = frame((EAGER1, eager), (inductor(1), compiled), (inductor(1, "max-autotune"), elsewhere))
    rows = df.set_index("config_key")
    assert rows.loc[EAGER1.key, "achieved_tflops"] == pytest.approx(0.2)
    assert rows.loc[inductor(1).key, "achieved_tflops"] == pytest.approx(0.4)
    assert rows.loc[EAGER1.key, "fraction_of_peak"] == pytest.approx(0.25)
    assert rows.loc[inductor(1).key, "fraction_of_peak"] == pytest.approx(0.5)
    assert math.isnan(rows.loc[inductor(1, "max-autotune").key, "fraction_of_peak"])
    assert files.peaks(df) == [{"host": "gpu-box", "gpu_name": "NVIDIA H200",
                                  "peak_tflops_measured": 0.8}]
    no_flops = frame((EAGER1, ok(10.0)))
    assert no_flops["achieved_tflops"].isna().all() and no_flops["fraction_of_peak"].isna().all()
    # a peak of 0 (a hand-edited file): no fraction, where it was inf ("inf%", JSON Infinity)
    zero = ok(10.0)
    zero.flops_per_call, zero.peak_tflops_measured = 2 * 10**9, 0.0
    assert frame((EAGER1, zero))["fraction_of_peak"].isna().all()



def test_shapes_with_a_sequence_length_parse_round_trip_and_need_a_factory_that_takes_one():
    from tuner.domain.workload import parse_shapes, shape_label

    assert parse_shapes("1, 8,8x128") == (1, 8, (8, 128))
    assert [shape_label(s) for s in parse_shapes("8x128,4")] == ["8x128", "4"]
    for bad in ("8x", "x8", "8x0", "0x8", "8x8x8", "8*128"):
        with pytest.raises(UserError, match=f"shape schedule entry '{re.escape(bad)}'"):
            parse_shapes(bad)
    # Past the int32 range, before any trial (else a traceback once the rows are written).
    assert parse_shapes(f"{2**31 - 1}x{2**31 - 1}") == ((2**31 - 1, 2**31 - 1),)
    for bad in (f"{2**31}", f"8x{2**31}", f"{2**63}"):
        with pytest.raises(UserError, match=f"shape schedule entry '{bad}' is more than "
                                            "2147483647"):
            parse_shapes(bad)
    w = Workload(model="tuner.examples:text_encoder", shape_schedule=(8, (8, 128)))
    assert w.to_dict()["shape_schedule"] == [8, [8, 128]]
    assert Workload.from_dict(json.loads(json.dumps(w.to_dict()))) == w  # as Optuna stores it
    validate(w)
    with pytest.raises(UserError, match="only a factory model takes"):
        validate(Workload(model="resnet18", shape_schedule=((1, 64),)))
    with pytest.raises(UserError, match="takes only a batch size"):
        validate(Workload(model="tests.support.models:tiny_cnn", shape_schedule=((1, 64),)))


def test_a_speedup_between_two_noisy_single_measurements_comes_with_a_caution():
    from tuner.render import study as report

    eager, compiled = ok(10.0, compile_s=0.0), ok(9.0, compile_s=5.0)
    assert report.verdicts(frame((EAGER1, eager), (inductor(1), compiled)))[1].endswith(
        "9.000 vs 10.000 ms); its 6.0 s warm-up pays back after 6,000 calls.")
    eager.noisy = compiled.noisy = True
    verdict = report.verdicts(frame((EAGER1, eager), (inductor(1), compiled)))[1]
    assert "1.11x faster than eager" in verdict
    assert verdict.endswith("Both rows are flagged noisy and were measured once each: "
                            "`tuner confirm STUDY` measures them again before you rely on this.")
    # to paste as it is where the caller knows the study's folder and storage
    verdict = report.verdicts(frame((EAGER1, eager), (inductor(1), compiled)), Path("studies/x"),
                              "postgresql://db-host/tuner")[1]
    assert "`tuner confirm studies/x --storage postgresql://db-host/tuner` measures them" in verdict


def test_throughput_comes_from_the_stream_and_latency_from_the_request():
    df = frame((EAGER1, ok(10.0, stream=8.0)), (inductor(1), ok(5.0, stream=4.0)))
    rows = df.set_index("config_key")
    assert rows.loc[EAGER1.key, "throughput_per_s"] == pytest.approx(1e3 / 8.0)
    assert rows.loc[inductor(1).key, "speedup_vs_eager"] == pytest.approx(10.0 / 5.0)
    assert select.best(df, "latency")["latency_ms_p50"] == 5.0


def test_a_file_of_schema_2_gets_its_back_to_back_latency_as_the_stream(tmp_path):
    path = tmp_path / "old.parquet"
    files.write(frame((EAGER1, ok(10.0, stream=7.0))), path, {"study": "s"})
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"tuner.schema_version"] = b"2"
    old = table.drop([c for c in table.column_names if c.startswith("stream_")])
    pq.write_table(old.replace_schema_metadata(meta), path)
    df, _ = files.read(path)
    assert df["stream_ms_p50"].tolist() == [10.0]


def test_an_option_value_beyond_a_64_bit_integer_is_written_as_text_not_an_overflow(tmp_path):
    # A study stored before such values were refused (tuner.domain.space): every export raised
    # OverflowError, and no command could write the study's files again.
    huge = TrialConfig("inductor", 1, "default", False, options={"max_fusion_size": 2**64})
    files.export(tmp_path, frame((EAGER1, ok(10.0)), (huge, ok(5.0))), {"study": "s"})
    df, _ = files.read(tmp_path)
    assert list(df["opt_max_fusion_size"].dropna()) == [str(2**64)]

