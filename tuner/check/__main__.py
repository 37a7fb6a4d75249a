"""``python -m tuner.check REQUEST.json``: write the record its request names; exit 0 when it
did, 2 on a bad command line; anything else (a traceback on stderr) when it could not."""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m tuner.check REQUEST.json (tuner check starts it)", file=sys.stderr)
        return 2
    from tuner.check.process import run_request

    run_request(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
