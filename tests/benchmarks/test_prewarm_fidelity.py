"""benchmarks/prewarm_fidelity.py's summary, rows and pooled files, from made-up numbers: no
trials run."""

from __future__ import annotations

from benchmarks import prewarm_fidelity
from tuner.domain.records import Status, TrialResult


def test_the_prewarm_fidelity_summary_compares_each_ways_ratio_to_its_control():
    lines = prewarm_fidelity.summary({"on": [1.5, 1.1, 1.2], "off": [1.0, 0.98]},
                                     {"on": [2.1, 2.2, 3.4], "control": [2.0, 2.4]})
    assert "- on: 1.200 (1.100-1.500), 3" in lines and "- off: 0.990 (0.980-1.000), 2" in lines
    assert "- on: 2.2000 (2.1000-3.4000), 3" in lines and "- control: 2.2000 (2.0000-2.4000), 2" \
        in lines
    assert lines[-1] == "prewarm fidelity: median trial / control, on 1.200, off 0.990"


def test_a_prewarm_fidelity_row_names_the_core_each_trial_timed_on():
    def result(cpu, gpu=None):
        return TrialResult(status=Status.OK, latency_ms_p50=2.2, host_loop_ms=2.4, timing_cpu=cpu,
                           gpu_time_ms=gpu)

    line = prewarm_fidelity.row(1, "on", result(None), result(7, 1.65))
    assert line.endswith("| 2.40 / 2.40 | - / 7 | - / 1.6500 |")


def test_pooled_prewarm_fidelity_files_count_every_finished_sample_of_each_way(tmp_path):
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("| 0 | on | 2.0 | 3.2 | 1.6 | True |\n| 1 | off | 2.0 | 2.0 | 1.0 | None |\n"
                     "| 2 | on | | | | error: CUDA error |\n")
    second.write_text("# header\n| 0 | off | 3.1 | 2.2 | 0.71 | None |\n"
                      "| 1 | on | 2.0 | 2.4 | 1.2 | True |\n")
    lines = prewarm_fidelity.pool([first, second])
    assert "| `a.md` | 1 | 1 | 1.600 | 1.000 |" in lines
    assert "| `b.md` | 1 | 1 | 1.200 | 0.710 |" in lines
    assert lines[-2].startswith("all: trial / control, median: on 1.400 (2), off 0.855 (2); ")
    assert lines[-1] == "slow trials (p50 >= 3.0 ms): on 1 of 2, off 0 of 2, control 1 of 4"
    # Rows with the GPU's own time a call (control / trial, the 11th cell): its ratio by way.
    gpu = tmp_path / "gpu.md"
    gpu.write_text("| 0 | on | 2.0 | 3.0 | 1.5 | True | 0.2 | 13 | 2.4 / 4.4 | - / - | 1.60 / 1.68 |\n"
                   "| 1 | off | 2.0 | 2.0 | 1.0 | None | 1.3 | 13 | 2.4 / 2.4 | - / - | 1.60 / 1.60 |\n"
                   "| 2 | on | 2.0 | 2.1 | 1.05 | True | 0.2 | 13 | 2.4 / 2.4 | - / - | - / 1.60 |\n")
    lines = prewarm_fidelity.pool([first, gpu])
    assert lines[-2].startswith("GPU time a call (the kernels' own), trial / control, median: "
                                "on 1.050 (1), off 1.000 (1); ")
    # And each way's own figures: the controls beside a readied process apart from the others.
    assert lines[-1] == ("GPU time a call, ms, median: controls of the samples readied ahead "
                         "1.600 (1), of the others 1.600 (1); trials readied ahead 1.680 (1), "
                         "others 1.600 (1)")
    assert prewarm_fidelity._greater_p([3.0, 4.0], [1.0, 2.0]) < 0.1 < prewarm_fidelity._greater_p(
        [1.0, 2.0], [3.0, 4.0])
