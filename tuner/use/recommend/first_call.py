"""Whether the first call after :meth:`tuner.Recommendation.apply` started warm: it watches
that call and warns (:class:`WarmStartMissed`) when the artifacts were loaded and the call
compiled all the same.

What apply knows before any call (no artifacts file, saved by another torch, unreadable) it
says at once, with the same warning class; the first call says what only it can tell: that
the compile caches missed after the artifacts were loaded, by torch's own counters of the
FX-graph and AOTAutograd caches, read before and after it. Once: the watch ends with that call.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

from tuner.use.environment import MismatchWarning

if TYPE_CHECKING:
    import torch


class WarmStartMissed(MismatchWarning):
    """The compiled model did not start from the study's compile artifacts: its first call
    compiles (or compiled) as if cold. The message says why: no artifacts file, saved by
    another torch, unreadable, or loaded but the cache keys did not match."""


def watch(compiled: torch.nn.Module, study: str, batch_size: int, loaded_from: str) -> None:
    """Read the cache counters around ``compiled``'s first call, then stop watching; warn when
    that call compiled a graph after the artifacts in ``loaded_from`` were loaded."""
    from tuner.runtime import artifacts

    before: list[Any] = []

    def pre(module: Any, args: Any) -> None:
        before.append(artifacts.cache_counts())

    def post(module: Any, args: Any, output: Any) -> None:
        for handle in handles:
            handle.remove()
        now = artifacts.cache_counts()
        if now is None or not before or before[0] is None:
            return  # this torch does not count: nothing to tell
        made = now.since(before[0])
        if made.compiled > 0:
            warnings.warn(missed_after_loading(study, made.compiled, loaded_from,
                                               _batch_of(args), batch_size),
                          WarmStartMissed, stacklevel=_callers_level())

    handles = [compiled.register_forward_pre_hook(pre), compiled.register_forward_hook(post)]


def missed_after_loading(study: str, compiled: int, loaded_from: str, batch: int | None,
                         batch_size: int) -> str:
    """Why a first call compiled although the artifacts were loaded: a key did not match."""
    graphs = f"{compiled} graph{'s' if compiled != 1 else ''}"
    if batch is not None and batch != batch_size:
        why = f"its inputs have batch size {batch}, the study's config {batch_size}"
    else:
        why = ("the inputs (shape, dtype, memory format), the model's code or the settings "
               "(inductor's, global knobs) differ from those of the study's trial")
    return (f"first call: no warm start from study {study!r}: it compiled {graphs} after the "
            f"artifacts of {loaded_from} were loaded: their cache keys did not match ({why})")


def _batch_of(args: Any) -> int | None:
    first = args[0] if isinstance(args, tuple) and args else None
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) > 0 else None


def _callers_level() -> int:
    """The stack level of the first frame outside torch and the tuner: the user's call."""
    import torch

    # the tuner package's folder, three up from this file (importing tuner from here would
    # import the package's face from below it)
    tuner_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    skip = (os.path.dirname(torch.__file__ or "") + os.sep, tuner_dir + os.sep)
    frame, level = sys._getframe(1), 1  # level 1: the frame that calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
