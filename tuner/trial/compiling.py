"""What the trial compiles (:func:`compiled_model`: the whole model, or its repeated blocks),
and the trial's side of the compile budget (:mod:`tuner.launch.compile_budget`).

While the first compiled call runs, a marker file holds the trial's record so far: the runner,
seeing it older than the budget, kills the process group and keeps that record, so the row
still has what was measured before the compile (the machine, the build, the eager reference).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialResult
from tuner.domain.workload import Workload, load_factory
from tuner.files import write_json_atomic
from tuner.trial.contract import COMPILE_MARKER_ENV
from tuner.trial.failures import TrialStopped, fail


@contextlib.contextmanager
def compiling(result: TrialResult, compiled: bool) -> Iterator[None]:
    """Mark the block (the first call of a compiled config) for the runner's compile budget;
    a no-op for eager, which compiles nothing, and when the runner sets no budget."""
    path = os.environ.get(COMPILE_MARKER_ENV)
    if not path or not compiled:
        yield
        return
    marker = Path(path)
    write_json_atomic(marker, result.to_dict())  # before the clock starts: not compile time
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def compiled_model(model: Any, config: TrialConfig, workload: Workload,
                   result: TrialResult) -> Callable[..., Any]:
    """The model as ``config`` runs it: itself for eager; ``torch.compile(model, ...)`` for the
    whole scope; for ``regional``, the model itself with each repeated block compiled in place
    (:mod:`tuner.runtime.regions`), their class and count on the record. Its first call
    compiles. A model without repeated blocks ends the trial as ``compile_error``, saying so:
    the search process never builds the model, so only a trial can tell."""
    import torch

    from tuner.runtime import regions

    if not config.compiled:
        return model
    if not config.regional:
        return torch.compile(model, **config.compile_kwargs())
    try:
        found = regions.find_regions(model, _named_block(workload))
    except regions.NoRegions as exc:
        raise TrialStopped(fail(result, Status.COMPILE_ERROR,
                                f"compile_scope regional: {exc}{_naming_hint(workload)}")) from None
    regions.compile_regions(model, found, **config.compile_kwargs())
    result.region_class, result.regions_compiled = found.block_class, len(found.names)
    return model


def eager_model(model: Any, config: TrialConfig) -> Callable[..., Any]:
    """A callable that runs ``model`` eagerly, for the references checked after compiling (the
    shape schedule's): a regional compile compiled the model's own blocks in place, so its
    calls run under ``force_eager``."""
    import torch

    if not config.regional:
        return model

    def eager(*inputs: Any) -> Any:
        with torch.compiler.set_stance("force_eager"):
            return model(*inputs)

    return eager


def _named_block(workload: Workload) -> Any:
    """The block class a factory names (``factory.regional_block``); None where it names none."""
    from tuner.runtime.regions import REGIONAL_BLOCK
    from tuner.trial.build import WorkloadError

    if not workload.is_factory:
        return None
    return getattr(load_factory(workload.model, error=WorkloadError), REGIONAL_BLOCK, None)


def _naming_hint(workload: Workload) -> str:
    from tuner.runtime.regions import REGIONAL_BLOCK

    return (f"; {workload.model}.{REGIONAL_BLOCK} = BlockClass names the block to compile"
            if workload.is_factory else "")
