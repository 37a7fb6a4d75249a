"""benchmarks/import_beside_compile.py's summary, from made-up numbers: no compiles."""

from __future__ import annotations

import re

from benchmarks import import_beside_compile as ibc
from tuner.domain.records import Status, TrialResult

LINE = re.compile(r"^import beside compile: alone \d+\.\d\d s, with import \d+\.\d\d s, "
                  r"cost [+-]\d+\.\d %$")


def ok(compile_s: float, wall_s: float = 0.0) -> TrialResult:
    return TrialResult(status=Status.OK, compile_s_cold=compile_s, wall_s=wall_s)


def test_the_verdict_is_the_medians_and_their_difference_in_percent_of_alone():
    line = ibc.verdict([10.0, 30.0, 11.0], [12.0, 12.5, 100.0])
    assert line == "import beside compile: alone 11.00 s, with import 12.50 s, cost +13.6 %"
    assert LINE.match(line)
    faster = ibc.verdict([20.0, 20.0], [19.0, 19.0])
    assert faster.endswith("cost -5.0 %") and LINE.match(faster)


def test_the_report_ends_with_the_verdict_over_the_ok_runs_of_each_kind():
    runs = [(ibc.ALONE, ok(10.0, 14.0), 0.5), (ibc.BESIDE, ok(12.0, 16.0), 0.7),
            (ibc.ALONE, ok(12.0), 1.0),
            (ibc.BESIDE, TrialResult.failure(Status.TIMEOUT, "no result"), 1.2),
            (ibc.BESIDE, ok(13.0), 0.9)]
    text = ibc.report(runs, "# header")
    last = text.splitlines()[-1]
    assert last == "import beside compile: alone 11.00 s, with import 12.50 s, cost +13.6 %"
    assert LINE.match(last)
    assert text.startswith("# header")
    assert "| 4 | with import | - | - | - | 1.2 | timeout |" in text
    assert "alone: median 11.00 s, min 10.00, max 12.00 (2 runs)" in text


def test_no_verdict_without_an_ok_run_of_each_kind():
    runs = [(ibc.ALONE, ok(10.0), 0.0),
            (ibc.BESIDE, TrialResult.failure(Status.CRASH, "died"), 0.0)]
    last = ibc.report(runs, "# h").splitlines()[-1]
    assert not LINE.match(last) and "not measured" in last
