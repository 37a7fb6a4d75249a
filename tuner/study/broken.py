"""Batch sizes where the model itself fails, without compiling, and what a resume makes of them.

Every config at a batch size runs the eager reference first, so where the model fails there
(it raises, or eager crashes, hangs, runs out of memory or hits a CUDA error) each config would
fail the same way, each up to ``--timeout``: the search skips the batch size, and its other
configs become "not run" rows (:func:`not_run_result`).

Which failures a resume believes: eager's crash, out of memory or CUDA error is the study's
measurement of that batch size, so it stays the study's answer there: a resume reads it from
the storage (:func:`breakage_of`) and skips the batch size again, rather than running each
not-run config as a trial that fails the same way, unless asked to try it again
(``tuner search --retry-failed``: the model or the machine was fixed). Two failures are tried
again in any case (:func:`retried`): a model that raised (``workload_error``), a bug the user
fixes, and eager past ``--timeout``, which a resume with a larger ``--timeout`` may finish (the
error of a study where every batch size timed out says to raise it). The same command then runs eager there once more,
first, and measures the rest only if it now runs; a second failure costs one trial, not one per
config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tuner.domain.config import TrialConfig
from tuner.domain.naming import config_name
from tuner.domain.records import NO_CUDA_FOR_FACTORY, Status, TrialResult
from tuner.errors import UserError
from tuner.study.record import NOT_RUN, was_run

# Eager's failures that are the study's answer for their batch size (see the module docstring).
HELD = (Status.CRASH, Status.OOM, Status.CUDA_ERROR)


@dataclasses.dataclass(frozen=True)
class Breakage:
    """The trial that showed the model cannot run at its batch size."""

    number: int  # the tuner's trial number
    name: str  # its config's, as people read it (tuner.domain.naming)
    status: Status
    message: str  # its first line

    def __str__(self) -> str:
        return f"trial {self.number}, {self.name}: {self.status.value}: {self.message}"


def breaks_batch(config: TrialConfig, status: Status | str | None) -> bool:
    """Whether a trial shows that the model itself cannot run at its batch size: its factory or
    eager reference raised (workload_error), or eager itself crashed, hung, ran out of memory or
    hit a CUDA error (a device-side assert, say)."""
    status = _status(status)
    return status is Status.WORKLOAD_ERROR or (
        not config.compiled and status in (*HELD, Status.TIMEOUT))


def refusal(result: TrialResult) -> UserError | None:
    """The error a trial's record stops the whole search with, before its other trials: bad
    input that fails at every batch size alike, a factory that asked for CUDA on a machine
    without CUDA (:mod:`tuner.trial.build`). Any other failure is the batch size's."""
    message = result.message or ""
    if result.status is Status.WORKLOAD_ERROR and NO_CUDA_FOR_FACTORY in message:
        return UserError(message.splitlines()[0])
    return None


def _status(status: Status | str | None) -> Status | None:
    """A record's status (stored as text) as a :class:`Status`; None for another text."""
    try:
        return None if status is None else Status(status)
    except ValueError:
        return None


def retried(config: TrialConfig, status: str | Status | None) -> bool:
    """Whether a stored record of ``config`` with ``status`` is tried again by a resume, so is
    not the study's measurement of it: a model that raised, or eager past ``--timeout``."""
    status = _status(status)
    return status is Status.WORKLOAD_ERROR or (not config.compiled and status is Status.TIMEOUT)


# A breakage's message is cut where a record's is (tuner.trial.failures.one_line: 300
# characters), so the advice at the end of a workload error reaches the search's last line.
MESSAGE_CHARS = 300


def _first_line(message: str) -> str:
    return message.splitlines()[0][:MESSAGE_CHARS] if message else ""


def breakage(number: int, config: TrialConfig, result: TrialResult) -> Breakage:
    return Breakage(number, config_name(config), result.status, _first_line(result.message or ""))


def breakage_of(number: int, config: TrialConfig, record: Mapping[str, Any]) -> Breakage | None:
    """The breakage a stored ``record`` holds for a resume to believe: eager's held failure
    (:data:`HELD`), not a not-run row and not one that is tried again (:func:`retried`)."""
    if config.compiled or not was_run(record):
        return None
    status = _status(record.get("status"))
    if status not in HELD:
        return None
    message = str(record.get("message") or "")
    return Breakage(number, config_name(config), status, _first_line(message))


def not_run_result(batch_size: int, why: Breakage) -> TrialResult:
    """The record of a config at ``batch_size`` skipped for ``why``."""
    return TrialResult.failure(Status.WORKLOAD_ERROR, f"{NOT_RUN}at batch size {batch_size} the "
                               f"model fails without compiling ({why})")
