"""Formatting shared by every view: cells, bytes, durations, fingerprints."""

from __future__ import annotations

import math
from typing import Any

from tuner.data.select import GIB


def fmt_bytes(n: Any) -> str:
    """``1.25 GiB``; ``-`` for no value."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    return f"{n / GIB:.2f} GiB"


def cell(value: Any, fmt: str) -> str:
    """One table cell: ``fmt`` applied, ``bytes`` as GiB, ``-`` for no value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        import pandas as pd

        if pd.isna(value):
            return "-"
    except (TypeError, ValueError, ImportError):
        pass
    if fmt == "bytes":
        return fmt_bytes(value)
    return fmt.format(value)


def describe_fingerprint(fp: dict[str, Any]) -> str:
    """One line for humans: ``NVIDIA H200 (cc 9.0), torch 2.11.0, CUDA 13.0, host h``."""
    if fp.get("device_kind") == "cuda":
        where = f"{fp.get('gpu_name')} (cc {fp.get('gpu_compute_capability')})"
    else:
        where = f"CPU {fp.get('cpu') or ''}".strip()
    extra = f", CUDA {fp['cuda']}" if fp.get("cuda") and fp.get("device_kind") == "cuda" else ""
    return f"{where}, torch {fp.get('torch')}{extra}, host {fp.get('host')}"


def is_list(value: Any) -> bool:
    return hasattr(value, "__len__") and not isinstance(value, str)
