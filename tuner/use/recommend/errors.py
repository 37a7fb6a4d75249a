"""What :func:`~tuner.use.recommend.recommend` refuses with a message of its own, in its
keywords, that ``tuner recommend`` words again with its options: a study of several batch sizes
given none, and limits that no config meets."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from tuner.data.rows import NAME
from tuner.data.select import Constraints, rank
from tuner.errors import UserError


class BatchSizeNeeded(UserError):
    """A study that measured several batch sizes, asked for an objective other than throughput
    with no batch size. The message names :func:`recommend`'s keywords; ``tuner recommend``
    names its options instead (:meth:`message`)."""

    def __init__(self, study: str, sizes: list[int]) -> None:
        self.study, self.sizes = study, sizes
        super().__init__(self.message("batch_size=N", 'objective="throughput"'))

    def message(self, batch_size: str, throughput: str) -> str:
        return (f"study {self.study!r} measured batch sizes {sizes_text(self.sizes)}: give one "
                f"({batch_size}), or use {throughput} to let the batch size be chosen too")


class LimitsUnmet(UserError):
    """No config meets the limits. The message names the closest config and the limits it
    breaks, by :func:`recommend`'s keywords; ``tuner recommend`` names its options instead
    (:meth:`message`)."""

    def __init__(self, where: str, candidates: pd.DataFrame, constraints: Constraints,
                 objective: str) -> None:
        ranked = rank(candidates, objective)
        # Closest: the smallest total overshoot, relative to each limit; the objective breaks ties.
        excess = [sum(min(e, 1e9) for _, e, _ in constraints.violations(r))
                  for _, r in ranked.iterrows()]
        self.where, self.checked, self.constraints = where, len(candidates), constraints
        self.row = ranked.iloc[min(range(len(excess)), key=excess.__getitem__)]
        super().__init__(self.message())

    def message(self, called: Callable[[str], str] = str) -> str:
        """The message, ``called`` naming each limit (the CLI: ``--max-compile-s``)."""
        row, broken = self.row, self.constraints.violations(self.row, called)
        limits = ", ".join(f"{called(k)}={v:g}" for k, v in self.constraints.to_dict().items()
                           if v is not None)
        return (f"no config of {self.where} meets {limits} ({self.checked} checked); the "
                f"closest is {row[NAME]} (batch size {int(row['batch_size'])}, trial "
                f"{int(row['trial_number'])}), which {' and '.join(s for _, _, s in broken)}: "
                f"relax {' and '.join(called(n) for n, _, _ in broken)}")


def sizes_text(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)
