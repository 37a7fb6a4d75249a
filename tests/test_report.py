"""The text of `tuner show`."""

from __future__ import annotations

import pandas as pd

from tuner.render import study as report


def test_eager_rows_show_no_compile_time():
    rows = pd.DataFrame([{"label": "eager", "backend": "eager", "compile_s_cold": 0.7},
                         {"label": "inductor:default", "backend": "inductor",
                          "compile_s_cold": 12.5}])
    text = report.table(rows)
    eager_line, compiled_line = text.splitlines()[1:]
    assert "0.7" not in eager_line and "12.5" in compiled_line
