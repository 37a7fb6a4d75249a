"""A max-autotune mode is tried once its compile is known to fit the compile budget.

A max-autotune mode (:func:`tuner.domain.config.is_max_autotune`) searches kernels as it
compiles: resnet18's had no result after 380 s on the H200, so with the default 5-minute budget
(``--compile-timeout``) each of its baselines would spend 5 minutes and end ``compile_timeout``.
With a budget, each such mode is measured at one batch size first, the *probe*: its baseline at
the smallest batch size searched (where the model does not fail in eager), queued after every
other baseline (:meth:`Probes.baselines`). Until the probe has a result no other config of the
mode runs, in this search or any worker of the study (:meth:`Probes.held`). Then the probe's
compile either

- fit the budget (any other end than ``compile_timeout``): the mode's other baselines are
  queued and the mode is searched as any other; or
- ran past it: the mode's other configs at that batch size are skipped, as after any compile
  past the budget (:func:`tuner.study.skips.skip_mode`), and those at the other batch sizes
  too (:func:`skip_elsewhere`), each a not-run ``compile_timeout`` row that says why.

Which of the two is read from the stored rows, never kept in memory (:func:`read_verdicts`): the
first trial of the mode that started and ran (a not-run row ran nothing) decides, so a resume,
and every worker of the study, decides as the run that measured it. Without a budget nothing is
probed, and the max-autotune baselines are queued last, all of them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Container, Mapping

from tuner.domain.config import INDUCTOR, TrialConfig, is_max_autotune
from tuner.domain.naming import PLAIN, NameBasis, config_name
from tuner.domain.records import NOT_RUN, Status, TrialResult
from tuner.domain.space import SearchSpace
from tuner.study.claims import Claims
from tuner.study.fronts import Fronts
from tuner.study.record import stored_result, was_run
from tuner.study.skips import record_skipped
from tuner.study.storage import CONFIG_ATTR
from tuner.words import plural


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a max-autotune mode's probe found: the first trial of the mode that ran."""

    mode: str
    number: int  # the tuner's number of that trial
    config: TrialConfig
    fits: bool  # False: its compile ran past --compile-timeout


def probed_modes(space: SearchSpace, budget_s: float | None) -> tuple[str, ...]:
    """The space's max-autotune modes, each probed before it is searched; none without a
    compile budget."""
    if budget_s is None or INDUCTOR not in space.backends:
        return ()
    return tuple(mode for mode in space.modes if is_max_autotune(mode))


def read_verdicts(fronts: Fronts, modes: Container[str]) -> dict[str, Verdict]:
    """The verdict of each of ``modes`` that has one: its trial that started first of those
    that ran (a stored record that is not a not-run row)."""
    first: dict[str, tuple[tuple[datetime.datetime, int], Verdict]] = {}
    for stored in fronts.trials():
        record = stored_result(stored.frozen)
        if record is None or not was_run(record):
            continue
        config = TrialConfig.from_dict(stored.frozen.user_attrs[CONFIG_ATTR])
        if config.backend != INDUCTOR or config.mode is None or config.mode not in modes:
            continue
        order = (stored.frozen.datetime_start or datetime.datetime.max, stored.number)
        if config.mode not in first or order < first[config.mode][0]:
            fits = record.get("status") != Status.COMPILE_TIMEOUT.value
            first[config.mode] = order, Verdict(config.mode, stored.number, config, fits)
    return {mode: verdict for mode, (_, verdict) in first.items()}


