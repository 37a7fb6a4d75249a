"""The tuner's metadata in a study file (JSON values under ``tuner.*`` keys): the machines'
fingerprints and peak rates taken from the rows, and the shape each value read back must have."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd

from tuner.domain.records import FINGERPRINT_FIELDS


def fingerprints(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The distinct fingerprints in a study (one, unless several machines shared it)."""
    cols = [f"fp_{k}" for k in FINGERPRINT_FIELDS]
    distinct = df[cols].dropna(how="all").drop_duplicates()
    return [{c[3:]: (None if pd.isna(v) else v) for c, v in row.items()}
            for row in distinct.to_dict("records")]


def peaks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The best matmul rate measured on each machine of a study (host, GPU name, TFLOP/s)."""
    measured = df[pd.to_numeric(df["peak_tflops_measured"], errors="coerce").notna()]
    best = measured.groupby([measured["fp_host"].fillna(""), measured["fp_gpu_name"].fillna("")])[
        "peak_tflops_measured"].max()
    return [{"host": host or None, "gpu_name": gpu or None, "peak_tflops_measured": float(v)}
            for (host, gpu), v in best.items()]


# The shape of each metadata value the readers use (what export writes): JSON of another kind
# (a list where an object belongs) would be a traceback in show, recommend or compare.
_META_SHAPES: dict[str, tuple[type, type | None]] = {
    "study": (str, None), "storage": (str, None), "workload": (dict, None),
    "space": (dict, None), "protocol": (dict, None), "mode_options": (dict, None),
    "option_defaults": (dict, None),
    "fingerprints": (list, dict), "peak_tflops": (list, dict)}  # (the value, each item)
_JSON_KIND: dict[type, str] = {str: "a string", dict: "an object", list: "a list"}


def misshapen(meta: dict[str, Any]) -> str | None:
    """The first metadata value not of its shape in :data:`_META_SHAPES`, said as ``key is a
    list, not an object``; None where all are (an absent or null value is allowed)."""
    def kind(value: Any) -> str:
        return next((said for t, said in _JSON_KIND.items() if isinstance(value, t)),
                    "a number" if isinstance(value, (int, float)) else "null")

    for key, (outer, item) in _META_SHAPES.items():
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, outer):
            return f"{key} is {kind(value)}, not {_JSON_KIND[outer]}"
        if item is None:
            continue
        bad = [v for v in cast(list[Any], value) if not isinstance(v, item)]
        if bad:  # a null among them too
            return f"{key} holds {kind(bad[0])} where each should be {_JSON_KIND[item]}"
    return None
