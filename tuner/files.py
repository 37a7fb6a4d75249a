"""Files written so that a reader sees the old file or the whole new one, never half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so a reader sees the old file or the whole new one, never half."""
    write_bytes_atomic(Path(path), json.dumps(data).encode())


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` so that a reader sees the old file or the whole new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, readable_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def readable_mode() -> int:
    """The mode a plain ``open()`` would give a new file (mkstemp's 0600 would hide results
    from other users of a shared machine)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


# Arrow writes and reads a Parquet file by a UTF-8 name: another name was a UnicodeEncodeError
# traceback in search, and "not a readable Parquet file" for a good file in show.
NOT_UTF8 = ("holds bytes that are not UTF-8, and a study's files need a UTF-8 path: rename the "
            "folder")


def not_utf8(text: str) -> bool:
    """Whether ``text`` (a path as Python decoded it) holds bytes that are not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