@dataclasses.dataclass(frozen=True)
class Probes:
    """Where the space's max-autotune modes stand, as the storage said when read."""

    modes: tuple[str, ...]  # the modes probed (:func:`probed_modes`)
    verdicts: Mapping[str, Verdict]  # of those, each whose probe ran
    due: Mapping[str, TrialConfig]  # the others: the probe each waits for

    @classmethod
    def read(cls, fronts: Fronts, space: SearchSpace, budget_s: float | None,
             broken: Container[int], known: Mapping[str, Verdict] | None = None) -> Probes:
        """The probes of ``space``; ``broken``: the batch sizes skipped because the model fails
        there in eager (no probe there); ``known``: verdicts read before, which never change
        (the storage is read only while a mode has none)."""
        modes = probed_modes(space, budget_s)
        verdicts = dict(known or {})
        if any(mode not in verdicts for mode in modes):
            verdicts = read_verdicts(fronts, modes)
        sizes = [bs for bs in space.batch_sizes if bs not in broken]
        due = {str(c.mode): c for c in space.baselines() if sizes and c.batch_size == min(sizes)
               and c.backend == INDUCTOR and c.mode in modes and c.mode not in verdicts}
        return cls(modes, verdicts, due)

    def probed(self, config: TrialConfig) -> bool:
        """Whether ``config`` is of a mode that is probed before it is searched."""
        return config.backend == INDUCTOR and config.mode in self.modes

    def held(self, config: TrialConfig) -> bool:
        """Whether ``config`` is not to run: its mode waits for its probe and it is not the
        probe, or its mode's probe compiled past the budget (its rows say so)."""
        if not self.probed(config):
            return False
        verdict = self.verdicts.get(str(config.mode))
        if verdict is not None:
            return not verdict.fits
        probe = self.due.get(str(config.mode))
        return probe is None or probe.key != config.key

    def baselines(self, space: SearchSpace) -> list[TrialConfig]:
        """The baselines to queue, in order: those of the modes not probed, then each probe
        that has not run, then the other baselines of each mode whose probe fit the budget."""
        every = space.baselines()
        fit = {mode for mode, verdict in self.verdicts.items() if verdict.fits}
        return ([c for c in every if not self.probed(c)]
                + [c for c in every if c in self.due.values()]
                + [c for c in every if self.probed(c) and c.mode in fit])


def skip_elsewhere(claims: Claims, space: SearchSpace, verdict: Verdict, budget_s: float,
                   not_run: set[str], say: Callable[[str], None],
                   names: NameBasis = PLAIN) -> int:
    """After the probe of ``verdict`` compiled past the budget: the mode's configs at the other
    batch sizes that no trial holds are not-run ``compile_timeout`` rows that say why (as those
    at its own batch size are: :func:`tuner.study.skips.skip_mode`), failures to the sampler,
    said in one line. Their keys join ``not_run``; ``names``: what the study's config names
    are relative to. Returns how many."""
    batch_size = verdict.config.batch_size
    reason = (f"{verdict.mode}'s compile at batch size {batch_size} did not fit the "
              f"{budget_words(budget_s)} compile budget")
    why = TrialResult.failure(
        Status.COMPILE_TIMEOUT, f"{NOT_RUN}{reason} (trial {verdict.number}, "
        f"{config_name(verdict.config, names)}); the mode is skipped at every batch size (a new study with "
        "a larger --compile-timeout measures it)")
    skipped = record_skipped(
        claims, space, (c for c in space.configs() if c.backend == INDUCTOR
                        and c.mode == verdict.mode and c.batch_size != batch_size), why, not_run)
    if skipped:
        say(f"{reason} (trial {verdict.number}): it is skipped at "
            f"{batch_sizes(sorted({c.batch_size for c in skipped}))} too "
            f"({plural(len(skipped), 'config')} not run)")
    return len(skipped)


def batch_sizes(sizes: list[int]) -> str:
    """``batch size 8``, ``batch sizes 8 and 32``, ``batch sizes 2, 8 and 32``."""
    if len(sizes) == 1:
        return f"batch size {sizes[0]}"
    return f"batch sizes {', '.join(map(str, sizes[:-1]))} and {sizes[-1]}"


def budget_words(budget_s: float) -> str:
    """A compile budget as an adjective: ``5-minute``, ``90-second``."""
    if budget_s >= 60 and budget_s % 60 == 0:
        return f"{budget_s / 60:g}-minute"
    return f"{budget_s:g}-second"
