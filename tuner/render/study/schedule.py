"""The shape-schedule replay of ``tuner show``: per trial that replayed it, its recompiles,
the whole replay's time and each shape's latency, as records and as a table."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.data.rows import NAME
from tuner.domain.records import Status
from tuner.render.table import Column, grid
from tuner.render.text import cell, is_list


def schedule_rows(trials: pd.DataFrame) -> list[dict[str, Any]]:
    """Per ok trial that replayed the shape schedule: recompiles, time spent recompiling, the
    whole replay and the median latency of each distinct shape."""
    if "schedule_total_s" not in trials:
        return []
    done = trials[(trials["status"] == Status.OK.value) & trials["schedule_total_s"].notna()]
    rows = []
    for _, r in done.sort_values(["batch_size", "schedule_total_s"]).iterrows():
        labels = r.get("schedule_shapes")
        if not is_list(labels) or len(labels) == 0:
            labels = r["schedule_batch_sizes"]
        rows.append({
            "batch_size": int(r["batch_size"]), "label": r["label"], "name": r[NAME],
            "trial_number": int(r["trial_number"]),
            "recompiles": None if pd.isna(r["schedule_recompiles"]) else int(r["schedule_recompiles"]),
            "recompile_s": None if pd.isna(r["schedule_recompile_s"]) else float(r["schedule_recompile_s"]),
            "replay_s": float(r["schedule_total_s"]),
            "latency_ms": {str(k): float(v) for k, v in zip(labels, r["schedule_latency_ms"])},
            "warmup_s": {str(k): float(v) for k, v in zip(labels, _listed(r, "schedule_warmup_s"))},
        })
    return rows


def _listed(row: pd.Series, column: str) -> list[Any]:
    value = row.get(column)
    return list(value) if is_list(value) else []


def schedule_table(rows: list[dict[str, Any]], width: int | None = None) -> str:
    """The replays as a table within ``width`` characters (:func:`tuner.render.table.grid`)."""
    shapes = list(dict.fromkeys(k for r in rows for k in r["latency_ms"]))
    columns = [Column("batch"), Column("config", text=True), Column("recompiles"),
               Column("recompile s"), Column("replay s"), *(Column(f"{s} ms") for s in shapes)]
    body = [[str(r["batch_size"]), r["name"], cell(r["recompiles"], "{:d}"),
             cell(r["recompile_s"], "{:.1f}"), f"{r['replay_s']:.1f}",
             *(cell(r["latency_ms"].get(s), "{:.3f}") for s in shapes)] for r in rows]
    return grid(columns, body, width)
