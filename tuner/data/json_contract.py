"""The one contract of every ``--json`` output (``show``, ``recommend``, ``compare``, ``check``,
``plot``, ``search``, ``worker``, ``confirm``) and of the library's ``to_dict``:

* a top-level ``tuner_version`` (the tuner that wrote it) and ``schema``
  (:data:`JSON_SCHEMA`, an integer raised whenever a field is removed, renamed or changes
  meaning; adding a field keeps it);
* what is per batch size is a list of objects with an integer ``batch_size`` field, never an
  object keyed by batch sizes as text;
* ``study`` is always the study's name (a string);
* bytes and counts are integers (:func:`is_count`), never ``1234.0``; a count that is an
  estimate (``break_even_calls``) is rounded as the text prints it;
* no NaN: a missing value is ``null``.

Schema 1 (tuner 0.3.0) is the first: CHANGELOG.md lists what changed from the outputs before.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from tuner.data.rows import plain as rows_plain
from tuner.data.schema import SCHEMA

JSON_SCHEMA = 1

# Counts beyond the Parquet's integer columns (which are all counts, bytes or numbers).
_COUNTS = frozenset({"batch_size", "trial_number", "trials", "failed", "candidates", "rows",
                     "best_rows", "processes_to_decide", "break_even_calls", "calls",
                     "plain_trial_number", "verified", "repeats", "processes"})
_INTEGER_COLUMNS = frozenset(f.name for f in SCHEMA if pa.types.is_integer(f.type)
                             or (pa.types.is_list(f.type) and pa.types.is_integer(f.type.value_type)))


def is_count(key: str) -> bool:
    """Whether a JSON field named ``key`` holds bytes or a count (an integer, or a list of
    them): the Parquet's integer columns, ``*_bytes``, ``*_calls`` and the counts the outputs
    add (``trials``, ``candidates`` ...)."""
    return (key in _COUNTS or key in _INTEGER_COLUMNS or key.endswith("_bytes")
            or key.endswith("_calls"))


def document(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` under the contract: ``tuner_version`` and ``schema`` first, then its fields made
    plain (:func:`plain`)."""
    from tuner.version import __version__

    body = {k: v for k, v in data.items() if k not in ("tuner_version", "schema")}
    return {"tuner_version": __version__, "schema": JSON_SCHEMA, **plain(body)}


def plain(value: Any, key: str = "") -> Any:
    """``value`` as JSON data: numpy and pandas scalars as Python's, NaN and infinities as
    None, tuples as lists, and under a count's key (:func:`is_count`) whole numbers as ints."""
    if isinstance(value, dict):
        return {str(k): plain(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "tolist")
                                             and getattr(value, "ndim", 0) > 0):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [plain(v, key) for v in items]
    value = rows_plain(value)  # numpy and pandas scalars as Python's, NA as None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return round(value) if key and is_count(key) else value
    return value
