"""The text of a search's options read into values: comma-separated lists, booleans, batch
sizes and NAME=V1,V2 inductor options. Each error is one line that names the option."""

from __future__ import annotations

import re

from tuner.errors import UserError


def split(values: tuple[str, ...], option: str) -> list[str] | None:
    """Repeated and comma-separated option values as one list, each once (in the order first
    given: ``--dtype float32,float32`` is float32, not a dimension of one value searched twice);
    None if none were given. An empty item (``a,,b``, ``,``, ``""``) is a one-line error naming
    ``option``, not a value dropped: ``--mode ,`` must not quietly mean every mode."""
    items = [item for value in values for item in items_of(value, option)]
    return list(dict.fromkeys(items)) or None


def items_of(text: str, option: str) -> list[str]:
    """``a, b`` -> ["a", "b"]; an empty item is a one-line error naming ``option``."""
    items = [v.strip() for v in text.split(",")]
    if not all(items):
        raise UserError(f"{option} {text!r} has an empty value: give values separated by single "
                        f"commas, e.g. {option} {_EXAMPLES.get(option, 'a,b')}")
    return items


_EXAMPLES = {"--dtype": "float32,bfloat16", "--backend": "eager,inductor",
             "--mode": "default,reduce-overhead", "--dynamic": "false,true",
             "--channels-last": "false,true", "--cudnn-benchmark": "true,false",
             "--inductor-option": "epilogue_fusion=true,false",
             "--compile-scope": "whole,regional"}


def positive_ints(text: str, what: str, option: str) -> list[int]:
    """``1,8,32`` -> [1, 8, 32]; anything else is a one-line error naming the option."""
    out = []
    for item in text.split(",") if text.strip() else []:
        item = item.strip()
        if not re.fullmatch(r"\d+", item) or int(item) <= 0:
            raise UserError(f"{what} {item!r} is not a positive integer: pass e.g. {option} 1,8,32")
        out.append(int(item))
    return out


def dynamic_values(values: list[str] | None) -> list[bool | None] | None:
    if values is None:
        return None
    table = {"none": None, "auto": None, "true": True, "false": False}
    for v in values:
        if v.lower() not in table:
            raise UserError(f"--dynamic {v!r}: choose from none, true, false")
    return [table[v.lower()] for v in values]


def bool_values(text: str, option: str) -> list[bool]:
    """``false,true`` -> [False, True]; anything else is a one-line error naming the option."""
    table = {"true": True, "false": False}
    if not text.strip():
        raise UserError(f"{option} needs a value: true, false or false,true")
    items = [v.lower() for v in items_of(text, option)]
    for v in items:
        if v not in table:
            raise UserError(f"{option} {v!r}: choose from true, false (e.g. {option} false,true)")
    return list(dict.fromkeys(table[v] for v in items))


def option_values(values: tuple[str, ...]) -> dict[str, list[str]] | None:
    """``("epilogue_fusion=true,false", ...)`` -> {"epilogue_fusion": ["true", "false"]}; the
    names and values are checked against torch by :func:`tuner.domain.space.build_space`.
    Nothing given: None (the device's default options); ``none``: {} (no option searched)."""
    if [v.strip().lower() for v in values] == ["none"]:
        return {}
    out: dict[str, list[str]] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if value.strip().lower() == "none":
            raise UserError("--inductor-option none searches no option: it cannot be given "
                            "beside other --inductor-option values; drop one")
        items = items_of(rest, "--inductor-option") if rest.strip() else []
        if not sep or not name.strip() or not items:
            raise UserError(f"--inductor-option {value!r}: expected NAME=V1,V2, e.g. "
                            "--inductor-option epilogue_fusion=true,false")
        if name.strip() in out:
            raise UserError(f"--inductor-option {name.strip()} given twice: list its values "
                            "once, comma-separated")
        out[name.strip()] = items
    return out or None
