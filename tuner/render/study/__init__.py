"""``tuner show`` for people and scripts: the Pareto table per batch size, a plain verdict, the
shape-schedule replay and the failures.

The whole report is :mod:`~tuner.render.study.report`'s; the table of trials
(:mod:`~tuner.render.study.trial_table`), the verdicts (:mod:`~tuner.render.study.verdicts`),
what the fronts leave out (:mod:`~tuner.render.study.off_front`), the shape-schedule replay
(:mod:`~tuner.render.study.schedule`) and what went wrong (:mod:`~tuner.render.study.failures`)
are each a module beside it.
"""

from tuner.render.study.report import NO_TRIALS, as_json, render
from tuner.render.study.trial_table import notes, table
from tuner.render.study.verdicts import verdicts

__all__ = ["NO_TRIALS", "as_json", "notes", "render", "table", "verdicts"]
