"""A search space written down: ``tuner search --space space.toml``.

Each key narrows one dimension, as its command-line option does; an option given on the
command line wins over the file. The keys, with the option each stands for::

    batch_sizes = [1, 16]                        # --batch-sizes 1,16
    backends = ["eager", "inductor"]             # --backend
    modes = ["default", "reduce-overhead"]       # --mode
    dynamic = [false]                            # --dynamic (true, false, or "none")
    dtypes = ["bfloat16", "float16"]             # --dtype
    channels_last = [false, true]                # --channels-last
    cudnn_benchmark = [true]                     # --cudnn-benchmark

    [inductor_options]                           # --inductor-option NAME=V1,V2, one per key
    coordinate_descent_tuning = [false, true]
    "triton.cudagraphs" = [false]

The values are checked where the command line's are (:func:`tuner.spec.space.build_space`).
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from pathlib import Path
from typing import Any

from tuner.errors import UserError

# key -> the option it stands for
OPTIONS = {"batch_sizes": "--batch-sizes", "backends": "--backend", "modes": "--mode",
           "dynamic": "--dynamic", "dtypes": "--dtype", "channels_last": "--channels-last",
           "cudnn_benchmark": "--cudnn-benchmark", "inductor_options": "--inductor-option"}


@dataclasses.dataclass(frozen=True)
class SpaceFile:
    """The file's values, as the command line would spell them (None: not in the file)."""

    batch_sizes: str | None = None
    backends: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    dynamic: tuple[str, ...] | None = None
    dtypes: str | None = None
    channels_last: str | None = None
    cudnn_benchmark: str | None = None
    inductor_options: tuple[str, ...] | None = None


def read_space_file(path: Path) -> SpaceFile:
    """Read and check the file's shape; a one-line error for anything off."""
    try:
        data = tomllib.loads(path.read_text())
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
            fields[key] = tuple(f"{name}={_joined(path, f'inductor_options.{name}', values)}"
                                for name, values in value.items())
        elif key in ("backends", "modes", "dynamic"):
            fields[key] = (_joined(path, key, value),)
        else:
            fields[key] = _joined(path, key, value)
    return SpaceFile(**fields)


def _joined(path: Path, key: str, value: Any) -> str:
    """``[1, 16]`` -> ``"1,16"``; ``[false, true]`` -> ``"false,true"``: the option's spelling."""
    if not isinstance(value, list) or not value:
        raise UserError(f"--space {path}: {key} must be a non-empty list, e.g. {key} = [...]")
    out = []
    for item in value:
        if isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, (int, float, str)):
            out.append(str(item))
        else:
            raise UserError(f"--space {path}: {key} holds {item!r}; use numbers, strings or "
                            "true/false")
    return ",".join(out)
