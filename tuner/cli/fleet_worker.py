"""One worker of a fleet (``tuner search --gpus``): ``python -m tuner.cli.fleet_worker PLAN``,
PLAN a :class:`tuner.study.fleet.WorkerPlan` as JSON. It runs what ``tuner worker`` runs; the
storage URL comes in the environment (TUNER_STORAGE), never in argv."""

from __future__ import annotations

import os
import sys

import click

from tuner.cli.measure import run_worker
from tuner.errors import UserError
from tuner.study.fleet import STORAGE_ENV, WorkerPlan


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m tuner.cli.fleet_worker PLAN_JSON", file=sys.stderr)
        return 2
    try:
        run_worker(WorkerPlan.from_json(argv[0]), os.environ.get(STORAGE_ENV), as_json=False)
    except UserError as exc:
        click.echo(f"Error: {exc}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
