"""The text of `tuner show`."""

from __future__ import annotations

import json
import re

import pandas as pd

from tuner.data import schema
from tuner.domain.records import Status
from tuner.render import study as report
from tuner.render.study import trial_table


def test_eager_rows_show_no_compile_time():
    rows = pd.DataFrame([{"name": "eager", "backend": "eager", "compile_s_cold": 0.7},
                         {"name": "default", "backend": "inductor",
                          "compile_s_cold": 12.5}])
    text = report.table(rows, columns=trial_table.columns_of(["compile"]))
    eager_line, compiled_line = text.splitlines()[1:]
    assert "0.7" not in eager_line and "12.5" in compiled_line



def test_the_notes_header_stands_over_the_notes():
    # A long note made the header stand right-aligned at the far end of the column.
    rows = pd.DataFrame([{"name": "eager", "backend": "eager", "noisy": True,
                          "graph_breaks": 3}])
    header, line = report.table(rows).splitlines()
    assert line.index("noisy; 3 graph breaks") == header.index("notes")
    assert header.endswith("notes")

def test_the_report_names_every_precision_a_study_searched():
    trials = pd.DataFrame([{"dtype": "float32", "status": "ok", "batch_size": 1},
                           {"dtype": "bfloat16", "status": "ok", "batch_size": 1}],
                          columns=schema.COLUMNS)
    meta = {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cpu"}}
    text = report.render(trials, trials.iloc[0:0], meta)
    assert text.splitlines()[0] == "study s: m float32,bfloat16 on cpu, 2 trials"


def test_a_study_with_no_trials_says_so_in_both_views():
    # A trials.parquet written before the first trial ended (or emptied by hand) holds no row:
    # the report says there is nothing yet, instead of a header and silence.
    from tuner.data.importance import importances
    from tuner.render import importance as view

    trials = pd.DataFrame(columns=schema.COLUMNS)
    meta = {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cpu"}}
    text = report.render(trials, trials, meta)
    assert text.splitlines()[-1] == report.NO_TRIALS
    assert view.render(importances(trials), meta).splitlines()[-1] == \
        "no trials recorded yet: there is nothing to rank"


def _frame(*trials):
    from tests.support.rows import frame

    return frame(*trials)


def test_the_verdict_compares_with_eager_in_the_compiled_configs_precision():
    # Launch-bound: compiled float32 is the fastest row, while eager is faster in bfloat16. Its
    # `vs eager` is against eager float32 (another precision is another model's accuracy); the
    # sentence must say the same figure, not 1.0 against the bfloat16 eager's 3.0 ms.
    from tests.support.rows import ok
    from tuner.domain.space import TrialConfig

    def at(backend, dtype):
        return TrialConfig(backend, 1, None if backend == "eager" else "reduce-overhead",
                           None if backend == "eager" else False, dtype=dtype)

    df = _frame((at("eager", "float32"), ok(4.0, compile_s=0.0)),
                (at("eager", "bfloat16"), ok(3.0, compile_s=0.0)),
                (at("inductor", "float32"), ok(1.0)), (at("inductor", "bfloat16"), ok(1.05)))
    top = df.set_index("config_key").loc[at("inductor", "float32").key]
    assert top["speedup_vs_eager"] == 4.0
    assert report.verdicts(df)[1].startswith(
        "batch size 1: reduce-overhead fp32 is 4.00x faster than eager fp32 (1.000 vs 4.000 ms)")


def test_the_verdict_names_only_a_config_the_table_shows():
    # A row without a warm-up time is on no front (the table), so the sentence does not name it.
    from tests.support.rows import EAGER1, inductor, ok
    from tuner.data.select import pareto

    no_warmup = ok(3.0)
    no_warmup.compile_s_cold = None
    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(8.0)),
                (inductor(1, "reduce-overhead"), no_warmup))
    assert set(pareto(df)["name"]) == {"eager", "default"}
    assert report.verdicts(df)[1].startswith(
        "batch size 1: default is 1.25x faster than eager (8.000 vs 10.000 ms)")


