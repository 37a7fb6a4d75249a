"""Trials answered from a recorded landscape: a study's ``trials.parquet`` of an exhaustive grid.

A :class:`Landscape` is that file, one row per config (keyed by ``TrialConfig.key``); its
:meth:`Landscape.space` is the grid itself, each dimension's values as the rows hold them, so a
:class:`tuner.study.search.Search` over it can ask only for configs that were measured.
:class:`ReplayRunner` is a :class:`tuner.launch.runner.Runner` that answers each trial with its
recorded record (status, latencies, memory, compile seconds, ...) and the wall time the recorded
trial took, at once: no process, no GPU, no sleep.

It lives with the benchmarks, not in the package: its only use is to measure how a sampler
searches (``search_quality.py``). A study searched this way holds copies of numbers measured
by another run, which the tuner's own commands must never present as measured by this one.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from tuner.data import files
from tuner.data.rows import config_of, plain
from tuner.data.schema import SCHEMA
from tuner.data.select import eligible
from tuner.domain.config import INDUCTOR, OptionValue, TrialConfig
from tuner.domain.records import FINGERPRINT_FIELDS, Status, TrialRequest, TrialResult
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload
from tuner.errors import UserError
from tuner.launch import compile_budget

_RESULT_FIELDS = {f.name: f for f in dataclasses.fields(TrialResult)}
_INT_COLUMNS = {f.name for f in SCHEMA if pa.types.is_integer(f.type)}


class LandscapeError(UserError):
    """The file is not a landscape the search can replay: a config is missing, measured twice,
    or without its wall time."""


@dataclasses.dataclass(frozen=True, eq=False)
class Landscape:
    """A recorded exhaustive grid: every config of :meth:`space` measured once."""

    path: Path
    trials: pd.DataFrame  # the file's rows, in the order they were measured
    workload: Workload  # what the recording measured (the file's metadata)
    metadata: dict[str, Any]
    _rows: dict[str, int] = dataclasses.field(repr=False)  # config key -> row position

    @classmethod
    def read(cls, path: Path | str) -> Landscape:
        """Read a landscape (a study folder or its ``trials.parquet``) and check that it is a
        full grid; anything else is a one-line :class:`LandscapeError`."""
        df, meta, file = files.load(path)
        if "workload" not in meta:
            raise LandscapeError(f"{file}: no workload in the file's metadata")
        df = df.sort_values("trial_number", kind="stable").reset_index(drop=True)
        rows: dict[str, int] = {}
        for position in range(len(df)):
            row = df.iloc[position]
            key = config_of(row).key
            if key in rows:
                raise LandscapeError(f"{file}: config {key} is measured twice (trials "
                                     f"{df['trial_number'][rows[key]]} and {row['trial_number']})"
                                     ": a landscape holds one row per config")
            if _ran(row) and plain(row["wall_s"]) is None:
                raise LandscapeError(f"{file}: trial {row['trial_number']} ({key}) has no wall_s")
            rows[key] = position
        landscape = cls(Path(file), df, Workload.from_dict(meta["workload"]), meta, rows)
        landscape._check_grid()
        return landscape

    @property
    def name(self) -> str:
        """The file's name, or its study folder's for a study's ``trials.parquet``."""
        return self.path.parent.name if self.path.name == "trials.parquet" else self.path.stem

    @property
    def configs(self) -> list[TrialConfig]:
        """Every config of the landscape, in the order it was measured."""
        return [config_of(row) for _, row in self.trials.iterrows()]

    def row(self, key: str) -> pd.Series:
        """The recorded row of a config key; a :class:`LandscapeError` naming it if none."""
        if key not in self._rows:
            raise LandscapeError(f"config {key} is not in the landscape {self.path}: it must hold "
                                 "every config of the search space")
        return self.trials.iloc[self._rows[key]]

    def result(self, config: TrialConfig) -> TrialResult:
        """The recorded record of ``config`` as the runner returned it then (a new object)."""
        row = self.row(config.key)
        data: dict[str, Any] = {}
        for name, field in _RESULT_FIELDS.items():
            if name not in row.index:
                continue  # not a Parquet column (eager_reference_ms, artifacts, fingerprint)
            value = plain(row[name])
            if value is not None and name in _INT_COLUMNS:
                value = int(value)  # a column with empty cells reads back as floats
            elif value is None and field.default_factory is not dataclasses.MISSING:
                value = field.default_factory()  # an empty list
            elif value is None and field.default == "":
                value = ""
            data[name] = value
        data["status"] = Status(data["status"])
        fingerprint = {k: plain(row.get(f"fp_{k}")) for k in FINGERPRINT_FIELDS}
        if fingerprint["gpu_memory_bytes"] is not None:
            fingerprint["gpu_memory_bytes"] = int(fingerprint["gpu_memory_bytes"])
        data["fingerprint"] = fingerprint
        return TrialResult(**data)

    def wall_s(self, key: str) -> float:
        """The seconds the recorded trial of ``key`` took (0 for a row written without running:
        a batch size's "not run" rows where the model failed in eager)."""
        row = self.row(key)
        return float(plain(row["wall_s"]) or 0.0) if _ran(row) else 0.0

    @property
    def total_wall_s(self) -> float:
        """The GPU time of the whole grid: the sum of every recorded trial's wall time."""
        return sum(self.wall_s(key) for key in self._rows)

    def best_latency_ms(self) -> dict[int, float]:
        """The grid's best per-request latency (``latency_ms_p50`` of an ok, correct, compiled-
        as-asked row, as :func:`tuner.data.select.eligible` says) at each batch size that has
        one."""
        ok = eligible(self.trials)
        best = pd.to_numeric(ok["latency_ms_p50"]).groupby(ok["batch_size"]).min()
        return {int(bs): float(ms) for bs, ms in best.items()}

    def space(self) -> SearchSpace:
        """The grid as a search space: each dimension's values in the order the recording
        first measured them, so the baselines (first values) are the recording's too."""
        configs = self.configs
        compiled = [c for c in configs if c.compiled]
        inductor = [c for c in configs if c.backend == INDUCTOR]
        options: dict[str, list[OptionValue]] = {}
        for config in inductor:
            for name, value in config.options:
                options.setdefault(name, [])
                if value not in options[name]:
                    options[name].append(value)
        return SearchSpace(
            backends=_values(c.backend for c in configs),
            modes=_values(c.mode for c in inductor),
            dynamic=_values(c.dynamic for c in compiled),
            batch_sizes=_values(c.batch_size for c in configs),
            dtypes=_searched(c.dtype for c in configs),
            channels_last=_searched(c.channels_last for c in configs),
            cudnn_benchmark=_searched(c.cudnn_benchmark for c in configs),
            options=tuple((name, tuple(values)) for name, values in options.items()))

    def fingerprint(self) -> dict[str, Any]:
        """The machine the landscape was recorded on (the file's first fingerprint)."""
        prints = self.metadata.get("fingerprints") or files.fingerprints(self.trials)
        return dict(prints[0]) if prints else {}

    def _check_grid(self) -> None:
        """Every config of the derived space is in the file, and nothing else is."""
        try:
            space = self.space()
            wanted = {c.key for c in space.configs()}
        except ValueError as exc:
            raise LandscapeError(f"{self.path}: not a grid ({exc})") from exc
        if not self._rows:
            raise LandscapeError(f"{self.path}: no trials")
        for what, keys in (("missing", sorted(wanted - set(self._rows))),
                           ("outside the grid of its own values", sorted(set(self._rows) - wanted))):
            if keys:
                more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
                raise LandscapeError(f"{self.path}: not an exhaustive grid: config {keys[0]}{more} "
                                     f"{what}; record it with `tuner search` until every config "
                                     "in the search space is measured "
                                     "(benchmarks/results/search_quality.md)")


