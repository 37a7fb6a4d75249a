"""optuna-dashboard's API asked as its page asks it, for the tests of what it shows."""

from __future__ import annotations

import json
from typing import Any


def get(app: Any, path: str) -> dict[str, Any]:
    """One GET on a WSGI app, as the dashboard's page makes it; the JSON it answers."""
    from wsgiref.util import setup_testing_defaults

    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status[0].startswith("200"), (status, body[:300])
    return json.loads(body)
