"""A search space written down: ``tuner search --space space.toml``.

Each key sets one dimension, as its command-line option does; an option given on the
command line wins over the file. The keys, with the option each stands for::

    batch_sizes = [1, 16]                        # --batch-sizes 1,16
    backends = ["eager", "inductor"]             # --backend
    modes = ["default", "reduce-overhead"]       # --mode
    dynamic = [false]                            # --dynamic (true, false, or "none")
    dtypes = ["bfloat16", "float16"]             # --dtype
    channels_last = [false, true]                # --channels-last
    cudnn_benchmark = [true]                     # --cudnn-benchmark
    compile_scopes = ["whole", "regional"]       # --compile-scope

    [inductor_options]                           # --inductor-option NAME=V1,V2, one per key
    coordinate_descent_tuning = [false, true]
    triton.cudagraphs = [false]                  # or "triton.cudagraphs": the same option

A file does more than narrow: any ``--space`` file turns off the two extras a CUDA search adds
for the options left unset (:func:`tuner.domain.space.default_options`, ``default_formats``).
Where neither the file nor the command line gives them, no inductor option is searched and
channels_last is off. Every other dimension the file leaves out takes its option's default,
as without a file.

Each list's items are kept as given, a comma in a string included: they are not split as the
command line's values are. Their values are checked where the command line's are
(:func:`tuner.domain.space.build_space`).
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from pathlib import Path
from typing import Any

from tuner.domain.config import OptionValue
from tuner.errors import UserError

# key -> the option it stands for
OPTIONS = {"batch_sizes": "--batch-sizes", "backends": "--backend", "modes": "--mode",
           "dynamic": "--dynamic", "dtypes": "--dtype", "channels_last": "--channels-last",
           "cudnn_benchmark": "--cudnn-benchmark", "inductor_options": "--inductor-option",
           "compile_scopes": "--compile-scope"}


@dataclasses.dataclass(frozen=True)
class SpaceFile:
    """The file's values, typed, each once in the order given (None: not in the file);
    ``inductor_options`` holds (option name as written, dotted where nested, its values)."""

    batch_sizes: tuple[int, ...] | None = None
    backends: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    dynamic: tuple[bool | None, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    channels_last: tuple[bool, ...] | None = None
    cudnn_benchmark: tuple[bool, ...] | None = None
    inductor_options: tuple[tuple[str, tuple[OptionValue, ...]], ...] | None = None
    compile_scopes: tuple[str, ...] | None = None


# key -> (the kinds of item it takes, an example for the error); dynamic's "none" is a string.
_ITEMS: dict[str, tuple[tuple[type, ...], str]] = {
    "batch_sizes": ((int,), "[1, 16]"), "backends": ((str,), '["eager", "inductor"]'),
    "modes": ((str,), '["default"]'), "dynamic": ((bool, str), '[false, true, "none"]'),
    "dtypes": ((str,), '["float32", "bfloat16"]'), "channels_last": ((bool,), "[false, true]"),
    "cudnn_benchmark": ((bool,), "[true, false]"),
    "compile_scopes": ((str,), '["whole", "regional"]')}


MAX_BYTES = 1 << 20  # a space file is a few lines; more is not one


def read_space_file(path: Path) -> SpaceFile:
    """Read and check the file's shape; a one-line error for anything off."""
    try:
        with path.open("rb") as handle:  # a FIFO too (--space <(...)); /dev/zero never ends
            raw = handle.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise UserError(f"--space {path}: over {MAX_BYTES // 1024} KiB; a space file is a "
                            "few lines of TOML")
        data = tomllib.loads(raw.decode("utf-8-sig"))  # a BOM, as Windows editors write
    except FileNotFoundError:
        raise UserError(f"--space {path}: no such file") from None
    except OSError as exc:
        raise UserError(f"--space {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"--space {path}: not UTF-8 text; a space file is TOML") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"--space {path}: not valid TOML: {exc}") from None
    if not data:
        # Not "no narrowing": a space file is the whole space, the CUDA defaults left out.
        raise UserError(f"--space {path}: the file sets nothing; give at least one key "
                        f"({', '.join(OPTIONS)}) or leave --space out")
    for key in data:
        if key not in OPTIONS:
            close = difflib.get_close_matches(key, OPTIONS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(f"--space {path}: unknown key {key!r}; {hint}keys: {', '.join(OPTIONS)}")
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if key == "inductor_options":
            if not isinstance(value, dict) or not value:
                raise UserError(f"--space {path}: [inductor_options] must be a table of "
                                "NAME = [values], e.g. epilogue_fusion = [true, false]")
            fields[key] = tuple(
                (name, _items(path, f"inductor_options.{name}", values, (bool, int, float, str),
                              "[true, false]"))
                for name, values in _flattened(path, value).items())
        elif key == "dynamic":
            fields[key] = tuple(dict.fromkeys(_dynamic(path, v) for v in
                                              _items(path, key, value, *_ITEMS[key])))
        else:
            fields[key] = _items(path, key, value, *_ITEMS[key])
    return SpaceFile(**fields)


def _flattened(path: Path, table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"triton": {"cudagraphs": [false]}}`` -> ``{"triton.cudagraphs": [false]}``: TOML reads
    an unquoted dotted key as nested tables, and ``triton.cudagraphs = ...`` is meant as the
    option ``"triton.cudagraphs"``, as torch names it."""
    out: dict[str, Any] = {}
    for name, value in table.items():
        full = f"{prefix}{name}"
        nested = isinstance(value, dict) and value  # an empty table is refused as no list
        inner = _flattened(path, value, f"{full}.") if nested else {full: value}
        for option, values in inner.items():
            if option in out:  # "triton.cudagraphs" quoted beside triton.cudagraphs unquoted
                raise UserError(f"--space {path}: inductor_options.{option} given twice; "
                                "give it once")
            out[option] = values
    return out


def _items(path: Path, key: str, value: Any, kinds: tuple[type, ...], example: str
           ) -> tuple[Any, ...]:
    """The list's items, each once in the order given, each of one of ``kinds``."""
    if not isinstance(value, list) or not value:
        raise UserError(f"--space {path}: {key} must be a non-empty list, e.g. {key} = {example}")
    for item in value:
        # bool is an int to Python, but true is no batch size
        if not isinstance(item, kinds) or (isinstance(item, bool) and bool not in kinds):
            raise UserError(f"--space {path}: {key} holds {item!r}; give "
                            f"{_kinds(kinds)}, e.g. {key} = {example}")
    return tuple(dict.fromkeys(value))


def _kinds(kinds: tuple[type, ...]) -> str:
    """``(bool, int, float, str)`` -> ``"true/false, numbers or strings"``."""
    names = [name for kind, name in ((bool, "true/false"), (int, "whole numbers"),
                                     (float, "numbers"), (str, "strings"))
             if kind in kinds and not (kind is int and float in kinds)]
    return " or ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def _dynamic(path: Path, item: bool | str) -> bool | None:
    """``dynamic``'s items: true, false, or "none" (torch.compile's dynamic=None)."""
    if isinstance(item, bool):
        return item
    if item.strip().lower() in ("none", "auto"):
        return None
    raise UserError(f"--space {path}: dynamic holds {item!r}; give true, false or \"none\"")
