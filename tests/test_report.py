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
