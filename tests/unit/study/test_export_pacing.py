"""A search rewrites its Parquet files after a trial only while that takes a small share of its
time (tuner.study.export.ExportPacer), and the end of a run, or an error, writes every trial."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.specs import make_spec
from tuner.fake import FakeRunner
from tuner.study.export import ExportPacer
from tuner.study.search import Search


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_files_are_rewritten_once_the_time_since_the_last_write_is_twenty_times_its_cost():
    clock = Clock()
    pacer = ExportPacer(share=0.05, from_s=0.2, clock=clock)
    assert pacer.due()  # the first write of a run

    written: list[float] = []

    def write() -> pd.DataFrame:
        written.append(clock.now)
        clock.now += 0.5  # the write took 0.5 s
        return pd.DataFrame()

    def instead() -> pd.DataFrame:
        return pd.DataFrame()

    pacer.write(write, instead)
    clock.now += 9.9
    assert not pacer.due()  # 9.9 s since it ended: under 20 x 0.5 s
    pacer.write(write, instead)
    assert written == [100.0] and pacer.behind
    pacer.write(write, instead, force=True)  # the end of a run
    assert written == [100.0, 110.4] and not pacer.behind
    clock.now += 9.9
    assert not pacer.due()
    clock.now += 0.1
    assert pacer.due()


def test_a_quick_write_is_made_after_every_trial():
    clock = Clock()
    pacer = ExportPacer(share=0.05, from_s=0.2, clock=clock)
    written: list[float] = []

    def write() -> pd.DataFrame:
        written.append(clock.now)
        clock.now += 0.19  # under the 0.2 s from which writes are paced
        return pd.DataFrame()

    for _ in range(3):
        pacer.write(write, pd.DataFrame)
        clock.now += 0.01
    assert len(written) == 3 and not pacer.behind


def _never_after_the_first(search: Search) -> None:
    # after its first write, none is due in this test, however quick
    search._pacer = ExportPacer(share=1e-9, from_s=0.0)


def test_skipped_rewrites_are_made_up_at_the_end_of_the_run(tmp_path):
    spec = make_spec(tmp_path)
    rows_seen: list[int] = []
    search = Search(spec, FakeRunner(), on_trial=lambda event: rows_seen.append(
        len(pd.read_parquet(spec.layout.trials_file))))
    _never_after_the_first(search)
    summary = search.run()
    assert len(rows_seen) > 3
    assert rows_seen == [1] * len(rows_seen)  # only the first trial's write was made mid-run
    written = pd.read_parquet(spec.layout.trials_file)
    assert len(written) == len(summary.trials) == len(rows_seen)
    assert not search._pacer.behind


class BreaksAfter(FakeRunner):
    """Raises in its ``n``-th trial, as a runner whose storage or host gave way would."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def run(self, request, *args, **kwargs):
        if len(self.calls) == self.n - 1:
            raise RuntimeError("the host went away")
        return super().run(request, *args, **kwargs)


def test_a_run_that_raises_still_writes_every_trial_it_stored(tmp_path):
    spec = make_spec(tmp_path)
    search = Search(spec, BreaksAfter(4))
    _never_after_the_first(search)
    with pytest.raises(RuntimeError, match="the host went away"):
        search.run()
    assert len(pd.read_parquet(spec.layout.trials_file)) == 3
