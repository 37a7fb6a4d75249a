"""One search run's side of the max-autotune probes (:mod:`tuner.study.probe`): read from the
storage between trials while a probed mode has no verdict, and each verdict acted on once a run.
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.domain.config import TrialConfig
from tuner.study.claims import Claims, StudyState
from tuner.study.probe import Probes, probed_modes, skip_elsewhere
from tuner.study.skips import Skipped
from tuner.study.spec import StudySpec
from tuner.study.start_from import queue_first


class Probing:
    """Which configs wait for a probe, as the storage said between the last two trials, and
    which verdicts this run has acted on."""

    def __init__(self, spec: StudySpec, claims: Claims, start_from: dict[str, object] | None,
                 say: Callable[[str], None]) -> None:
        """``start_from``: the study's :class:`tuner.study.start_plan.StartFrom`, as a dict
        (its configs that waited for a probe are queued once it fits)."""
        self.spec, self.claims, self.start_from, self.say = spec, claims, start_from, say
        self.budget_s = spec.protocol.compile_timeout_s
        self.now = Probes(probed_modes(spec.space, self.budget_s), {}, {})
        self._acted: set[str] = set()  # modes whose verdict this run acted on

    def held(self, config: TrialConfig) -> bool:
        """Whether ``config`` is not to run now (:meth:`tuner.study.probe.Probes.held`)."""
        return self.now.held(config)

    def between_trials(self, state: StudyState, skipped: Skipped) -> bool:
        """Read the probes afresh and act on each verdict this run has not: a mode whose probe
        compiled past the budget is skipped at the other batch sizes (rows that say so), and a
        mode whose probe fit has its other baselines queued, as is a probe nothing holds (its
        batch size turned out broken, so the probe moved). ``state``: the study's, read just
        before; ``skipped``: what this run skips. Whether the study changed (read it again)."""
        if not self.now.modes:
            return False
        self.now = Probes.read(self.claims.fronts, self.spec.space, self.budget_s,
                               skipped.broken, self.now.verdicts)
        queue = any(not state.taken(probe.key) for probe in self.now.due.values())
        changed = False
        for mode, verdict in self.now.verdicts.items():
            if mode in self._acted:
                continue
            self._acted.add(mode)
            if verdict.fits:
                queue = True
            elif self.budget_s is not None:  # it has one: the mode is probed
                changed |= skip_elsewhere(self.claims, self.spec.space, verdict, self.budget_s,
                                          skipped.not_run, self.say, self.spec.names) > 0
        if queue:
            queue_first(self.claims, self.spec, self.start_from, lambda text: None,
                        skipped.broken)
        return changed or queue
