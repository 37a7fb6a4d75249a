"""benchmarks/fleet_startup.py's marks, read off made-up lines of the command's output."""

from __future__ import annotations

from benchmarks import fleet_startup


def test_fleet_startup_reads_each_mark_off_the_lines_the_command_wrote():
    lines = [(8.7, "study s in d: 2 configs in the space, target 1 trial, one worker per GPU (0); "
                   "each line starts with its GPU"),
             (11.7, "gpu0 study s in d: 2 configs in the space, target 1 trial; progress below"),
             (11.8, "gpu0   running eager contiguous bs=1 ..."),
             (15.0, "tuner: a note from a trial process"),
             (20.3, "gpu0 [1/1] eager contiguous bs=1: p50 1.394 ms"),
             (20.5, "gpu0 stopped: reached 1 trial")]
    assert fleet_startup.marks_of(lines) == {"parent checked": 8.7, "worker joined": 11.7,
                                             "first trial claimed": 11.8,
                                             "first trial done": 20.3}
