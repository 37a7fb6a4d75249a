"""A trial record as a Parquet row, a row back as a config, and each row's config named for
people (the :data:`NAME` column every frame the readers see holds: :mod:`tuner.domain.naming`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from tuner.data.derive import derive
from tuner.data.schema import COLUMNS, SCHEMA_VERSION, is_option_column
from tuner.domain.config import WHOLE, TrialConfig, option_column
from tuner.domain.naming import PLAIN, NameBasis, OptionDefaults, config_names, known_defaults
from tuner.domain.records import FINGERPRINT_FIELDS, TrialResult
from tuner.domain.workload import Workload

# The timers of records made by tuner 0.1.0 before 2026-11-30 (fd5945c), before calls were timed
# one request at a time (whose timer is perf_counter_sync, tuner.trial.device): every call timed
# back to back.
BACK_TO_BACK_TIMERS = ("cuda_event", "perf_counter")
# The column of each row's config as people read it (tuner.domain.naming.config_name): made
# when rows are read or framed, never written to a file (config_json and the config columns
# hold the config whole).
NAME = "name"


def trial_row(study: str, number: int, config: TrialConfig, workload: Workload,
              result: TrialResult) -> dict[str, Any]:
    """One Parquet row: the record's fields, its config, workload and fingerprint, and a column
    per inductor option the config sets. The derived columns (speedup, throughput, ...) are
    :func:`tuner.data.derive.derive`'s to fill."""
    data = result.to_dict()
    fingerprint = data.pop("fingerprint") or {}
    row: dict[str, Any] = {k: v for k, v in data.items() if k in COLUMNS}
    ran = config.applied_to(workload)  # dtype, memory format, cudnn.benchmark as the trial ran
    row.update(
        schema_version=SCHEMA_VERSION, study=study, trial_number=number, config_key=config.key,
        label=config.label, backend=config.backend, mode=config.mode, dynamic=config.dynamic,
        batch_size=config.batch_size, config_json=json.dumps(config.to_dict(), sort_keys=True),
        model=workload.model, device=workload.device, dtype=ran.dtype,
        image_size=workload.image_size, channels_last=ran.channels_last,
        cudnn_benchmark=ran.cudnn_benchmark,
        compile_scope=(config.compile_scope or WHOLE) if config.compiled else None)
    row.update({option_column(name): value for name, value in config.options})
    row.update({f"fp_{k}": fingerprint.get(k) for k in FINGERPRINT_FIELDS})
    if row.get("stream_timer") is None and row.get("timer") in BACK_TO_BACK_TIMERS:
        # A record of tuner 0.1.0 before 2026-11-30 (fd5945c), which timed calls back to back
        # only (files of schema 1 and 2, which tuner.data.files.read reads the same way): its
        # latency is the stream figure. Without this, the study exported again lost its stream
        # times and items/s.
        row.update({f"stream_ms_{stat}": row.get(f"latency_ms_{stat}")
                    for stat in ("p50", "p90", "p99", "iqr")}, stream_timer=row["timer"])
    return row


def frame(rows: Iterable[dict[str, Any]], basis: NameBasis = PLAIN) -> pd.DataFrame:
    """Rows as a DataFrame with every column of the schema, then the inductor options' columns
    (sorted; empty where a row's config does not set the option), the derived ones filled,
    sorted by batch size and trial number; each config named against ``basis`` (:data:`NAME`)."""
    rows = list(rows)
    options = sorted(k for k in set().union(*rows) if is_option_column(k))
    df = derive(pd.DataFrame(rows, columns=COLUMNS + options))
    df = df.sort_values(["batch_size", "trial_number"], kind="stable").reset_index(drop=True)
    return named(df, basis)


def basis_of(meta: Mapping[str, Any]) -> NameBasis:
    """What a study's config names are relative to, from its files' metadata: its workload
    and the option defaults its search recorded (``option_defaults``); for a study made before
    tuner 0.3.0, :func:`tuner.domain.naming.known_defaults` under the ``mode_options`` its files
    hold."""
    def modes(key: str) -> dict[str, Any] | None:
        value = meta.get(key)
        return {str(m): o for m, o in value.items() if isinstance(o, dict)} \
            if isinstance(value, dict) else None

    recorded = modes("option_defaults")
    defaults = OptionDefaults.from_dict(recorded) if recorded is not None \
        else known_defaults(modes("mode_options"))
    workload = meta.get("workload")
    return NameBasis.of(workload if isinstance(workload, dict) else None, defaults)


def named(df: pd.DataFrame, basis: NameBasis) -> pd.DataFrame:
    """``df`` with its :data:`NAME` column: each row's config named against ``basis``, two
    different configs never alike (:func:`tuner.domain.naming.config_names`)."""
    columns = [c for c in ("config_json", "backend", "batch_size", "mode", "dynamic") if c in df]
    configs = [config_of(row) for row in df[columns].to_dict("records")]
    return df.assign(**{NAME: pd.Series(config_names(configs, basis), index=df.index,
                                        dtype=object)})


def config_of(row: pd.Series | dict[str, Any]) -> TrialConfig:
    """The config a Parquet row measured: exactly, from ``config_json``; from the config
    columns for rows written by tuner 0.1.0 before 2026-11-30 (a87c065)."""
    stored = plain(row.get("config_json"))
    if stored:
        return _from_json(stored)
    mode, dynamic = plain(row.get("mode")), plain(row.get("dynamic"))
    return TrialConfig(backend=str(row["backend"]), batch_size=int(row["batch_size"]),
                       mode=None if mode is None else str(mode),
                       dynamic=None if dynamic is None else bool(dynamic))


@functools.lru_cache(maxsize=4096)  # a search names every row after each trial
def _from_json(text: str) -> TrialConfig:
    return TrialConfig.from_dict(json.loads(text))


def plain(value: Any) -> Any:
    """numpy/pandas scalars → Python; NaN/NA → None (lists pass through)."""
    if isinstance(value, (list, tuple, dict)):
        return value
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
        if isinstance(value, list):
            return value
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def num(value: Any) -> float | None:
    """A cell as a float; None if empty or not a number."""
    value = plain(value)
    return None if value is None or isinstance(value, (str, bool)) else float(value)
