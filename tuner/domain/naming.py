"""What a config is called for a person: its backend and mode, then only what differs from
what that mode does by itself (``reduce-overhead``, ``reduce-overhead +channels_last
-epilogue_fusion``, ``default +coordinate_descent_tuning``, ``eager channels_last``).

One function names configs everywhere a person reads one (tables, progress, plots, recommend,
compare, check): :func:`config_name`, and :func:`config_names` for a table's worth, which
never gives two different configs the same name. The full config stays in the files
(``config_json``, the Parquet columns, ``--json``).

What a setting is compared with is a :class:`NameBasis`: the workload's precision, memory format
and cudnn.benchmark (a config sets its own where the study searched them), and
:class:`OptionDefaults`, the value each inductor option takes in each mode where a config leaves
it unset. Those depend on the torch and the mode, so a search records them in its study
(``tuner.option_defaults``); for studies made before that, :data:`KNOWN_DEFAULTS` holds those of
the options a CUDA search covers by itself, and an option whose default is not known is named
with its value (``max_autotune_gemm_backends=TRITON``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.domain.config import (
    DEFAULT_MODE,
    EAGER,
    INDUCTOR,
    SHORT_DTYPE,
    OptionValue,
    TrialConfig,
)
from tuner.domain.workload import Workload

_Options = tuple[tuple[str, OptionValue], ...]


def _sorted(values: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> _Options:
    items = values.items() if isinstance(values, Mapping) else values
    return tuple(sorted((str(k), v) for k, v in items))


@dataclasses.dataclass(frozen=True)
class OptionDefaults:
    """Per inductor mode, the value each option takes where a config leaves it unset:
    ``torch._inductor.config``'s value under ``torch._inductor.list_mode_options(mode)``.
    A mode or option not held is not known."""

    modes: tuple[tuple[str, _Options], ...] = ()

    def __post_init__(self) -> None:
        items = self.modes.items() if isinstance(self.modes, Mapping) else self.modes
        object.__setattr__(self, "modes", tuple(sorted((str(m), _sorted(o)) for m, o in items)))

    def of_mode(self, mode: str | None) -> dict[str, OptionValue] | None:
        """The options of ``mode`` (None: inductor's default mode) and their values; None where
        the mode is not known."""
        found = dict(self.modes).get(mode or DEFAULT_MODE)
        return None if found is None else dict(found)

    def to_dict(self) -> dict[str, dict[str, OptionValue]]:
        return {mode: dict(options) for mode, options in self.modes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, Any]]) -> OptionDefaults:
        return cls(tuple((str(mode), _sorted(options)) for mode, options in data.items()))


# torch._inductor.config's values of the options a CUDA search covers by itself
# (tuner.domain.space.CUDA_DEFAULT_OPTIONS), the same in torch 2.11 (whose studies under
# studies/ list each at the installed value first) and 2.14.1.
_KNOWN_OPTIONS = {"coordinate_descent_tuning": False, "epilogue_fusion": True,
                  "freezing": False, "shape_padding": True}
# torch._inductor.list_mode_options() of torch 2.11 and 2.14.1, for these modes.
_KNOWN_MODES: dict[str, dict[str, OptionValue]] = {
    DEFAULT_MODE: {},
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True, "coordinate_descent_tuning": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True,
                     "coordinate_descent_tuning": True},
}


def known_defaults(mode_options: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> OptionDefaults:
    """The defaults known without the study's record: :data:`_KNOWN_OPTIONS` under each mode's
    options, as ``mode_options`` says them (what a study's files record for a study that
    searched options) or else as torch 2.11 and 2.14.1 list them."""
    modes = {**_KNOWN_MODES, **{str(m): dict(o) for m, o in (mode_options or {}).items()}}
    return OptionDefaults(tuple((mode, _sorted({**_KNOWN_OPTIONS, **options}))
                                for mode, options in modes.items()))


KNOWN_DEFAULTS = known_defaults()


@dataclasses.dataclass(frozen=True)
class NameBasis:
    """What a study's config names are relative to: the workload's precision (None: not known,
    so a config's own is always named), memory format and cudnn.benchmark, and its options'
    defaults."""

    defaults: OptionDefaults = KNOWN_DEFAULTS
    dtype: str | None = None
    channels_last: bool = False
    cudnn_benchmark: bool = False

    @classmethod
    def of(cls, workload: Workload | Mapping[str, Any] | None,
           defaults: OptionDefaults | None = None) -> NameBasis:
        """The basis of a study with this workload (a :class:`Workload` or its dict, as files
        hold it) and these defaults (None: :data:`KNOWN_DEFAULTS`)."""
        data = workload.to_dict() if isinstance(workload, Workload) else dict(workload or {})
        return cls(defaults=defaults or KNOWN_DEFAULTS, dtype=data.get("dtype"),
                   channels_last=bool(data.get("channels_last", False)),
                   cudnn_benchmark=bool(data.get("cudnn_benchmark", False)))


PLAIN = NameBasis()


def _value(value: OptionValue) -> str:
    return value if isinstance(value, str) else repr(value)


def _flag(word: str, on: bool, signed: bool) -> str:
    return ("+" if signed else "") + word if on else f"-{word}"


@functools.lru_cache(maxsize=8192)  # a search names every row again after each trial
def config_name(config: TrialConfig, basis: NameBasis = PLAIN, explicit: bool = False) -> str:
    """A config's name for people, without its batch size: its backend, or for inductor its
    mode, then what differs from what that runs by itself. ``explicit``: every setting the
    config holds named with its value (where two configs would share a name)."""
    parts = [EAGER if not config.compiled else
             (config.mode or DEFAULT_MODE) if config.backend == INDUCTOR else
             config.backend if config.mode is None else f"{config.backend}:{config.mode}"]
    signed = config.compiled  # "+": on top of a mode; eager's own words stand bare
    if config.regional or (explicit and config.compile_scope is not None):
        parts.append(str(config.compile_scope))  # each repeated block compiled in place
    if config.compiled and (explicit or config.dynamic is not False):
        # static shapes are the common case and what the baselines run
        parts.append(f"dynamic={config.dynamic}")
    if config.dtype is not None and (explicit or config.dtype != basis.dtype):
        parts.append(SHORT_DTYPE.get(config.dtype, config.dtype))
    for word, value, usual in (("channels_last", config.channels_last, basis.channels_last),
                               ("cudnn.benchmark", config.cudnn_benchmark,
                                basis.cudnn_benchmark)):
        if value is not None and (explicit or value != usual):
            parts.append(_flag(word, value, signed))
    mode = basis.defaults.of_mode(config.mode) or {}
    for option, set_to in config.options:
        if explicit or option not in mode:
            parts.append(f"{option}={_value(set_to)}")
        elif set_to != mode[option] or type(set_to) is not type(mode[option]):
            both_bool = isinstance(set_to, bool) and isinstance(mode[option], bool)
            parts.append(_flag(option, bool(set_to), True) if both_bool
                         else f"{option}={_value(set_to)}")
    return " ".join(parts)


def config_names(configs: Sequence[TrialConfig], basis: NameBasis = PLAIN) -> list[str]:
    """The name of each of ``configs`` (a table's rows). Two configs that differ beyond their
    batch size never share one: those that would are named explicitly (every setting with its
    value), and where even that repeats (text values that read alike), with their key."""
    names = [config_name(c, basis) for c in configs]
    for rename in (lambda c: config_name(c, basis, explicit=True),
                   lambda c: f"{config_name(c, basis, explicit=True)} [{_without_batch(c)}]"):
        seen: dict[str, set[str]] = {}
        for name, config in zip(names, configs):
            seen.setdefault(name, set()).add(_without_batch(config))
        clash = {name for name, kinds in seen.items() if len(kinds) > 1}
        names = [rename(c) if n in clash else n for n, c in zip(names, configs)]
    return names


@functools.lru_cache(maxsize=8192)
def _without_batch(config: TrialConfig) -> str:
    return dataclasses.replace(config, batch_size=1).key
