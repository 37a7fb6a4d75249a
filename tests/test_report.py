"""The text of `tuner show`."""

from __future__ import annotations

import pandas as pd

from tuner.data import schema
from tuner.render import study as report


def test_eager_rows_show_no_compile_time():
    rows = pd.DataFrame([{"label": "eager", "backend": "eager", "compile_s_cold": 0.7},
                         {"label": "inductor:default", "backend": "inductor",
                          "compile_s_cold": 12.5}])
    text = report.table(rows)
    eager_line, compiled_line = text.splitlines()[1:]
    assert "0.7" not in eager_line and "12.5" in compiled_line


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