def test_a_p50_of_zero_or_inf_is_no_measurement_and_no_traceback():
    # A damaged or hand-edited file: a zero p50 made the verdict divide by zero, an inf one a
    # "0.00x" speedup. Neither is a latency: the row is left out, and says why.
    from tests.support.rows import EAGER1, inductor, ok
    from tuner.data.select import eligible, left_out_counts, why_left_out

    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(0.0)),
                (inductor(1, "reduce-overhead"), ok(float("inf"))), (inductor(1, "max-autotune"), ok(5.0)))
    assert list(eligible(df)["name"]) == ["eager", "max-autotune"]
    assert why_left_out(df.iloc[[1, 2]]) == ["no latency measured: its p50 is 0.0 ms",
                                             "no latency measured: its p50 is inf ms"]
    # In short, as show and compare count them: one reason, not one per value.
    assert left_out_counts(df.iloc[[1, 2]]) == "2 no latency measured"
    assert report.verdicts(df)[1].startswith("batch size 1: max-autotune is 2.00x")


def _cells(table: str) -> list[dict[str, str]]:
    """The rows of a text table (one line each, at its natural width) as {header: cell}: cells
    and headers are apart by 2+ spaces; the footnotes under it are no rows."""
    import re

    head, *body = table.split("\n[")[0].splitlines()
    headers = re.split(r"\s{2,}", head.strip())
    return [dict(zip(headers, re.split(r"\s{2,}", line.strip()))) for line in body]


def test_a_share_of_peak_above_the_measured_peak_is_capped_and_says_the_peak_is_low():
    # On a busy CPU the peak, timed once a run, came out below what a trial then reached: the
    # table read "104.0%" under "of peak".
    from tests.support.rows import EAGER1, inductor, ok

    eager, compiled = ok(10.0), ok(5.0)
    for r in (eager, compiled):
        r.flops_per_call = 2 * 10**9  # 0.2 and 0.4 TFLOP/s
    eager.peak_tflops_measured = 0.25
    df = _frame((EAGER1, eager), (inductor(1), compiled))
    text = report.table(df, columns=trial_table.columns_of(wide=True))
    rows = _cells(text)
    assert [(r["config"], r["TFLOP/s"], r["of peak"]) for r in rows] == [
        ("eager", "0.2", "80.0%"), ("default", "0.4", ">100%")]
    assert "notes" not in rows[0]
    # A long note is a footnote under the table.
    assert rows[1]["notes"] == "[1]"
    assert " ".join(text[text.index("\n[1] "):].split()) == (
        "[1] TFLOP/s above the peak measured on this machine (160% of it): the peak was "
        "under-measured (timed once a run, slower on a busy host)")


def test_a_row_without_a_latency_has_no_speedup_or_throughput_not_inf():
    # `tuner show --all` showed `infx` under `vs eager` (and inf items/s) for a p50 of 0: the
    # derived columns divided by it, and the Parquet and --json carried the inf too.
    import math

    from tests.support.rows import EAGER1, inductor, ok

    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(0.0)),
                (inductor(1, "reduce-overhead"), ok(float("inf"))),
                (inductor(1, "max-autotune"), ok(5.0)))
    rows = _cells(report.table(df, every_trial=True, columns=trial_table.columns_of(wide=True)))
    assert [(r["config"], r["vs eager"], r["items/s"]) for r in rows] == [
        ("eager", "1.00x", "100"), ("default", "-", "-"),
        ("reduce-overhead", "-", "-"), ("max-autotune", "2.00x", "200")]
    for column in ("speedup_vs_eager", "throughput_per_s", "break_even_calls"):
        assert not any(map(math.isinf, df[column].astype(float))), column


