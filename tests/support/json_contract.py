"""The JSON contract every ``--json`` output keeps (tuner.data.json_contract), as assertions."""

from __future__ import annotations

from typing import Any

from tuner.data.json_contract import JSON_SCHEMA, is_count
from tuner.version import __version__


def at_batch_size(items: list[dict[str, Any]], batch_size: int, field: str = "text") -> Any:
    """``field`` of the one entry of a per-batch-size list that has ``batch_size``."""
    found = [item[field] for item in items if item["batch_size"] == batch_size]
    assert len(found) == 1, (batch_size, items)
    return found[0]


def assert_contract(data: Any) -> None:
    """The top level carries ``tuner_version`` and ``schema``; everywhere below, the rules."""
    assert isinstance(data, dict)
    assert data.get("tuner_version") == __version__ and data.get("schema") == JSON_SCHEMA, \
        {k: data.get(k) for k in ("tuner_version", "schema")}
    _walk(data, "$")


def _walk(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str)
            # a batch size is a field, never a key: no object keyed by whole numbers
            assert not key.isdigit(), f"{where}: key {key!r} (a batch size as a key?)"
            here = f"{where}.{key}"
            if key == "batch_size":
                assert isinstance(item, int) and not isinstance(item, bool), (here, item)
            if key == "study":
                assert isinstance(item, str) and item, (here, item)
            if is_count(key):
                items = item if isinstance(item, list) else [item]
                assert all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                           for v in items), (here, item)
            _walk(item, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{where}[{i}]")
    elif isinstance(value, float):
        assert value == value and abs(value) != float("inf"), (where, value)
