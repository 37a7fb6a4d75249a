"""Configs a search skips without a trial, each a row that says why: those of a batch size where
the model fails in eager (:mod:`tuner.study.broken`), and the other configs of a backend and mode
whose compile ran past --compile-timeout there."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from tuner.domain.config import TrialConfig
from tuner.domain.naming import PLAIN, NameBasis, config_name
from tuner.domain.records import NOT_RUN, Status, TrialResult
from tuner.domain.space import SearchSpace
from tuner.errors import UserError
from tuner.study.broken import Breakage, breakage, not_run_result
from tuner.study.claims import Claims, StudyState
from tuner.study.record import record_not_run
from tuner.words import plural


@dataclasses.dataclass
class Skipped:
    """What one run of a search skipped so far."""

    # Batch sizes where the model itself fails in eager (raise, crash, hang, out of memory):
    # their other configs would fail the same way, each up to --timeout, so they are skipped
    # (tuner.study.broken): those this run found, and those the study holds.
    broken: dict[int, Breakage] = dataclasses.field(default_factory=dict)
    not_run: set[str] = dataclasses.field(default_factory=set)  # keys this run recorded as not run
    # Trials past --compile-timeout whose mode is skipped.
    modes: set[int] = dataclasses.field(default_factory=set)


def held_broken(state: StudyState, broken: dict[int, Breakage], retrying: set[int],
                retry_failed: bool, say: Callable[[str], None]) -> None:
    """Add to ``broken`` the batch sizes the study holds broken (an earlier run's, or
    another worker's, eager failure there: :mod:`tuner.study.broken`), saying so once each:
    a resume skips them again instead of running their not-run configs as trials. With
    ``retry_failed`` they are measured again instead, and added to ``retrying``."""
    for batch_size, why in sorted(state.broken.items()):
        if batch_size in broken or batch_size in retrying:
            continue
        if retry_failed:
            retrying.add(batch_size)
            say(f"batch size {batch_size}: eager failed there before ({why}); "
                "--retry-failed measures it again")
            continue
        broken[batch_size] = why
        say(f"batch size {batch_size} is skipped: the study holds that the model fails "
            f"there without compiling ({why}); rerun with --retry-failed to try it again")


def skip_batch(claims: Claims, space: SearchSpace, configs: list[TrialConfig],
               config: TrialConfig, number: int, result: TrialResult, skipped: Skipped,
               say: Callable[[str], None]) -> None:
    """After trial ``number`` found that the model fails at ``config``'s batch size without
    compiling (:func:`tuner.study.broken.breaks_batch`): that batch size's other configs would
    fail the same way, each up to --timeout, so they are rows that say why, not trials."""
    why = skipped.broken[config.batch_size] = breakage(number, config, result)
    say(f"batch size {config.batch_size} is skipped from here on: the "
        f"model fails there without compiling ({why}); the other batch "
        "sizes go on")
    skipped.not_run.add(config.key)  # its own row says why
    taken = claims.state()
    for other in configs:
        # A config with a row (an earlier run's not-run row) keeps it: one row each.
        if other.batch_size == config.batch_size and other.key != config.key \
                and not taken.taken(other.key) and other.key not in taken.recorded:
            record_not_run(claims.fronts, space, other,
                           not_run_result(config.batch_size, why))
            skipped.not_run.add(other.key)


def timed_out_elsewhere(state: StudyState, configs: list[TrialConfig],
                        skipped: Skipped) -> list[tuple[int, TrialConfig]]:
    """The trials (number, config) past --compile-timeout that ``state`` holds and this run
    has not skipped the mode of yet, now added to ``skipped.modes``: an earlier run's, or
    another worker's, compile past --compile-timeout skips its mode there as this run's own
    does. A search killed before it recorded the skip would otherwise spend the budget again
    on each of them. Only those where ``state`` has a config left to skip: each skip reads
    the state again."""
    told = [(n, c) for n, c in state.compile_timeouts.items() if n not in skipped.modes]
    skipped.modes.update(n for n, _ in told)
    return [(n, c) for n, c in told
            if any(not state.taken(o.key) for o in same_mode(c, configs))]


def record_skipped(claims: Claims, space: SearchSpace, candidates: Iterable[TrialConfig],
                   why: TrialResult, not_run: set[str]) -> list[TrialConfig]:
    """Those of ``candidates`` no trial has taken, each written as a row saying ``why`` (a
    ``not run`` failure) and added to ``not_run``; returns them."""
    taken = claims.state()
    skipped = [c for c in candidates if not taken.taken(c.key)]
    for config in skipped:
        record_not_run(claims.fronts, space, config, why)
        not_run.add(config.key)
    return skipped


def skip_mode(claims: Claims, space: SearchSpace, config: TrialConfig, number: int,
              not_run: set[str], say: Callable[[str], None], names: NameBasis = PLAIN) -> int:
    """After a compile past --compile-timeout, the other configs of that backend and mode at
    that batch size are rows that say so, not trials: each would likely spend the budget
    again (max-autotune of resnet18 ran past 380 s on the H200), and a night would go to
    failures. They are ``compile_timeout`` rows, failures to the sampler
    like the one that ran, and their message says ``not run``; ``names``: what the study's
    config names are relative to. Returns how many."""
    name = config_name(config, names)
    why = TrialResult.failure(
        Status.COMPILE_TIMEOUT, f"{NOT_RUN}trial {number}, {name}, compiled past "
        f"--compile-timeout at batch size {config.batch_size}; this mode's other configs "
        "there are skipped (a new study with a larger --compile-timeout measures them)")
    skipped = record_skipped(claims, space, same_mode(config, space.configs()), why, not_run)
    if skipped:
        say(f"{name} compiled past --compile-timeout at batch size "
            f"{config.batch_size} (trial {number}): its "
            f"{plural(len(skipped), 'other config')} there "
            f"{'is' if len(skipped) == 1 else 'are'} skipped")
    return len(skipped)


def same_mode(config: TrialConfig, configs: list[TrialConfig]) -> list[TrialConfig]:
    """The other configs of ``config``'s backend and mode at its batch size: what a compile past
    --compile-timeout skips (:func:`skip_mode`)."""
    return [o for o in configs if o.key != config.key and (o.batch_size, o.backend, o.mode) ==
            (config.batch_size, config.backend, config.mode)]


def cannot_run_anywhere(broken: dict[int, Breakage]) -> UserError:
    """The error of a search whose model failed in eager at every batch size (``broken``)."""
    failures = "; ".join(f"batch size {bs}: {reason}"
                         for bs, reason in sorted(broken.items()))
    if all(reason.status is Status.TIMEOUT for reason in broken.values()):
        # A --timeout too short for any trial looks like a model that hangs: say which.
        return UserError(f"no trial finished within --timeout at any batch size "
                         f"({failures}): raise --timeout, unless the model hangs in eager")
    return UserError(f"the model cannot run at any batch size: {failures}")