def test_an_eager_p50_of_zero_is_no_baseline():
    # The fastest eager was the baseline of every row: a p50 of 0 made each speedup 0.00x.
    from tests.support.rows import EAGER1, inductor, ok
    from tuner.domain.space import TrialConfig

    df = _frame((EAGER1, ok(10.0, compile_s=0.0)),
                (TrialConfig("eager", 1, channels_last=True), ok(0.0, compile_s=0.0)),
                (inductor(1), ok(5.0)))
    assert df["speedup_vs_eager"].tolist()[::2] == [1.0, 2.0]


def test_a_file_holding_an_inf_speedup_shows_none(tmp_path):
    # A file written before the fix holds inf where the p50 was 0: reading computes it afresh.
    from click.testing import CliRunner

    from tests.support.rows import EAGER1, inductor, ok
    from tuner.cli.app import main
    from tuner.data import files

    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(0.0)))
    df.loc[1, ["speedup_vs_eager", "throughput_per_s"]] = float("inf")
    files.write(df, tmp_path / "trials.parquet",
                {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cpu"}})
    assert files.read(tmp_path)[0]["speedup_vs_eager"].isna().tolist() == [False, True]
    out = CliRunner().invoke(main, ["show", str(tmp_path), "--all", "--wide"])
    assert out.exit_code == 0, out.output
    table = out.output[out.output.index("config "):].split("\ncompiling did not work")[0]
    compiled = _cells(table)[1]
    assert (compiled["config"], compiled["vs eager"], compiled["items/s"]) == \
        ("default", "-", "-")


def test_counts_of_one_are_singular_and_others_plural():
    # "1 trials failed", "1 graph breaks", "1 re-measurement(s) failed": one is singular.
    from tests.support.rows import EAGER1, failed, inductor, ok
    from tuner.words import plural

    assert [plural(n, "trial") for n in (0, 1, 2)] == ["0 trials", "1 trial", "2 trials"]
    compiled = ok(8.0)
    compiled.graph_breaks, compiled.recompiles = 1, 2
    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), compiled),
                (inductor(1, "reduce-overhead"), failed()))
    df.loc[1, "repeats_failed"] = 1
    meta = {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cpu"}}
    lines = report.render(df, df.iloc[0:0], meta).splitlines()
    assert lines[0] == "study s: m float32 on cpu, 3 trials"
    assert "1 trial failed (kept in trials.parquet):" in lines
    assert "1 finalist left out of the fronts and recommendations: a re-measurement in a fresh " \
        "process failed" in lines
    assert any(line.endswith("(trial 1): 1 re-measurement failed") for line in lines)
    assert report.notes(df.iloc[1]).split("; ") == ["1 graph break", "2 recompiles",
                                                     "1 re-measurement failed"]
    assert report.render(df.iloc[:1], df.iloc[0:0], meta).splitlines()[0] == \
        "study s: m float32 on cpu, 1 trial"


def test_show_json_carries_every_column_of_the_table_by_its_parquet_name():
    # `stream ms` was on the table but not in --json; with --all a failed row had no status; a
    # count with an empty cell elsewhere in its column came out as 0.0, where the Parquet has 0.
    import json

    from tests.support.rows import EAGER1, failed, inductor, ok
    from tuner.data.select import pareto

    compiled = ok(8.0, stream=6.0)
    compiled.graph_breaks = 0  # eager's is empty: the column reads back as floats
    df = _frame((EAGER1, ok(10.0, compile_s=0.0, stream=7.0)), (inductor(1), compiled),
                (inductor(1, "reduce-overhead"), failed()))
    meta = {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cuda"}}
    rows = json.loads(json.dumps(report.as_json(df, pareto(df), meta)))["pareto"]
    assert {c.column for c in trial_table.COLUMNS if not c.again} <= set(rows[0])
    assert [r["name"] for r in rows] == ["default", "eager"]
    assert [r["stream_ms_p50"] for r in rows] == [6.0, 7.0]
    assert rows[0]["graph_breaks"] == 0 and isinstance(rows[0]["graph_breaks"], int)
    every = report.as_json(df, df, meta)["pareto"]
    assert [(r["status"], r["message"]) for r in every][2] == ("compile_error", "it broke")


def test_every_trial_table_says_why_a_row_is_left_out():
    # `tuner show --all`: a failed trial's row was all dashes with no note, and an unverified
    # one read like any other.
    from tests.support.rows import EAGER1, failed, inductor, ok

    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), ok(8.0, correct=None)),
                (inductor(1, "reduce-overhead"), failed(Status.TIMEOUT)))
    table = report.table(df, every_trial=True)
    eager, unverified, timeout, *footnotes = table.splitlines()[1:]
    assert "left out" not in eager and "[" not in eager
    assert unverified.endswith("[1]")
    assert timeout.endswith("left out: timeout")
    assert footnotes == ["[1] left out: not verified correct"]


