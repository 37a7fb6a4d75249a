"""Entry point of a trial process: ``python -m tuner.trial REQUEST.json RESULT.json``.

Pre-started: ``python -m tuner.trial --wait READY [PREBUILD.json]`` (see :mod:`tuner.trial.serve`);
the template that forks pre-started processes: ``python -m tuner.trial --template [MODULE]`` (see
:mod:`tuner.trial.template`).

If the parent sets TUNER_PARENT_PID, the trial dies with that process (Linux).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tuner.trial.contract import LAUNCHED_AT_ENV
from tuner.trial.serve import die_with_parent, serve, wait_for_job


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    launched_at = os.environ.pop(LAUNCHED_AT_ENV, "")
    launch_s = max(0.0, time.monotonic() - float(launched_at)) if launched_at else None
    die_with_parent()
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) in (1, 2) and argv[0] == "--template":
        from tuner.trial import template

        return template.main(argv[1] if len(argv) == 2 else None)
    if len(argv) in (2, 3) and argv[0] == "--wait":
        return wait_for_job(Path(argv[1]), Path(argv[2]) if len(argv) == 3 else None)
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: python -m tuner.trial REQUEST.json RESULT.json\n"
              "       python -m tuner.trial --wait READY [PREBUILD.json]  (then one JSON job "
              "line on stdin)\n"
              "       python -m tuner.trial --template [MODULE]  (see tuner.trial.template)",
              file=sys.stderr)
        return 2
    return serve(Path(argv[0]), Path(argv[1]), started, launch_s=launch_s)


if __name__ == "__main__":
    sys.exit(main())
