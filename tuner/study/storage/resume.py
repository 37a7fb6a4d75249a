"""Resuming a study: what defines it (workload, space, protocol, sampler, limits) stored on first
use and checked after, with a hint where a refused resume differs only in how it was asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import optuna

from tuner.data.select import Constraints
from tuner.domain.naming import OptionDefaults
from tuner.domain.records import TrialProtocol
from tuner.domain.space import SearchSpace
from tuner.errors import UserError
from tuner.study.sampler import DEFAULT_SAMPLER, check_sampler
from tuner.study.spec import StudySpec
from tuner.study.storage.attrs import (
    LIMITS_ATTR,
    OPTION_DEFAULTS_ATTR,
    PROTOCOL_ATTR,
    SAMPLER_ATTR,
    SPACE_ATTR,
    START_FROM_ATTR,
    WORKLOAD_ATTR,
)


def check_resume(study: optuna.Study, spec: StudySpec) -> tuple[str, Constraints]:
    """Store what defines the study on first use; after that, refuse a run that asks for
    another workload, space, protocol, sampler or limits (:func:`_check_or_set`). Returns the
    study's sampler kind and its limits."""
    workload = spec.workload.to_dict()
    # A knob the stored space searches is told by the space's check, with both value lists:
    # the workload holds only the first value, which would misreport the study.
    searched = {knob for knob, dimension in SEARCHED_AS.items()
                if (study.user_attrs.get(SPACE_ATTR) or {}).get(dimension)}
    _check_or_set(study, WORKLOAD_ATTR, workload, "workload",
                  compared=lambda stored, wanted: _workload_keys(stored, wanted) - searched)
    stored_workload = study.user_attrs.get(WORKLOAD_ATTR) or {}

    def shown(key: str, value: Any, asked: bool) -> str:
        """A dimension not searched on one side: its workload's one value there."""
        if value is None and key in DIMENSION_OF:
            value = (workload if asked else stored_workload).get(DIMENSION_OF[key])
        return _shown(value)

    _check_or_set(study, SPACE_ATTR, spec.space.to_dict(), "search space",
                  compared=_space_keys, hint=_space_hint, show=shown)
    _check_or_set(study, PROTOCOL_ATTR, spec.protocol.to_dict(), "trial protocol",
                  compared=_protocol_keys)
    return _sampler_of(study, spec.sampler), _limits_of(study, spec.limits)


def _sampler_of(study: optuna.Study, asked: str | None) -> str:
    """The study's sampler: stored when the study was made (``asked``, else the default);
    a resume that asks for another is refused, since the study's trials were sampled by it."""
    stored = study.user_attrs.get(SAMPLER_ATTR)
    if stored is None:
        kind = check_sampler(asked or DEFAULT_SAMPLER)
        study.set_user_attr(SAMPLER_ATTR, kind)
        return kind
    if asked is not None and asked != stored:
        raise UserError(f"study {study.study_name!r} was made with --sampler {stored}, asked "
                        f"{check_sampler(asked)}: rerun with --sampler {stored} (or without "
                        "--sampler) or pick a new --name")
    return str(stored)


def check_start_from(study: optuna.Study, asked: dict[str, Any] | None,
                     made: Callable[[], bool]) -> dict[str, Any] | None:
    """The studies the study started from, with the configs they gave
    (:class:`tuner.study.start_plan.StartFrom` as a dict): stored when the study is made
    (``made()``: it holds trials already). After that, a run that asks for other studies is
    refused, since the study's first trials followed the ones it was made with; a run that
    asks for none (``asked`` None: a search without --start-from, a worker) keeps them."""
    stored = study.user_attrs.get(START_FROM_ATTR)
    if asked is None:
        return stored
    if stored is None and not made():
        study.set_user_attr(START_FROM_ATTR, asked)
        return asked
    had = list((stored or {}).get("studies") or [])
    if had != list(asked.get("studies") or []):
        def given(names: list[str]) -> str:
            return " ".join(f"--start-from {name}" for name in names) or "no --start-from"

        raise UserError(f"study {study.study_name!r} was made with {given(had)}, asked "
                        f"{given(list(asked.get('studies') or []))}: rerun with "
                        f"{'the same --start-from (or without it)' if had else 'no --start-from'}"
                        " or pick a new --name", about="--start-from")
    return stored


def _limits_of(study: optuna.Study, asked: Constraints | None) -> Constraints:
    """The study's limits: stored when the study was made (``asked``, else none). Each trial's
    constraints were set under them, so a resume that asks for others is refused."""
    if asked is not None:
        _check_or_set(study, LIMITS_ATTR, asked.to_dict(), "set of limits")
        return asked
    stored = study.user_attrs.get(LIMITS_ATTR)
    if stored is None:
        study.set_user_attr(LIMITS_ATTR, Constraints().to_dict())
        return Constraints()
    return Constraints(**stored)


