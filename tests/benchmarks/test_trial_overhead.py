"""benchmarks/trial_overhead.py: the overhead figure, the report's last lines and each way's
heading, from made-up rows: no trials run."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks import trial_overhead


def test_the_overhead_figure_is_the_mean_after_the_first_trial_of_each_batch_size():
    rows = [  # trial, batch size, status, wall, compile, warm-up, measure, stream
        (0, 1, "ok", 10.0, 0.0, 0.5, 2.0, 2.0), (1, 8, "ok", 12.0, 0.0, 0.5, 2.0, 2.0),
        (2, 1, "ok", 30.0, 20.0, 0.5, 2.0, 2.0), (3, 8, "oom", 1.0, None, None, None, None),
        (4, 8, "ok", 26.0, 20.0, 0.5, 2.0, 2.0), (5, 1, "ok", 28.5, 20.0, 0.5, 2.0, 2.0)]
    df = pd.DataFrame(rows, columns=["trial_number", "batch_size", "status", "wall_s",
                                     "compile_s_cold", "warmup_s", "measure_s", "stream_s"])
    for column in ("launch_s", "process_s", "import_s", "build_s", "eager_reference_s",
                   "quiet_wait_s", "replay_s", "tuner_overhead_s"):
        df[column] = 0.0
    df["label"], df["prebuilt"], df["reference_reused"] = "x", True, True
    table = trial_overhead.overhead_table(df)
    assert table["overhead_s"].tolist() == [5.5, 7.5, 5.5, 1.5, 4.0]
    assert trial_overhead.mean_after_first(table) == pytest.approx((5.5 + 1.5 + 4.0) / 3)
    assert "pre-built models 3 of 3, devices readied 0 of 3" in "\n".join(
        trial_overhead.report(table))
    assert "readied process held" not in "\n".join(trial_overhead.report(table))
    df["prewarm_vram_bytes_nvml"] = [None, None, 500 * 2**20, None, 700 * 2**20, None]
    assert ("GPU memory a readied process held beside the trial before it (NVML): 500-700 MiB "
            "over 2 trials") in trial_overhead.report(trial_overhead.overhead_table(df))


def test_the_overhead_report_ends_with_the_line_the_issue_names_and_compares_latencies():
    lines = trial_overhead.last_lines({"no-prewarm": 1.4, "fresh": 12.0, "pre-started": 0.9})
    assert lines == ["overhead per trial, other ways: no-prewarm 1.40 s",
                     "overhead per trial: fresh 12.00 s, pre-started 0.90 s"]
    assert trial_overhead.last_lines({"pre-started": 0.9, "no-prewarm": None}) == [
        "overhead per trial: pre-started 0.90 s, no-prewarm ? s"]
    one = pd.DataFrame({"label": ["eager", "inductor"], "batch_size": [1, 1],
                        "latency_ms_p50": [2.0, 1.0]})
    text = "\n".join(trial_overhead.latency_by_way(
        {"a": one, "b": one.assign(latency_ms_p50=[2.1, 1.1])}))
    assert "eager    1           2.0  2.1" in text and "inductor 1           1.0  1.1" in text
    with pytest.raises(SystemExit):
        trial_overhead.main(["--measure", "--ways", "fresh,pre-startd"])


def test_a_ways_heading_names_the_settings_it_ran_under_even_from_the_callers_environment():
    # A "pre-started" way measured under the caller's TUNER_PREWARM=1 is not the default's.
    assert trial_overhead.way_settings({"TUNER_PREWARM": "1", "HOME": "/root"}) == \
        ", TUNER_PREWARM=1"
    assert trial_overhead.way_settings({"TUNER_TEMPLATE": "0", "TUNER_PREWARM": "0"}) == \
        ", TUNER_PREWARM=0, TUNER_TEMPLATE=0"
    assert trial_overhead.way_settings({}) == ""
