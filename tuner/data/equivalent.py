"""Which rows of two studies measured the same thing, though the studies searched different
dimensions.

A row's ``config_key`` names only the dimensions its study searched: a CPU study's
``inductor|reduce-overhead|dynamic=False|bs=16`` and a CUDA study's
``...|bs=16|channels_last=False|opt.epilogue_fusion=True|...`` ran the same compile when
the CUDA study's options sit at the values inductor takes where none is given. :func:`ran_keys`
gives each row a key of what it ran: the precision, memory format and cudnn.benchmark its row
records, and only the inductor options whose value differs from the one the config would have
run without them. ``tuner compare`` matches configs across studies by it.

The value an option takes where a config leaves it unset is its mode's
(``torch._inductor.list_mode_options``, recorded in the study's files as ``mode_options``),
else the first value the study listed: the value its baselines run, which docs/search-space.md
asks to be inductor's default (and which the options a CUDA search adds by itself always are).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pandas as pd

from tuner.data.rows import config_of, plain
from tuner.domain.config import DEFAULT_MODE

RAN = "ran_key"  # the column tuner compare adds to each study's rows

_FORMATS = ("dtype", "channels_last", "cudnn_benchmark")


def option_defaults(meta: dict[str, Any]) -> Callable[[str | None], dict[str, Any]]:
    """For one study (its files' metadata), the value each inductor option takes in a mode
    where a config leaves it unset: the mode's own (as the files record it), else the first
    value the study listed (see the module's docstring)."""
    space = meta.get("space") or {}
    first = {name: values[0] for name, values in (space.get("options") or {}).items() if values}
    recorded = meta.get("mode_options")

    def unset(mode: str | None) -> dict[str, Any]:
        by_mode = recorded.get(str(mode)) if isinstance(recorded, dict) else None
        return {**first, **(by_mode if by_mode is not None else _mode_options(mode) if first
                            else {})}

    return unset


def ran_keys(df: pd.DataFrame, meta: dict[str, Any]) -> pd.Series:
    """Per row of one study (its trials.parquet and metadata), the key of what it ran."""
    ran = Ran(meta)
    return df.apply(ran.key, axis=1) if len(df) else pd.Series([], index=df.index, dtype=object)


class Ran:
    """What the rows of one study ran, read with its metadata (``tuner.space``,
    ``tuner.workload``, ``tuner.mode_options``): each row's key (:meth:`key`) and knobs
    (:meth:`knobs`)."""

    def __init__(self, meta: dict[str, Any]) -> None:
        # The value each inductor option the study knows of takes where a config of a mode
        # leaves it unset (option_defaults); empty for a study that searched none.
        self.unset = option_defaults(meta)
        self._workload = meta.get("workload") or {}

    def knobs(self, row: pd.Series | dict[str, Any]) -> dict[str, Any]:
        """What the row ran, knob by knob: backend, mode and dynamic (compiled rows only), the
        precision, memory format and cudnn.benchmark, each inductor option its config sets, at
        the config's value, and ``compile_scope`` where it is regional."""
        config = config_of(row)
        out: dict[str, Any] = {"backend": config.backend}
        if config.compiled:
            out.update(mode=config.mode, dynamic=config.dynamic)
        for name in _FORMATS:
            value = plain(row.get(name))
            out[name] = self._workload.get(name) if value is None else value
        out.update(config.options)
        if config.regional:
            out["compile_scope"] = config.compile_scope
        return out

    def key(self, row: pd.Series | dict[str, Any]) -> str:
        """The key of what the row ran: its knobs, but only the inductor options whose value
        differs from the one its mode runs without them."""
        config = config_of(row)
        knobs = self.knobs(row)
        parts = [config.backend, f"bs={config.batch_size}"]
        if config.compiled:
            parts += [f"mode={config.mode}", f"dynamic={config.dynamic}"]
        parts += [f"{name}={knobs[name]}" for name in _FORMATS]
        defaults = self.unset(config.mode) if config.options else {}
        parts += [f"opt.{name}={value!r}" for name, value in config.options
                  if name not in defaults or defaults[name] != value]
        if config.regional:  # the whole model is what a row without a scope compiled
            parts.append("scope=regional")
        return "|".join(parts)


def mode_options(modes: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """What each inductor mode sets, as the installed torch says (for a study's files)."""
    return {str(mode): _mode_options(mode) for mode in modes}


@functools.cache
def _mode_options(mode: str | None) -> dict[str, Any]:
    """The options ``mode`` stands for (imports torch's inductor, seconds: only for files
    written by tuner 0.1.0 before 2026-12-03 (a1e8182), without tuner.mode_options)."""
    if mode in (None, DEFAULT_MODE):  # torch.compile's default mode sets nothing
        return {}
    try:
        from torch._inductor import list_mode_options

        return dict(list_mode_options(mode))
    except (ImportError, RuntimeError):  # a mode this torch does not list: none known
        return {}