def test_a_batch_size_with_eager_alone_says_why_in_its_sentence():
    # Every compile failed (a CPU box without a compiler, say), or the search has measured only
    # the eager baseline so far: the table showed eager and no sentence at all.
    from tests.support.rows import EAGER1, EAGER8, failed, inductor, ok

    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (inductor(1), failed()),
                (inductor(1, "reduce-overhead"), failed(Status.CRASH)),
                (EAGER8, ok(40.0, compile_s=0.0)))
    sentences = report.verdicts(df)
    assert sentences[1] == ("compiling did not work at batch size 1: no compiled config finished "
                            "and matched eager (1 compile_error, 1 crash). Use eager (10.000 ms).")
    assert sentences[8] == ("batch size 8: only eager has been measured (40.000 ms), nothing "
                            "compiled to compare it with yet.")


def test_a_batch_size_with_nothing_to_rank_says_why_and_what_the_check_said():
    # A model whose eager output is NaN alone: every trial finished but none could be checked,
    # so no front, no verdict, no failure: the report ended on its header without a word.
    import dataclasses

    from tests.support.rows import EAGER1, EAGER8, failed, inductor, ok
    from tuner.data.select import pareto

    note = "no finite output values to compare: eager gives 8 NaN values"

    def unchecked(p50):
        return dataclasses.replace(ok(p50, correct=None), correctness_note=note)

    df = _frame((EAGER1, unchecked(10.0)), (inductor(1), unchecked(8.0)),
                (inductor(1, "reduce-overhead"), failed(Status.TIMEOUT)),
                (EAGER8, ok(40.0, compile_s=0.0)))
    meta = {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cpu"}}
    text = " ".join(report.render(df, pareto(df), meta).split())  # sentences wrap
    assert ("batch size 1: no config to rank or recommend: none finished, matched eager and "
            "measured a latency (2 not verified correct, 1 timeout). 2 could not be checked "
            f"against eager: {note}. `tuner show --all` lists every trial.") in text
    assert "batch size 8: no config to rank" not in text  # eager is on its front


def test_show_names_the_throughput_winner_where_the_front_leaves_it_out(tmp_path):
    # reduce-overhead streams 1,000 items/s back to back but waits 6 ms a request: cudagraphs
    # dominates it on latency, memory and warm-up, so the front left it out, and `recommend
    # --objective throughput` chose a config show never named.
    from click.testing import CliRunner

    from tests.support.synthetic import configs, write_study
    from tuner.cli.app import main
    from tuner.use.recommend import recommend

    slow_request = {"latency_ms_p50": 6.0, "latency_ms_p90": 6.1, "latency_ms_p99": 6.2,
                    "stream_ms_p50": 1.0}
    study = write_study(tmp_path, "t", trial_configs=configs([1, 8]),
                        changes={"inductor:reduce-overhead": slow_request})
    assert recommend(study, batch_size=1, objective="throughput").name == "reduce-overhead"
    shown = CliRunner().invoke(main, ["show", str(study)])
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.stdout.split())  # sentences wrap to the width
    assert ("batch size 1: the most items/s back to back is reduce-overhead (trial 2, "
            "1,000 items/s, 6.000 ms p50 per request): it is not on this front" in said)
    assert f"(`tuner recommend {study} --batch-size 1 --objective throughput`)" in said
    # At batch size 8 it is on the front (fastest there too): nothing more to say.
    assert "batch size 8: the most items/s" not in shown.stdout
    as_json = json.loads(CliRunner().invoke(main, ["show", str(study), "--json"]).stdout)
    assert [t["batch_size"] for t in as_json["throughput_off_front"]] == [1]
    assert "is reduce-overhead (trial 2" in as_json["throughput_off_front"][0]["text"]
    # --all lists every trial: nothing is off that table.
    assert "the most items/s" not in CliRunner().invoke(main, ["show", str(study), "--all"]).stdout


