"""The sweep design of the knob studies (issue 53): every cheap candidate of
benchmarks/knob_catalogue.py measured once, one knob at a time, in one study per model and batch
sizes (``benchmarks/sweeps/NAME/``).

A screen gives each candidate an arm of its own, with eager and the base measured again in each:
two of every three configs are re-measurements. A sweep measures them once: at each batch size,
eager, the base (reduce-overhead with torch's settings) and the base with exactly one candidate
set, its ``fixed`` options held too, as in its screen arm. Its space is the union (the base mode,
each candidate's knob both ways with torch's value first, as a grid builds them); the tuner
measures the space's baselines first (eager, and the mode with every option's first value:
torch's settings), then the one-knob configs, queued as ``tuner search --start-from`` queues
another study's (:func:`start_from`, run by benchmarks/sweep_search.py), and stops there: the
rest of the union is never measured. Then the base at each batch size is measured again in fresh
processes, :data:`NOISE_PROCESSES` in all (``tuner confirm``'s protocol): the noise floor of
that batch size. Every other config is measured once, so a knob whose p50 falls within the
base's processes is within noise (benchmarks/knob_effects.py); on the H100 on 2026-12-07 plain
reduce-overhead's p50 spread 24 % over three processes at resnet50 bf16 batch size 1 and 5 % at
batch size 16 (studies/h100-resnet50-bf16-extended-from-h200), more than the 2 % a knob must move.

Left out, each with a line: the slow candidates (their screens keep them), what this torch
lacks, candidates for another kind of model, one on another base mode, and one that holds an
option at a value other than torch's where another candidate sets that option too: the union
then could not hold that value on the candidate's own config alone, and the base must keep
torch's (its screen measures it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchmarks.knob_catalogue import (
    CATALOGUE,
    FORMAT_KNOBS,
    REDUCE_OVERHEAD,
    Candidate,
    StudyPlan,
    TorchSettings,
    family,
)
from tuner.domain.config import EAGER, INDUCTOR, OptionValue, TrialConfig
from tuner.domain.space import SearchSpace
from tuner.errors import UserError
from tuner.study.start_plan import Started, StartFrom

SWEEPS = "benchmarks/sweeps"  # a study per model and batch sizes, not replayed as a grid
SOURCE = "knob sweep"  # the study its queue names as where it came from: every run gives it
NOISE_PROCESSES = 3  # the base's p50 at each batch size: its trial and two re-measurements


def sweep(model: str, batch_sizes: Sequence[int], name: str, settings: TorchSettings
          ) -> tuple[list[StudyPlan], list[str]]:
    """The sweep of ``model`` (see the module's docstring): one plan, and the lines of what was
    left out."""
    chosen, said = _chosen(model, settings)
    kept, clashes = _expressible(chosen, settings)
    said += clashes
    if not kept:
        raise UserError(f"no candidate to sweep for {model} ({'; '.join(said)})")
    space = _space(kept, batch_sizes, settings)
    bases = {c.batch_size: c for c in space.baselines() if c.key in base_keys(space)}
    queue = tuple((c.name, one_knob(bases[bs], c)) for c in kept for bs in batch_sizes)
    return [StudyPlan(name, SWEEPS, space, queue=queue)], said


def base_keys(space: SearchSpace) -> set[str]:
    """The keys of the sweep's bases: reduce-overhead with torch's settings, each batch size."""
    return {c.key for c in space.baselines() if c.backend == INDUCTOR}


def one_knob(base: TrialConfig, candidate: Candidate) -> TrialConfig:
    """``base`` with the candidate set: its knob, and its held options at their values."""
    config = base
    if candidate.knob == "channels_last":
        config = dataclasses.replace(config, channels_last=bool(candidate.value))
    elif candidate.knob == "dynamic":
        config = dataclasses.replace(config, dynamic=bool(candidate.value))
    changes = dict(candidate.fixed)
    if candidate.knob not in FORMAT_KNOBS:
        changes[candidate.knob] = candidate.value
    return dataclasses.replace(config, options=tuple({**config.option_dict, **changes}.items()))


def start_from(plan: StudyPlan) -> StartFrom:
    """What the sweep's search measures after its baselines: its queue, in order, each row's
    ``started_from`` naming the candidate."""
    return StartFrom((SOURCE,), tuple(Started(config, candidate)
                                      for candidate, config in plan.queue),
                     (f"{plan.name}: {len(plan.queue)} configs, each the base with one knob "
                      "set, measured after the baselines; then the sweep stops",))


def _chosen(model: str, settings: TorchSettings) -> tuple[list[Candidate], list[str]]:
    """The catalogue's candidates a sweep of ``model`` can take, and a line for each other."""
    kind = family(model)
    kept, said = [], []
    for candidate in CATALOGUE:
        why = ("compiles for minutes: screen it (DESIGN=screen ARMS=slow)" if candidate.slow
               else settings.missing(candidate))
        if why is None and kind not in candidate.families:
            why = f"not for a {kind} model"
        if why is None and candidate.base != REDUCE_OVERHEAD:
            why = f"its base is {candidate.base}, the sweep's {REDUCE_OVERHEAD}: screen it"
        if why:
            said.append(f"skipped {candidate.name}: {why}")
        else:
            kept.append(candidate)
    return kept, said


def _expressible(chosen: list[Candidate], settings: TorchSettings
                 ) -> tuple[list[Candidate], list[str]]:
    """Those of ``chosen`` whose held options the union can hold: at torch's value (then every
    config holds it, the base too), or at another value that only the candidate's own config
    takes (a two-valued option no other candidate sets); a line for each other."""
    kept, said = [], []
    for candidate in chosen:
        clash = None
        for option, value in candidate.fixed:
            torch_value = settings.value(option, candidate.base)
            others = [o.name for o in chosen if o is not candidate and option in o.options]
            if value != torch_value and others:
                clash = (f"it holds {option}={_text(value)} (torch's is {_text(torch_value)}), "
                         f"which {', '.join(others)} also set: the union cannot hold it on its "
                         "config alone; screen it")
                break
        if clash:
            said.append(f"skipped {candidate.name}: {clash}")
        else:
            kept.append(candidate)
    return kept, said


def _space(kept: list[Candidate], batch_sizes: Sequence[int], settings: TorchSettings
           ) -> SearchSpace:
    """The union: the base mode, each option torch's value first, then the values the
    candidates set or hold; channels_last and dynamic both ways where a candidate sets them."""
    options: dict[str, list[OptionValue]] = {}
    for candidate in kept:
        mine = [] if candidate.knob in FORMAT_KNOBS else [(candidate.knob, candidate.value)]
        for option, value in [*mine, *candidate.fixed]:
            values = options.setdefault(option, [settings.value(option, REDUCE_OVERHEAD)])
            if value not in values:
                values.append(value)
    knobs = {c.knob for c in kept}
    return SearchSpace(
        (EAGER, INDUCTOR), (REDUCE_OVERHEAD,), (False, True) if "dynamic" in knobs else (False,),
        tuple(batch_sizes), channels_last=(False, True) if "channels_last" in knobs else (),
        options={name: tuple(values) for name, values in options.items()})


def _text(value: OptionValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
