"""benchmarks/slow_mode.py's summary and rows, from made-up runs: nothing measured."""

from __future__ import annotations

from benchmarks import slow_mode


def test_the_slow_mode_summary_splits_runs_by_p50_and_compares_each_kernels_gpu_time():
    def run(way, p50, conv_us):
        return {"way": way, "eager_first_s": 1.0, "eager_p50_ms": 4.0, "compiled_first_s": 15.0,
                "compiled_p50_ms": p50, "eager_p50_ms_after": 4.0,
                "eager_kernels": {"conv": [1.0, 3000.0]},
                "compiled_kernels": {"conv": [1.0, conv_us], "add": [2.0, 200.0]}}

    runs = [run("quiet", 2.2, 1500.0), run("busy", 3.6, 1500.0), run("quiet", 3.4, 1600.0),
            {"way": "busy", "error": "CUDA error"}]
    lines = slow_mode.summary(runs, slow_ms=3.0)
    assert "- quiet: compiled p50 slow (>= 3.0 ms) in 1 of 2" in lines[3]
    assert "- busy: compiled p50 slow (>= 3.0 ms) in 1 of 1" in lines[4]
    assert ("GPU time a call, all kernels: slow runs 1.750 ms, fast runs 1.700 ms "
            "(2 slow, 1 fast)") in lines
    assert "| `conv` | 1550.0 | 1500.0 | 2/2 / 1/1 |" in lines
    assert slow_mode.row_line(4, runs[3]) == "| 4 | busy | error: CUDA error |"
    assert "| 1.700 / 3.000 |" not in slow_mode.row_line(1, runs[0])
    assert "| 3.000 / 1.700 |" in slow_mode.row_line(1, runs[0])


def test_the_slow_mode_summary_gives_each_groups_fastest_and_slowest_core():
    def run(p50, loops):
        return {"way": "quiet", "eager_first_s": 1.0, "eager_p50_ms": 4.0, "compiled_first_s": 15.0,
                "compiled_p50_ms": p50, "eager_p50_ms_after": 4.0, "eager_kernels": {},
                "compiled_kernels": {"conv": [1.0, 1500.0]}, "core_loops": loops}

    runs = [run(3.4, {"0": 2.4, "1": 4.8, "2": 5.0}), run(2.2, {"0": 2.6, "1": 2.5, "2": 4.4}),
            run(2.3, {"0": 2.3, "1": 4.6})]
    lines = slow_mode.summary(runs, slow_ms=3.0)
    assert ("- slow runs' cores (1 runs): fastest core's loop median 2.40 ms, slowest core's "
            "5.00 ms") in lines
    assert ("- fast runs' cores (2 runs): fastest core's loop median 2.40 ms, slowest core's "
            "4.50 ms") in lines
    assert slow_mode.row_line(1, runs[0]).endswith("| 2.40 / 4.80 / 5.00 |")
