"""A fleet worker with FakeRunner behind it (see tests.fakes.install)."""

from __future__ import annotations

import sys

from tests import fakes

if __name__ == "__main__":
    fakes.install()
    from tuner.cli.fleet_worker import main

    sys.exit(main())
