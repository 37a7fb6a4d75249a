"""A fleet worker with FakeRunner behind it (see tuner.fake.runner.install)."""

from __future__ import annotations

import sys

from tuner.fake import runner as fakes

if __name__ == "__main__":
    fakes.install()
    from tuner.cli.fleet_worker import main

    sys.exit(main())