def test_the_default_view_answers_the_question_and_wide_shows_every_column(tmp_path):
    from click.testing import CliRunner

    from tests.support.synthetic import configs, write_study
    from tuner.cli.app import main

    study = str(write_study(tmp_path, "v", trial_configs=configs([1])))

    def header(*args: str) -> list[str]:
        out = CliRunner().invoke(main, ["show", study, *args])
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        return [h for h in re.split(r"\s{2,}", lines[lines.index(
            next(line for line in lines if line.startswith("config "))) ].strip())]

    assert header() == ["config", "p50 ms", "vs eager", "warm-up s", "memory", "notes"]
    assert header("--wide") == ["config", "p50 ms", "p90 ms", "p99 ms", "stream ms", "vs eager",
                                "items/s", "TFLOP/s", "of peak", "compile s", "warm-up s",
                                "memory", "notes"]
    assert header("--columns", "p99,items") == ["config", "p99 ms", "items/s", "notes"]
    assert header("--columns", "items, p99") == header("--columns", "p99,items")  # table order
    out = CliRunner().invoke(main, ["show", study, "--columns", "p99,item"])
    assert out.exit_code == 1 and out.stderr.startswith("Error: unknown column 'item' in "
                                                        "--columns: choose from p50, p90")
    out = CliRunner().invoke(main, ["show", study, "--wide", "--columns", "p99"])
    assert out.exit_code == 1 and "give one of them" in out.stderr
    out = CliRunner().invoke(main, ["show", study, "--importance", "--columns", "p99"])
    assert out.exit_code == 1 and "--importance has its own" in out.stderr


def test_the_tables_fit_the_width_columns_says(tmp_path):
    # A long name and long notes: the name wraps in its column, the notes go under the table,
    # and a figure is never cut.
    from click.testing import CliRunner

    from tests.support.rows import EAGER1, ok
    from tuner.cli.app import main
    from tuner.data import files
    from tuner.domain.space import TrialConfig

    options = {"coordinate_descent_tuning": True, "epilogue_fusion": False, "freezing": True,
               "shape_padding": False}
    long = TrialConfig("inductor", 1, "reduce-overhead", False, channels_last=True,
                       options=options)
    busy = ok(1.2345)
    busy.host_other_cpu_cores = 2.5
    df = _frame((EAGER1, ok(10.0, compile_s=0.0)), (long, busy))
    files.write(df, tmp_path / "trials.parquet",
                {"study": "s", "workload": {"model": "m", "dtype": "float32", "device": "cuda"}})
    for width in (100, 80, 70):
        out = CliRunner().invoke(main, ["show", str(tmp_path)], env={"COLUMNS": str(width)})
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        assert max(map(len, lines)) <= width, (width, out.stdout)
        assert any("1.234" in line for line in lines)  # the figure whole
        said = " ".join(lines)
        assert ("reduce-overhead +channels_last +coordinate_descent_tuning -epilogue_fusion "
                "+freezing -shape_padding") in " ".join(said.split())
        # Said in the row, explained once under the table (not a footnote per row).
        row = next(line for line in lines if line.startswith("reduce-overhead"))
        assert re.search(r"  host( busy)?( 2\.5)?( cores)?$", row) and "[1]" not in said
        assert ("host busy N cores: other processes used N CPU cores while it measured"
                in " ".join(said.split()))
