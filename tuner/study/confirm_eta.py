"""The ETA of the finalists' re-measurements: each finalist's re-measurements still due, each
priced by this run's re-measurements of the same label, else of the same kind (a compile costs
far more than an eager call), else by the finalist's own search trial (a fresh process too).

Under ``--confirm auto`` a finalist takes at least the fewest; one past them whose interval is
still wide is counted up to the most it may take (``Repeats.most``), not one more at a time:
counted one at a time, "ETA at least 3 min" stood for 7 minutes while a noisy finalist took
its repeats. The ETA is "at least" only where every count is a floor.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tuner.domain.config import TrialConfig

if TYPE_CHECKING:
    from tuner.study.repeats import Repeats


@dataclasses.dataclass(frozen=True)
class Due:
    """One finalist's re-measurements still due: how many, whether that is a floor (auto's
    fewest: it may need more), and what prices them."""

    config: TrialConfig
    count: int
    floor: bool
    trial_s: float | None  # its search trial's seconds (wall_s), where known


def due(plan: Repeats, config: TrialConfig, p50s: list[float], records: int,
        trial_s: float | None) -> Due:
    """The re-measurements due of a finalist with ``records`` of them (``p50s``: its trial's
    and theirs)."""
    if plan.fixed is not None:
        return Due(config, max(0, plan.fixed - records), False, trial_s)
    if records < plan.least:
        return Due(config, plan.least - records, True, trial_s)
    if plan.more(p50s, records):
        return Due(config, plan.most - records, False, trial_s)
    return Due(config, 0, False, trial_s)


def confirm_eta(dues: Sequence[Due], history: list[tuple[TrialConfig, float]]
                ) -> tuple[float, bool] | None:
    """(seconds, at least) of the re-measurements ``dues``, priced by ``history`` (this run's
    re-measurements and their seconds); None where none is due."""
    dues = [d for d in dues if d.count]
    if not dues:
        return None
    return (sum(d.count * _price(d, history) for d in dues), all(d.floor for d in dues))


def _price(due: Due, history: list[tuple[TrialConfig, float]]) -> float:
    for same in (lambda c: c.label == due.config.label,
                 lambda c: c.compiled == due.config.compiled):
        seconds = [s for config, s in history if same(config)]
        if seconds:
            return statistics.fmean(seconds)
    if due.trial_s is not None:
        return due.trial_s
    return statistics.fmean(s for _, s in history) if history else 0.0
