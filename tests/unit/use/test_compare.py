"""`tuner compare`: studies of one model made on different GPU models, side by side."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tests.support.synthetic import GPU_WORKLOAD, configs, fingerprint, write_study
from tests.support.text import flat
from tuner.cli.app import main
from tuner.data import files
from tuner.data.equivalent import ran_keys
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.render.comparison import render
from tuner.render.comparison_plot import plot
from tuner.runtime import fingerprint as fingerprint_module
from tuner.use.compare import compare
from tuner.use.recommend import recommend

# FakeRunner at speed s, batch size 1: eager 6.25/s ms, inductor:reduce-overhead 3.75/s,
# inductor:max-autotune 3.4375/s (and 90 s to compile), inductor:default 5/s, cudagraphs 4.6875/s.


@pytest.fixture
def two_gpus(tmp_path):
    """A fast GPU where max-autotune wins, and a slow one where max-autotune runs out of memory."""
    h200 = write_study(tmp_path, "resnet18-h200", gpu="NVIDIA H200", speed=2.0)
    l4 = write_study(tmp_path, "resnet18-l4", gpu="NVIDIA L4", speed=0.7,
                     fail={"inductor:max-autotune": Status.OOM})
    return h200, l4


def best(comparison, bs, objective, study):
    return next(b for b in comparison.best
                if (b.batch_size, b.objective, b.study) == (bs, objective, study))


def transfer(comparison, bs, source, target):
    return next(t for t in comparison.transfers
                if (t.batch_size, t.source, t.target) == (bs, source, target))


def test_best_config_per_objective_with_ratios_and_own_eager(two_gpus):
    c = compare(two_gpus)
    assert [s.name for s in c.studies] == ["resnet18-h200", "resnet18-l4"]
    assert c.batch_sizes == [1, 8]
    a, b = best(c, 1, "latency", "A"), best(c, 1, "latency", "B")
    assert a.label == "inductor:max-autotune" and a.latency_ms_p50_median == pytest.approx(
        3.4375 / 2)
    assert b.label == "inductor:reduce-overhead" and b.latency_ms_p50_median == pytest.approx(
        3.75 / 0.7)
    assert a.latency_vs_a is None
    assert b.latency_vs_a == pytest.approx((3.75 / 0.7) / (3.4375 / 2))
    assert b.throughput_vs_a == pytest.approx(1 / b.latency_vs_a)
    assert b.compile_vs_a == pytest.approx(17 / 90)
    assert b.memory_vs_a == pytest.approx(1.0)
    # The tail per request, each study's own (FakeRunner: p99 = 1.02 x p50)
    assert a.latency_ms_p99_median == pytest.approx(1.02 * 3.4375 / 2)
    assert b.p99_vs_a == pytest.approx(b.latency_vs_a)
    # Each study against its own eager baseline.
    assert a.speedup_vs_eager == pytest.approx(6.25 / 3.4375)
    assert b.speedup_vs_eager == pytest.approx(6.25 / 3.75)
    assert best(c, 8, "warmup", "B").label == "eager"
    assert best(c, 8, "memory", "A").label == "inductor:default"


def test_transfer_between_gpus(two_gpus):
    c = compare(two_gpus)
    # The H200's fastest config ran out of memory on the L4.
    t = transfer(c, 1, "A", "B")
    assert (t.label, t.outcome, t.detail) == ("inductor:max-autotune", "failed", "oom")
    assert t.target_best_label == "inductor:reduce-overhead"
    # The L4's fastest config is on the H200's front, 9% slower than the H200's best there.
    t = transfer(c, 1, "B", "A")
    assert (t.label, t.outcome) == ("inductor:reduce-overhead", "on_front")
    assert t.target_latency_ms == pytest.approx(3.75 / 2)
    assert t.slowdown_vs_target_best == pytest.approx(3.75 / 3.4375)


def test_transfer_off_the_front_and_not_measured(tmp_path, two_gpus):
    # On this machine max-autotune measured slow and heavy: eager dominates it.
    slow = write_study(tmp_path, "slow", gpu="NVIDIA T4", changes={"inductor:max-autotune": {
        "latency_ms_p50": 50.0, "latency_ms_p90": 51.0, "vram_bytes_steady_reserved": 4 * 2**30}})
    lean = write_study(tmp_path, "lean", gpu="NVIDIA A10",
                       trial_configs=configs(labels=["eager", "inductor:default"]))
    c = compare([two_gpus[0], slow, lean])
    t = transfer(c, 1, "A", "B")
    assert t.outcome == "off_front" and t.target_latency_ms == 50.0
    assert t.slowdown_vs_target_best == pytest.approx(50.0 / 3.75)
    assert transfer(c, 1, "A", "C").outcome == "not_measured"
    assert best(c, 1, "latency", "C").latency_vs_a == pytest.approx(5.0 / (3.4375 / 2))
    text = flat(render(c))
    assert "A's max-autotune on B: NOT on B's Pareto front, 50.000 ms, 13.33x slower " \
           "than B's best, reduce-overhead (3.750 ms)" in text
    assert "A's max-autotune on C: not measured there" in text
    assert (t.name, t.target_best_name) == ("max-autotune", "reduce-overhead")


def test_fingerprints_shown_and_torch_difference_called_out(tmp_path, two_gpus):
    text = render(compare(two_gpus))
    assert "NVIDIA H200" in text and "NVIDIA L4" in text
    assert "torch differs" not in text
    newer = write_study(tmp_path, "newer", gpu="NVIDIA L4", torch_version="2.12.0")
    c = compare([two_gpus[0], newer])
    assert any("torch differs (A 2.11.0, B 2.12.0)" in n for n in c.confounders)
    assert "note: torch differs" in render(c)
    bf16 = write_study(tmp_path, "bf16", workload=Workload("resnet18", "cuda", dtype="bfloat16"))
    assert any("dtype: A float32, B bfloat16" in n for n in compare([two_gpus[0], bf16]).confounders)


def test_a_study_whose_finalists_were_measured_once_is_called_out(tmp_path, two_gpus):
    again = write_study(tmp_path, "again", columns={"eager": {
        "latency_ms_p50_repeats": [6.25, 6.3, 6.2]}})
    notes = compare([again, two_gpus[1]]).confounders
    assert [n for n in notes if "measured once each" in n] == [
        "the finalists of B were measured once each and those of A again in fresh processes, "
        "whose median stands for them: a ratio between them holds one process's noise on B's "
        "side; `tuner confirm` on B evens this out"]
    assert not any("measured once" in n for n in compare(two_gpus).confounders)


def test_json_and_plot_from_the_cli(two_gpus, tmp_path):
    png = tmp_path / "fronts.png"
    out = CliRunner().invoke(main, ["compare", *map(str, two_gpus), "--json", "--plot", str(png)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output[out.output.index("{"):])
    assert [s["tag"] for s in data["studies"]] == ["A", "B"]
    assert data["studies"][1]["fingerprints"][0]["gpu_name"] == "NVIDIA L4"
    row = next(b for b in data["best"] if (b["batch_size"], b["objective"], b["tag"])
               == (1, "latency", "B"))
    assert row["label"] == "inductor:reduce-overhead" and row["latency_vs_a"] > 3
    assert row["study"] == two_gpus[1].name  # the study's name; its letter is the tag
    assert {t["outcome"] for t in data["transfers"]} == {"failed", "on_front"}
    assert [(f["tag"], f["batch_size"]) for f in data["fronts"]] == [
        ("A", 1), ("A", 8), ("B", 1), ("B", 8)]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_output_from_the_cli(two_gpus):
    out = CliRunner().invoke(main, ["compare", str(two_gpus[0] / "trials.parquet"),
                                    str(two_gpus[1])])
    assert out.exit_code == 0, out.output
    assert "batch size 1: best config per objective" in out.output
    assert "median ms" in out.output and "median p99" in out.output
    assert "B's reduce-overhead on A: on A's Pareto front, 1.875 ms, 1.09x slower" \
        in flat(out.output)


def test_plot_writes_a_png(two_gpus, tmp_path):
    path = plot(compare(two_gpus), tmp_path / "p.png")
    assert path.stat().st_size > 10_000


def test_plot_without_matplotlib_is_a_one_line_error_before_any_work(two_gpus, tmp_path,
                                                                      monkeypatch):
    # As tuner plot: an install without matplotlib got a traceback, after the studies were read.
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    runner = CliRunner()
    png = tmp_path / "fronts.png"
    # A missing study too: the check comes before the studies are read.
    for studies in (list(map(str, two_gpus)), [str(two_gpus[0]), str(tmp_path / "missing")]):
        out = runner.invoke(main, ["compare", *studies, "--plot", str(png)])
        assert out.exit_code == 1, out.output
        assert out.output.startswith("Error: tuner compare --plot needs matplotlib") and \
            "pip install 'matplotlib>=3.7'" in out.output and out.output.count("\n") == 1
    assert not png.exists()
    with pytest.raises(UserError, match="needs matplotlib"):
        plot(compare(two_gpus), png)


def test_bad_input_is_a_one_line_error(two_gpus, tmp_path):
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + b"\x00garbage" * 50)
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    runner = CliRunner()
    for bad, words in ((corrupt, "not a readable Parquet file"),
                       (foreign, "not a tuner study file"),
                       (tmp_path / "missing", "no such file")):
        out = runner.invoke(main, ["compare", str(two_gpus[0]), str(bad)])
        assert out.exit_code == 1, out.output
        assert out.output.startswith("Error: ") and words in out.output
        assert out.output.count("\n") == 1
    out = runner.invoke(main, ["compare", str(two_gpus[0])])
    assert out.exit_code == 1 and "at least two studies" in out.output


def test_a_file_of_an_old_schema_version_loads(two_gpus, tmp_path, monkeypatch):
    """A v0-like file: columns added later (throughput, warm-up, memory, speedup, the per-row
    fingerprint) are missing; they are filled in from the others where they can be."""
    df, meta = files.read(two_gpus[1])
    dropped = ["throughput_per_s", "time_to_steady_s", "peak_memory_bytes", "memory_kind",
               "peak_vram_bytes", "eager_latency_ms_p50", "speedup_vs_eager", "break_even_calls",
               "graph_break_reasons", "recompile_reasons"] + [c for c in df if c.startswith("fp_")]
    old = df.drop(columns=dropped + ["schema_version"])
    table = pa.Table.from_pandas(old, preserve_index=False)
    table = table.replace_schema_metadata({
        b"tuner.schema_version": b"0", b"tuner.study": b'"resnet18-l4-v0"',
        b"tuner.workload": json.dumps(meta["workload"]).encode(),
        b"tuner.fingerprints": json.dumps(meta["fingerprints"]).encode()})
    v0 = tmp_path / "v0.parquet"
    pq.write_table(table, v0)

    c = compare([two_gpus[0], v0])
    b = best(c, 1, "latency", "B")
    assert c.studies[1].name == "resnet18-l4-v0"
    assert b.label == "inductor:reduce-overhead"
    assert b.throughput_per_s == pytest.approx(1e3 * 0.7 / 3.75)
    assert b.speedup_vs_eager == pytest.approx(6.25 / 3.75)
    assert b.peak_memory_bytes is not None
    assert transfer(c, 1, "B", "A").outcome == "on_front"
    assert "NVIDIA L4" in render(c)
    monkeypatch.setattr(fingerprint_module, "collect", lambda device: fingerprint("NVIDIA L4"))
    rec = recommend(v0, batch_size=1, objective="throughput", max_vram_gb=1.0)
    assert rec.config.label == "inductor:default" and rec.fingerprint["gpu_name"] == "NVIDIA L4"


def test_a_newer_schema_is_refused(two_gpus, tmp_path):
    table = pq.read_table(two_gpus[0] / "trials.parquet")
    meta = {**table.schema.metadata, b"tuner.schema_version": b"99"}
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "future.parquet")
    with pytest.raises(UserError, match="schema version 99 is newer"):
        compare([two_gpus[0], tmp_path / "future.parquet"])


def test_cli_help_has_examples():
    out = CliRunner().invoke(main, ["compare", "--help"])
    assert out.exit_code == 0 and "Examples:" in out.output and "--plot" in out.output


# -- issue 11: no made-up rows, words that say what happened, a study compared with itself ------

def test_no_traffic_row_for_studies_without_a_shape_schedule(tmp_path, two_gpus):
    c = compare(two_gpus)
    assert "traffic" not in {b.objective for b in c.best}
    assert "traffic" not in render(c)
    scheduled = write_study(tmp_path, "scheduled", columns={"inductor:default": {
        "schedule_total_s": 1.5}})
    c = compare([two_gpus[0], scheduled])
    traffic = [b for b in c.best if b.objective == "traffic"]
    assert {(b.study, b.label) for b in traffic} == {("B", "inductor:default")}


def test_a_batch_size_the_target_did_not_measure_is_said_so(tmp_path, two_gpus):
    only_one = write_study(tmp_path, "only-bs1", trial_configs=configs(batch_sizes=[1]))
    c = compare([only_one, two_gpus[0]])
    t = transfer(c, 8, "B", "A")
    assert t.outcome == "not_measured" and not t.target_measured_batch_size
    text = flat(render(c))
    assert "B's max-autotune on A: A did not measure batch size 8" in text
    assert "has no verified config" not in text


def test_a_study_given_twice_is_an_error(tmp_path, two_gpus):
    # Every ratio between a study and itself is 1: a mistake to say, not a comparison to print.
    h200 = two_gpus[0]
    with pytest.raises(UserError, match="A and B are the same file .*give two different studies"):
        compare([h200, h200 / "trials.parquet"])
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("trials.parquet", "pareto.parquet"):
        (copy / name).write_bytes((h200 / name).read_bytes())
    with pytest.raises(UserError, match="A and B hold the same trials .*a copy of the other"):
        compare([h200, copy])
    out = CliRunner().invoke(main, ["compare", str(h200), str(h200)])
    assert out.exit_code == 1 and out.output.startswith("Error: A and B are the same file")
    assert out.output.count("\n") == 1 and "batch size" not in out.output
    assert not any("A and B" in n for n in compare(two_gpus).confounders)


def _column(text: str, name: str, starting: str) -> list[str]:
    """The cells under the header ``name`` of the table rows that start with ``starting``
    (the columns after the third are right-aligned under their headers), in every table."""
    cells, span = [], (0, 0)
    for line in text.splitlines():
        if line.startswith("objective"):
            at = line.index(name)
            span = (line.rindex("  ", 0, at) + 2, at + len(name))
        elif line.startswith(starting):
            cells.append(line[span[0]:span[1]].strip())
    return cells


def test_eager_has_no_compile_time_in_the_table(two_gpus):
    text = render(compare(two_gpus))
    rows = [line.split() for line in text.splitlines() if line.startswith("warmup ")]
    compile_s = _column(text, "compile s", "warmup ")
    eager = [c for r, c in zip(rows, compile_s) if r[2] == "eager"]
    assert eager and all(c == "-" for c in eager)


# -- configs matched by what they ran, whatever dimensions each study searched ------------------

MODE_OPTIONS = {"default": {}, "reduce-overhead": {"triton.cudagraphs": True},
                "max-autotune": {"max_autotune": True, "triton.cudagraphs": True,
                                 "coordinate_descent_tuning": True}}


def extended(tmp_path, option: str, values: list[bool], **kwargs):
    """A study that searched memory formats and one inductor option (listed default first),
    as a CUDA search of a torchvision model does by itself."""
    space = {"backends": ["eager", "inductor"], "modes": list(MODE_OPTIONS), "dynamic": [False],
             "batch_sizes": [1], "channels_last": [False, True], "options": {option: values}}
    trial_configs = [TrialConfig("eager", 1, channels_last=cl) for cl in (False, True)]
    trial_configs += [TrialConfig("inductor", 1, mode, False, channels_last=cl,
                                  options={option: v})
                      for mode in MODE_OPTIONS for cl in (False, True) for v in values]
    return write_study(tmp_path, "extended", trial_configs=trial_configs,
                       meta={"space": space, **kwargs})


def test_a_config_is_found_in_a_study_that_searched_more_dimensions(tmp_path):
    # A plain study's inductor:max-autotune is the extended study's contiguous row with the
    # option at inductor's default: transfer finds it, both ways, instead of "not measured".
    plain = write_study(tmp_path, "plain", trial_configs=configs([1]), speed=2.0)
    wide = extended(tmp_path, "epilogue_fusion", [True, False], mode_options=MODE_OPTIONS)
    c = compare([plain, wide])
    t = transfer(c, 1, "A", "B")
    # B searched both memory formats: A's label names the one it ran
    assert t.label == "inductor:max-autotune contiguous" and t.outcome in ("on_front", "off_front")
    key = TrialConfig("inductor", 1, "max-autotune", False, channels_last=False,
                      options={"epilogue_fusion": True}).key
    rows, _, _ = files.load(wide)
    assert t.target_latency_ms == pytest.approx(
        float(rows.loc[rows["config_key"] == key, "latency_ms_p50"].iloc[0]))
    back = transfer(c, 1, "B", "A")
    assert back.outcome in ("on_front", "off_front")
    # eager is eager, in the memory format both ran
    rows_a, meta_a, _ = files.load(plain)
    rows_b, meta_b, _ = files.load(wide)
    eager_a = ran_keys(rows_a, meta_a)[rows_a["backend"] == "eager"].iloc[0]
    keys_b = dict(zip(rows_b["label"], ran_keys(rows_b, meta_b)))
    assert eager_a == keys_b["eager contiguous"] != keys_b["eager channels_last"]


@pytest.mark.parametrize("recorded", [True, False], ids=["mode_options recorded", "older file"])
def test_an_option_a_mode_sets_matches_the_mode_not_the_first_value(tmp_path, recorded):
    # max-autotune turns coordinate_descent_tuning on: the extended study's max-autotune row
    # with it off (its baseline, the first value) ran something else than plain max-autotune.
    plain = write_study(tmp_path, "plain", trial_configs=configs([1]))
    wide = extended(tmp_path, "coordinate_descent_tuning", [False, True],
                    **({"mode_options": MODE_OPTIONS} if recorded else {}))
    rows_a, meta_a, _ = files.load(plain)
    rows_b, meta_b, _ = files.load(wide)
    keys_a = dict(zip(rows_a["label"], ran_keys(rows_a, meta_a)))
    keys_b = dict(zip(rows_b["config_key"], ran_keys(rows_b, meta_b)))

    def of(mode, value):
        return keys_b[TrialConfig("inductor", 1, mode, False, channels_last=False,
                                  options={"coordinate_descent_tuning": value}).key]

    assert of("max-autotune", True) == keys_a["inductor:max-autotune"]
    assert of("max-autotune", False) not in keys_a.values()
    assert of("default", False) == keys_a["inductor:default"]
    assert of("default", True) not in keys_a.values()


def test_the_traffic_row_shows_each_study_its_schedule_time_and_a_different_schedule_is_named(
        tmp_path):
    # Two studies of one model replaying schedules of different lengths: the traffic figure,
    # with its ratio, is in the table, and the schedules' difference is a named confounder.
    short = write_study(tmp_path, "short", workload=dataclasses.replace(
        GPU_WORKLOAD, shape_schedule=(1, 8)), trial_configs=configs([1]))
    long = write_study(tmp_path, "long", workload=dataclasses.replace(
        GPU_WORKLOAD, shape_schedule=(1, 8, 1, 8, 1, 8)), trial_configs=configs([1]))
    c = compare([short, long])
    a, b = (best(c, 1, "traffic", tag) for tag in "AB")
    assert a.schedule_total_s and b.schedule_total_s == pytest.approx(3 * a.schedule_total_s)
    assert b.schedule_vs_a == pytest.approx(3.0)
    header, *rows = [line for line in render(c).splitlines()
                     if line.startswith(("objective", "traffic "))]
    assert "traffic s" in header.split("  ")
    assert f"{b.schedule_total_s:.3f} (3.00x)" in rows[1]
    assert any("workload differs, shape_schedule" in n for n in c.confounders)


def test_eager_in_a_study_of_memory_formats_has_no_compile_time(tmp_path):
    # Its label is "eager contiguous" there: still eager, still no compile.
    plain = write_study(tmp_path, "plain", trial_configs=configs([1]))
    wide = extended(tmp_path, "epilogue_fusion", [True, False], mode_options=MODE_OPTIONS)
    c = compare([plain, wide])
    eager = [b for b in c.best if b.label.startswith("eager")]
    assert {b.study for b in eager} == {"A", "B"}
    assert all(not b.compiled and b.compile_vs_a is None for b in eager)
    rows = [line.split() for line in render(c).splitlines() if line.startswith("warmup ")]
    assert [r[2] for r in rows] == ["eager", "eager"]
    assert _column(render(c), "compile s", "warmup ") == ["-", "-"]


@pytest.mark.parametrize("kind", ["no trial", "every trial failed"])
def test_a_study_without_a_verified_config_is_named_and_not_called_measured_once(
        tmp_path, two_gpus, kind):
    # Against a study whose finalists were measured again, an empty study has no finalists:
    # "measured once each" would be wrong; what is true is that it has nothing to compare.
    again = write_study(tmp_path, "again", columns={"inductor:max-autotune": {
        "latency_ms_p50_repeats": [1.7, 1.72, 1.71]}})
    if kind == "no trial":
        empty = tmp_path / "empty"
        empty.mkdir()
        rows, meta, _ = files.load(two_gpus[0])
        files.export(empty, rows.iloc[0:0], {k: v for k, v in meta.items()
                                             if k in ("study", "workload", "protocol")})
        said = "study B has no verified config: it holds no trial yet"
    else:
        empty = write_study(tmp_path, "failed", fail={c.label: Status.OOM for c in configs()})
        said = f"study B has no verified config: none of its {len(configs())} trials finished"
    c = compare([again, empty])
    assert any(n.startswith(said) for n in c.confounders), c.confounders
    assert not any("measured once each" in n for n in c.confounders)


def test_a_mode_this_torch_does_not_list_sets_nothing_rather_than_failing_an_export():
    # The export after each trial writes what each mode sets: a mode torch cannot describe must
    # not stop the search.
    from tuner.data.equivalent import mode_options

    assert mode_options(["default", "no-such-mode"]) == {"default": {}, "no-such-mode": {}}


# -- audit: ratios only between like quantities, words for what happened, files named as written --

ALL_LABELS = ("eager", "inductor:default", "inductor:reduce-overhead", "inductor:max-autotune",
              "cudagraphs")


def test_a_compiled_best_has_no_compile_ratio_against_an_eager_best(tmp_path, two_gpus):
    # A's best is eager everywhere; its first call takes time (a real one does), which is no
    # compile time: B's 90 s compile has no ratio to it.
    only_eager = write_study(tmp_path, "eager-only", trial_configs=configs(labels=["eager"]),
                             changes={"eager": {"compile_s_cold": 0.0175}})
    c = compare([only_eager, two_gpus[0]])
    b = best(c, 1, "latency", "B")
    assert b.label == "inductor:max-autotune" and b.compile_s_cold == 90.0
    assert b.compile_vs_a is None
    row = next(line for line in render(c, width=200).splitlines()  # a row a line
               if line.startswith("latency ") and " B " in line)
    assert " 90.0 " in row and "90.0 (" not in row
    # Between two compiled bests the ratio stays.
    assert best(compare(two_gpus), 1, "latency", "B").compile_vs_a == pytest.approx(17 / 90)


def test_a_config_that_failed_when_measured_again_is_said_so_not_called_incorrect(
        tmp_path, two_gpus):
    # The row keeps how many re-measurements failed (repeats_failed), not their status.
    again = write_study(tmp_path, "failed-again", columns={"inductor:max-autotune": {
        "repeats_failed": 1, "latency_ms_p50_repeats": [3.4375, 3.44]}})
    c = compare([two_gpus[0], again])
    t = transfer(c, 1, "A", "B")
    assert (t.outcome, t.detail) == ("failed", "failed when measured again: 1 of 2 "
                                     "re-measurements in fresh processes did not finish ok")
    assert "A's max-autotune on B: did not pass there (failed when measured again: " \
           "1 of 2 re-measurements in fresh processes did not finish ok); B's best is " \
           "reduce-overhead" in flat(render(c))
    assert "not verified correct" not in render(c)


def test_the_latency_is_named_as_show_and_the_parquet_name_it(tmp_path, two_gpus):
    # A finalist measured again: its median over processes is not its search trial's p50.
    again = write_study(tmp_path, "again", columns={"inductor:max-autotune": {
        "latency_ms_p50_repeats": [3.4375, 3.0, 3.1], "latency_ms_p99_repeats": [3.5, 3.1, 3.2]}})
    out = CliRunner().invoke(main, ["compare", str(again), str(two_gpus[1]), "--json"])
    assert out.exit_code == 0, out.output
    row = next(b for b in json.loads(out.output)["best"]
               if (b["batch_size"], b["objective"], b["tag"]) == (1, "latency", "A"))
    shown = json.loads(CliRunner().invoke(main, ["show", str(again), "--json"]).output)
    theirs = next(p for p in shown["pareto"] if (p["batch_size"], p["label"])
                  == (1, "inductor:max-autotune"))
    assert "latency_ms_p50" not in row and "latency_ms_p99" not in row
    assert row["latency_ms_p50_median"] == theirs["latency_ms_p50_median"] == 3.1
    assert theirs["latency_ms_p50"] == 3.4375
    assert row["latency_ms_p99_median"] == pytest.approx(3.2)
    text = CliRunner().invoke(main, ["compare", str(again), str(two_gpus[1])]).output
    header = next(line for line in text.splitlines() if line.startswith("objective"))
    assert "median ms" in header and "median p99" in header and "p50 ms" not in header


def test_the_plot_path_printed_is_the_file_written(tmp_path, two_gpus):
    runner = CliRunner()
    out = runner.invoke(main, ["compare", *map(str, two_gpus), "--plot", str(tmp_path / "fronts")])
    assert out.exit_code == 0, out.output
    assert f"plot written to {tmp_path / 'fronts.png'}" in out.output
    assert (tmp_path / "fronts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "fronts").exists()
    out = runner.invoke(main, ["compare", *map(str, two_gpus), "--plot", str(tmp_path / "f.svg")])
    assert f"plot written to {tmp_path / 'f.svg'}" in out.output
    assert b"<svg" in (tmp_path / "f.svg").read_bytes()[:500]
    assert ".svg" in " ".join(runner.invoke(main, ["compare", "--help"]).output.split())


def test_device_memory_and_host_memory_get_no_ratio(tmp_path, two_gpus):
    import matplotlib

    host = write_study(tmp_path, "host-rss", changes={
        label: {"vram_bytes_steady_reserved": None} for label in ALL_LABELS})
    c = compare([two_gpus[0], host])
    assert [s.memory_kind for s in c.studies] == ["cuda_reserved", "host_max_rss"]
    assert all(b.memory_vs_a is None for b in c.best)
    rows = [line for line in render(c).splitlines() if line.startswith("latency ")]
    assert rows and all("GiB (" not in line for line in rows)
    assert best(compare(two_gpus), 1, "latency", "B").memory_vs_a == pytest.approx(1.0)
    # The plot's memory axis says they are not one quantity (text kept as text in the SVG).
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        svg = plot(c, tmp_path / "fronts.svg").read_text()
    assert "not one quantity: A cuda_reserved, B host_max_rss" in svg
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert "not one quantity" not in plot(compare(two_gpus), tmp_path / "same.svg").read_text()


def test_a_study_without_a_verified_config_at_a_batch_size_is_said_so(tmp_path, two_gpus):
    # At batch size 8 eager ran out of memory, so the search ran no compiled config there.
    not_run = "not run: at batch size 8 the model fails without compiling (trial 5, eager: oom)"
    skipped = {c.key: {"message": not_run} for c in configs([8]) if c.compiled}
    broken = write_study(tmp_path, "broken-bs8", changes=skipped, fail={
        c.key: Status.OOM if not c.compiled else Status.WORKLOAD_ERROR for c in configs([8])})
    c = compare([two_gpus[0], broken])
    assert c.absent == {8: ["B has no verified config at batch size 8: of its 5 trials there, "
                            "4 not run, 1 oom"]}
    t = transfer(c, 8, "A", "B")
    assert (t.outcome, t.detail) == ("not_run", not_run[len("not run: "):])
    text = render(c)
    assert "\n  (B has no verified config at batch size 8: of its 5 trials there, 4 not run, " \
           "1 oom)\n" in text
    assert "A's max-autotune on B: not run there: at batch size 8 the model fails " \
           "without compiling (trial 5, eager: oom); B has no verified config at batch size 8" \
           in flat(text)
    assert "did not pass there" not in text
    # The other way, a study that never ran a batch size says so too.
    only_one = write_study(tmp_path, "only-bs1", trial_configs=configs(batch_sizes=[1]))
    assert compare([only_one, two_gpus[0]]).absent == {8: ["A did not measure batch size 8"]}


def test_a_batch_size_that_failed_in_every_study_is_said_so(tmp_path):
    fail = {c.key: Status.OOM for c in configs([8])}
    a = write_study(tmp_path, "a", fail=fail)
    b = write_study(tmp_path, "b", gpu="NVIDIA L4", fail=fail)
    c = compare([a, b])
    assert c.batch_sizes == [1, 8]
    text = render(c)
    assert "batch size 8: best config per objective\n  (no study has a verified config at " \
           "this batch size)\n  (A has no verified config at batch size 8: of its 5 trials " \
           "there, 5 oom)\n  (B has no verified config" in text


def test_labels_name_the_precision_where_the_studies_differ_in_it(tmp_path, two_gpus):
    bf16 = write_study(tmp_path, "bf16", workload=Workload("resnet18", "cuda", dtype="bfloat16"))
    c = compare([two_gpus[0], bf16])
    assert best(c, 1, "latency", "A").label == "inductor:max-autotune fp32"
    assert best(c, 1, "latency", "B").label == "inductor:max-autotune bf16"
    # Named against A's workload: B's configs name the precision that differs from it.
    assert (best(c, 1, "latency", "A").name, best(c, 1, "latency", "B").name) == \
        ("max-autotune", "max-autotune bf16")
    assert "A's max-autotune on B: not measured there; B's best is max-autotune bf16" in \
        flat(render(c))
    assert best(compare(two_gpus), 1, "latency", "A").label == "inductor:max-autotune"


def test_a_study_that_searched_several_precisions_is_named_so_and_its_rows_labelled(
        tmp_path, two_gpus):
    # Its workload holds only the first precision: the header said "float32", no note said the
    # studies differ, and A's "inductor:max-autotune" stood beside B's "... bf16".
    pair = [TrialConfig("eager", 1, dtype=dt) for dt in ("float32", "bfloat16")]
    pair += [TrialConfig("inductor", 1, "max-autotune", False, dtype=dt)
             for dt in ("float32", "bfloat16")]
    both = write_study(tmp_path, "both", trial_configs=pair,
                       changes={TrialConfig("inductor", 1, "max-autotune", False,
                                            dtype="bfloat16").key: {"latency_ms_p50": 1.0}})
    c = compare([two_gpus[0], both])
    text = render(c)
    assert "  B  both: resnet18 float32,bfloat16 on cuda" in text
    assert any("dtype: A float32, B float32,bfloat16" in n for n in c.confounders), c.confounders
    assert best(c, 1, "latency", "A").label == "inductor:max-autotune fp32"
    assert best(c, 1, "latency", "B").label == "inductor:max-autotune bf16"


def test_a_small_ratio_keeps_two_significant_digits(tmp_path):
    slow = write_study(tmp_path, "slow", speed=0.002, trial_configs=configs([1]))
    fast = write_study(tmp_path, "fast", gpu="NVIDIA L4", trial_configs=configs([1]))
    c = compare([slow, fast])
    b = best(c, 1, "latency", "B")
    assert b.latency_vs_a == pytest.approx(0.002)
    row = next(line for line in render(c, width=200).splitlines()  # a row a line
               if line.startswith("latency ") and " B " in line)
    assert f"{b.latency_ms_p50_median:.3f} (0.0020x)" in row


def test_compare_is_public_and_refuses_one_path(two_gpus):
    import tuner

    assert tuner.compare is compare and "compare" in dir(tuner)
    for one in (str(two_gpus[0]), two_gpus[0]):
        with pytest.raises(UserError, match="give a list of studies to compare"):
            tuner.compare(one)
    # which of a set's studies would be the reference A is chance
    with pytest.raises(UserError, match="in order, as a list: the first is the reference"):
        tuner.compare(set(map(str, two_gpus)))


def test_studies_without_any_verified_config_are_an_error(tmp_path):
    fail = {c.key: Status.OOM for c in configs()}
    a = write_study(tmp_path, "a", fail=fail)
    b = write_study(tmp_path, "b", gpu="NVIDIA L4", fail=fail)
    out = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert out.exit_code == 1 and out.output.count("\n") == 1, out.output
    assert out.output == ("Error: nothing to compare: no study has a verified config (A: none of "
                          "its 10 trials finished and matched eager; B: none of its 10 trials "
                          "finished and matched eager)\n")


def test_the_docs_excerpt_is_the_real_output():
    root = ROOT
    page = (root / "docs" / "examples.md").read_text()
    start = page.index("An excerpt:\n\n```\n", page.index("## Comparing GPU models"))
    excerpt = page[start:].split("```\n")[1].splitlines()
    out = CliRunner().invoke(main, ["compare", str(root / "studies" / "h200-resnet18"),
                                    str(root / "studies" / "cpu-resnet18")])
    assert out.exit_code == 0, out.output
    # Some of the output's lines, in its order.
    rest = iter(out.output.splitlines())
    assert len(excerpt) > 3 and all(line in rest for line in excerpt), excerpt
