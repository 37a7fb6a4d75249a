"""``python -m tests.fake_tuner [--fake-delay S] ARGS...``: the ``tuner`` command with
FakeRunner behind it, for tests that need a real process (signals, kills, fleets)."""

from __future__ import annotations

import sys

from tests import fakes

if __name__ == "__main__":
    args = sys.argv[1:]
    delay = None
    if args[:1] == ["--fake-delay"]:
        delay, args = float(args[1]), args[2:]
    fakes.install(delay)
    from tuner.cli.app import main

    main(args, prog_name="tuner")