# Set per trial, not per study (the first trial of each run measures the device's peak).
_PER_TRIAL_PROTOCOL_KEYS = {"measure_peak"}


# The unit a stored number is in, for a refused resume to say "300 s", not "300.0".
_UNIT_OF = {"compile_timeout_s": "s", "min_seconds": "s", "max_compile_s": "s",
            "max_vram_gb": "GiB"}


def _shown(value: Any, unit: str | None = None) -> str:
    """A stored value as the options spell it: none for no value, false/true, a number in its
    ``unit`` (``300 s``), else its repr."""
    if value is None:
        return "none"
    if unit is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g} {unit}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, (bool, str)) for v in value):
        return ",".join(_shown(v) for v in value)  # as the options take them
    return repr(value)


def _protocol_keys(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    """The protocol fields both sides know: a study stored by tuner 0.1.0 before 2026-11-30
    (79eef4c) lacks compile_timeout_s, and resumes as long as the fields it has agree."""
    return (set(stored) & set(wanted)) - _PER_TRIAL_PROTOCOL_KEYS


def resumed_spec(study: optuna.Study, spec: StudySpec) -> StudySpec:
    """The spec a run of ``study`` follows: fields a study of tuner 0.1.0 before 2026-11-30
    (79eef4c) lacks keep their old meaning (no compile budget), as for a worker that joins it
    (:func:`resumed_protocol`); backends and modes listed in another order are searched in the
    study's order (:func:`resumed_space`); its configs are named against the option defaults
    stored with it (:func:`resumed_option_defaults`)."""
    return dataclasses.replace(
        spec, protocol=resumed_protocol(study, spec.protocol),
        space=resumed_space(study, spec.space),
        option_defaults=resumed_option_defaults(study, spec.option_defaults))


def resumed_option_defaults(study: optuna.Study,
                            asked: OptionDefaults | None) -> OptionDefaults | None:
    """The option defaults the study's configs are named against: those stored with it; where
    none are (a study made before tuner 0.3.0), ``asked`` (this run's torch, which measures its
    trials from now on), stored now. None where neither is known."""
    stored = study.user_attrs.get(OPTION_DEFAULTS_ATTR)
    if isinstance(stored, dict):
        return OptionDefaults.from_dict(stored)
    if asked is not None:
        study.set_user_attr(OPTION_DEFAULTS_ATTR, asked.to_dict())
    return asked


def resumed_protocol(study: optuna.Study, asked: TrialProtocol) -> TrialProtocol:
    """The protocol a run's trials follow: ``asked``, but a field the study's stored protocol
    lacks (a study made by tuner 0.1.0 before 2026-11-30, 79eef4c) takes its default, as
    :func:`~tuner.study.storage.join.join_spec` reads it: such a study has no compile budget."""
    stored = study.user_attrs.get(PROTOCOL_ATTR) or {}
    older: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(TrialProtocol)
                             if f.name not in stored and f.name not in _PER_TRIAL_PROTOCOL_KEYS}
    return dataclasses.replace(asked, **older) if stored else asked


