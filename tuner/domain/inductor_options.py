"""The inductor options a search space may hold, checked against the installed torch: a name of
``torch._inductor.config`` whose type is a boolean, a number, a string or a list of literals,
and values (text from the command line, or already typed) read as that type."""

from __future__ import annotations

import difflib
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.domain.config import OptionValue, option_column
from tuner.domain.naming import OptionDefaults
from tuner.errors import UserError


def cuda_graph_option(name: str) -> bool:
    """Whether an inductor option is about CUDA graphs (``triton.cudagraphs``,
    ``triton.cudagraph_trees``, ``cudagraph_policy`` ...): torch names every one of them so, and
    like the backend and the modes that record CUDA graphs, they do nothing off a CUDA device."""
    return "cudagraph" in name.lower()


def inductor_option_types() -> dict[str, Any]:
    """Every option of the installed ``torch._inductor.config`` and its declared type."""
    from torch._inductor import config

    # get_type is ConfigModule's (install_config_module); torch's _config_typing stub omits it
    return {name: config.get_type(name)  # type: ignore[attr-defined]
            for name in config.get_config_copy()}


def _atoms(declared: Any) -> list[Any] | None:
    """The kinds of value an option type admits (bool, int, float, str, None, or a literal's
    values), or None if it holds anything else (lists, dicts, callables)."""
    if isinstance(declared, types.UnionType) or typing.get_origin(declared) is typing.Union:
        parts = [_atoms(arg) for arg in typing.get_args(declared)]
        return None if any(p is None for p in parts) else [a for p in parts for a in p or ()]
    if typing.get_origin(declared) is typing.Literal:
        return [("literal", v) for v in typing.get_args(declared)]
    if declared in (bool, int, float, str, type(None)):
        return [declared]
    return None


def _option_value(name: str, value: Any, atoms: list[Any]) -> OptionValue:
    """``value`` (text from the command line, or already typed) as the option's type."""
    literals = [v for a in atoms if isinstance(a, tuple) for v in (a[1],)]
    text = value.strip() if isinstance(value, str) else None
    if type(None) in atoms and (value is None or (text is not None and text.lower() == "none")):
        return None
    if bool in atoms:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
    for literal in literals:
        if value == literal or (text is not None and text == str(literal)):
            return literal
    if int in atoms:
        whole = value if isinstance(value, int) and not isinstance(value, bool) else \
            int(text) if text is not None and re.fullmatch(r"[+-]?[0-9]+", text) else None
        if whole is not None:
            if not -2**63 <= whole < 2**63:
                # Its Parquet column holds 64-bit integers: the study's files could not be
                # written, by this run or any later one.
                raise UserError(f"--inductor-option {name}: {value!r} is beyond a 64-bit "
                                "integer: give a value within ±9.2e18",
                                about="--inductor-option")
            return whole
    if float in atoms and not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError):
            pass
        else:
            if math.isfinite(number):
                return number
            if str not in atoms or text is None:
                # nan is not equal to itself: no stored trial would match it, and a resume would
                # measure its configs again; inf is no setting either.
                raise UserError(f"--inductor-option {name}: {value!r} is not a finite number: "
                                f"give numbers, e.g. --inductor-option {name}=0.5,1.0",
                                about="--inductor-option")
    if str in atoms and text is not None:
        return text
    kinds = ", ".join(sorted({repr(a[1]) if isinstance(a, tuple) else
                              ("none" if a is type(None) else a.__name__) for a in atoms}))
    raise UserError(f"--inductor-option {name}: cannot read {value!r} as {kinds}: pass e.g. "
                    f"--inductor-option {name}=V1,V2 with values of that type",
                    about="--inductor-option")


def check_options(options: Mapping[str, Sequence[Any]],
                  available: Mapping[str, Any] | None = None
                  ) -> tuple[tuple[str, tuple[OptionValue, ...]], ...]:
    """Inductor options and their values, checked against the installed torch and typed.

    ``available`` maps option names to their declared types (default: this torch's
    ``torch._inductor.config``). An unknown name is a one-line error naming the closest; so is
    an option whose type cannot be listed on a command line, or a value of the wrong type.
    """
    known = dict(available) if available is not None else inductor_option_types()
    out: dict[str, tuple[OptionValue, ...]] = {}
    spelled: dict[str, str] = {}  # option -> as the user first spelled it
    columns: dict[str, str] = {}
    about = "--inductor-option"
    for raw, values in options.items():
        name = raw.strip().replace("-", "_")  # as torch.compile reads option names
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"unknown inductor option {raw!r}{hint}: give a name of "
                            "torch._inductor.config, dots for nested ones (triton.cudagraphs)",
                            about=about)
        if name in spelled:  # epilogue_fusion and epilogue-fusion: one would silently win
            raise UserError(f"inductor option {name} given twice, as {spelled[name]!r} and "
                            f"{raw!r}: give it once, with all its values", about=about)
        spelled[name] = raw
        atoms = _atoms(known[name])
        if not atoms:
            raise UserError(f"--inductor-option {name}: its type ({known[name]}) is not a "
                            "boolean, number, string or list of literals; only those are searched",
                            about=about)
        if not values:
            raise UserError(f"--inductor-option {name}: no values: pass e.g. {name}=true,false",
                            about=about)
        typed = tuple(dict.fromkeys(_option_value(name, v, atoms) for v in values))
        other = columns.setdefault(option_column(name), name)
        if other != name:
            raise UserError(f"inductor options {other} and {name} share the column "
                            f"{option_column(name)}: search one of them", about=about)
        out[name] = typed
    return tuple(sorted(out.items()))


def installed_defaults(modes: Sequence[str], names: Sequence[str]) -> OptionDefaults:
    """The value each of the options ``names`` takes in each of ``modes`` where a config leaves
    it unset, as the installed torch runs it: ``torch._inductor.config`` under
    ``list_mode_options(mode)`` (:meth:`tuner.domain.config.TrialConfig.compile_kwargs`). A
    search records them in its study, so its configs are named by what differs from them."""
    current, by_mode = inductor_settings(modes)
    out = {}
    for mode, options in by_mode.items():
        runs = {**current, **options}
        out[mode] = {name: runs[name] for name in names if name in runs}
    return OptionDefaults.from_dict(out)


def inductor_settings(modes: Sequence[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``torch._inductor.config`` as it stands, and the options each of ``modes`` sets over it
    (``list_mode_options``; a mode this torch does not list is left out)."""
    from torch._inductor import config, list_mode_options

    by_mode = {}
    for mode in modes:
        try:
            by_mode[str(mode)] = dict(list_mode_options(mode))
        except (RuntimeError, KeyError):  # a mode this torch does not list
            continue
    return config.get_config_copy(), by_mode