class ReplayRunner:
    """A :class:`tuner.launch.runner.Runner` that answers from a :class:`Landscape`: the
    recorded record of the requested config, at once, held to the request's compile budget
    (:func:`past_budget`). ``calls`` lists the config keys asked, in order. A config the
    landscape lacks raises :class:`LandscapeError` naming it."""

    def __init__(self, landscape: Landscape) -> None:
        self.landscape = landscape
        self.calls: list[str] = []

    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        result = self.landscape.result(request.config)  # its wall_s recorded, not slept
        self.calls.append(request.config.key)
        return past_budget(result, request.protocol.compile_timeout_s) or result

    def close(self) -> None:
        pass


def past_budget(result: TrialResult, budget_s: float | None) -> TrialResult | None:
    """What the process runner would have answered where the recorded first call took longer
    than ``budget_s`` (a --compile-timeout tighter than the recording's): compile_timeout,
    with what the trial did before its first call, and that time plus the budget as its wall
    time (the group is killed at the budget). None where the budget was kept."""
    if budget_s is None or result.compile_s_cold is None or result.compile_s_cold <= budget_s:
        return None
    before = {name: getattr(result, name) for name in ("import_s", "build_s", "eager_reference_s")}
    killed = TrialResult.failure(Status.COMPILE_TIMEOUT, compile_budget.message(budget_s, budget_s),
                                 fingerprint=result.fingerprint, prestarted=result.prestarted,
                                 **before)
    killed.wall_s = sum(v for v in before.values() if v is not None) + budget_s
    return killed


def _ran(row: pd.Series) -> bool:
    """Whether a row's trial ran (a batch size's "not run" rows were written without one)."""
    return not (row["status"] == Status.WORKLOAD_ERROR.value
                and str(plain(row["message"]) or "").startswith("not run"))


def _values(values: Any) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def _searched(values: Any) -> tuple[Any, ...]:
    """A dimension's values; empty where the study did not search it (every config None)."""
    return tuple(v for v in _values(values) if v is not None)  # rows with None: off the grid
