"""benchmarks/study_growth.py's blocks of trials, from made-up times: no search run."""

from __future__ import annotations

import pandas as pd

from benchmarks import study_growth


def test_study_growth_gives_each_block_of_trials_in_the_order_they_ran():
    table = study_growth.blocks(pd.Series([1.0, 3.0, 2.0, 10.0, 20.0]), 2)
    assert list(table["trials"]) == ["1-2", "3-4", "5-5"]
    assert list(table["mean s"]) == [2.0, 6.0, 20.0]
    assert list(table["max s"]) == [3.0, 10.0, 20.0]
    # trial numbers 4, 5, 9, 10, 14: the third and fifth came after three pruned proposals
    asked = study_growth.blocks(pd.Series([1.0, 3.0, 2.0, 10.0, 20.0]), 2,
                                pd.Series([4, 5, 9, 10, 14]))["asked a trial"]
    assert asked.iloc[0] == 1.0 and list(asked.iloc[1:]) == [2.5, 4.0]
