"""``python -m tuner.fake [--fake-delay S] [--export-every-trial] ARGS...``: the ``tuner``
command with FakeRunner behind it, for tests that need a real process (signals, kills, fleets)
and for benchmarks' dry runs (``--fake-runner``). ``--export-every-trial`` writes the study's
files after every trial however long a write takes (:class:`tuner.study.export.ExportPacer`
skips some once one takes over 0.2 s, as it may on a loaded machine), for a test that counts the
rows a killed search left."""

from __future__ import annotations

import sys

from tuner.fake import runner as fakes

if __name__ == "__main__":
    args = sys.argv[1:]
    delay = None
    if args[:1] == ["--fake-delay"]:
        delay, args = float(args[1]), args[2:]
    if args[:1] == ["--export-every-trial"]:
        from tuner.study.export import ExportPacer

        ExportPacer.due = lambda self: True  # type: ignore[method-assign]
        args = args[1:]
    fakes.install(delay)
    from tuner.cli.app import main

    main(args, prog_name="tuner")