def _every_key(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    return set(stored) | set(wanted)


def _space_keys(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    """Every key, but the dimensions whose order does not change what is measured, listed in
    another order, are the same space (:data:`_UNORDERED`; a resume takes the stored order of
    those Optuna samples, :func:`resumed_space`). The first value of the others is what the
    baselines run."""
    keys = _every_key(stored, wanted)
    return {key for key in keys if not _same_but_order(key, stored.get(key), wanted.get(key))}


# The dimensions whose order only breaks ties in what is searched next: the baselines run
# every batch size, inductor's default mode first (tuner.domain.space.SearchSpace.baselines),
# and dynamic=False where it is searched at all.
_UNORDERED = ("batch_sizes", "backends", "modes", "dynamic")


def _same_but_order(key: str, stored: Any, wanted: Any) -> bool:
    if key not in _UNORDERED or (key == "dynamic" and False not in (stored or [])):
        return False  # without dynamic=False, the baselines run dynamic's first value
    return _reordered(stored, wanted)


def resumed_space(study: optuna.Study, asked: SearchSpace) -> SearchSpace:
    """The space a run searches: ``asked``, with its backends, modes and dynamic values in the
    study's stored order where they differ only in order, so that each trial's parameters keep
    the choices Optuna stored with the study's first trials (batch sizes keep the asked order:
    each has its own study, and the order says which is searched first)."""
    stored = study.user_attrs.get(SPACE_ATTR) or {}
    kept = {key: tuple(stored[key]) for key in ("backends", "modes", "dynamic")
            if _same_but_order(key, stored.get(key), list(getattr(asked, key)))}
    return dataclasses.replace(asked, **kept) if kept else asked


def _workload_keys(stored: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    """Every key but a factory model's image size: its factory makes its own inputs, and a study
    made by tuner 0.1.0 before 2026-12-01 (207efa0), which took --image-size with a factory,
    stored the one it was given."""
    keys = _every_key(stored, wanted)
    return keys - {"image_size"} if ":" in str(wanted.get("model", "")) else keys


def _space_hint(stored: dict[str, Any], wanted: dict[str, Any], differ: set[str]) -> str:
    """What to pass where a dimension lists the study's values in another order (its first value
    is what the baselines run), else :func:`_cover_hint`."""
    reordered = sorted(key for key in differ if _reordered(stored.get(key), wanted.get(key)))
    if reordered:
        named = " and ".join(OPTION_OF.get(key, key) for key in reordered)
        return (f"; {named} {'lists' if len(reordered) == 1 else 'list'} the study's values in "
                f"another order, and the baselines run the first value: give them in the "
                f"study's order")
    return _cover_hint(stored, differ)


def _reordered(stored: Any, wanted: Any) -> bool:
    return isinstance(stored, list) and isinstance(wanted, list) and stored != wanted \
        and len(stored) == len(wanted) and all(value in stored for value in wanted) \
        and all(value in wanted for value in stored)


def _cover_hint(stored: dict[str, Any], differ: set[str]) -> str:
    """Why a study that searched neither inductor options nor channels_last differs from the
    same command now, where only those differ: a CUDA search without --space adds them
    (tuner.domain.space.default_options, default_formats), and the study was made with a --space
    file, which does not, or by tuner 0.1.0 before 2026-11-30 (16592d4), which did not add them.
    The study does not store which."""
    if differ <= {"options", "channels_last"} and not stored.get("options") \
            and not stored.get("channels_last"):
        return ("; without --space a CUDA search also covers inductor options and channels_last "
                "where they are not given: if the study was made with a --space file, pass the "
                "same --space file; if it was made before tuner searched them, "
                "--inductor-option none --channels-last false asks for its space")
    return ""


# The option that sets each stored field, for a refused resume to name ("rerun with the same
# options"); a field no option sets keeps its name.
OPTION_OF = {
    "model": "--model", "device": "--device", "dtype": "--dtype", "dtypes": "--dtype",
    "image_size": "--image-size", "channels_last": "--channels-last",
    "cudnn_benchmark": "--cudnn-benchmark", "shape_schedule": "--shape-schedule",
    "backends": "--backend", "modes": "--mode", "dynamic": "--dynamic",
    "batch_sizes": "--batch-sizes", "options": "--inductor-option",
    "compile_scopes": "--compile-scope",
    "min_calls": "--min-calls", "min_seconds": "--min-seconds", "warm_cache": "--warm-cache",
    "compile_timeout_s": "--compile-timeout", "max_vram_gb": "--max-vram-gb",
    "max_compile_s": "--max-compile-s"}


# The workload's knobs that a space searches when given several values: knob -> dimension.
SEARCHED_AS = {"dtype": "dtypes", "channels_last": "channels_last",
               "cudnn_benchmark": "cudnn_benchmark"}
DIMENSION_OF = {dimension: knob for knob, dimension in SEARCHED_AS.items()}


def _check_or_set(study: optuna.Study, attr: str, wanted: dict[str, Any], what: str,
                  compared: Callable[[dict[str, Any], dict[str, Any]], set[str]] = _every_key,
                  hint: Callable[[dict[str, Any], dict[str, Any], set[str]], str] | None = None,
                  show: Callable[[str, Any, bool], str] | None = None) -> None:
    """Store what defines the study on first use; after that, refuse a run that asks for
    another one, since its trials would not be comparable with the stored ones. ``hint``:
    more to say, given the stored value and the keys that differ; ``show``: how to show a
    value, given its key and whether it is the asked one (default :func:`_shown`)."""
    stored = study.user_attrs.get(attr)
    if stored is None:
        study.set_user_attr(attr, wanted)
        return
    differ = {k for k in compared(stored, wanted) if stored.get(k) != wanted.get(k)}
    if differ:
        told = show or (lambda key, value, __: _shown(value, _UNIT_OF.get(key)))
        diff = [f"{OPTION_OF.get(k, k)}: study has {told(k, stored.get(k), False)}, asked "
                f"{told(k, wanted.get(k), True)}" for k in sorted(differ)]
        raise UserError(f"study {study.study_name!r} was made with another {what} "
                        f"({'; '.join(diff)}); rerun with the same options or pick a new "
                        f"--name{hint(stored, wanted, differ) if hint else ''}",
                        about=tuple(OPTION_OF[k] for k in sorted(differ) if k in OPTION_OF))
