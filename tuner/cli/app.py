"""The ``tuner`` command group: a thin layer over the library. Progress and logs go to stderr;
results (tables, or JSON with --json) to stdout.

``search``, ``worker`` and ``confirm`` measure (:mod:`tuner.cli.measure`); ``show``,
``recommend``, ``compare`` and ``plot`` read studies (:mod:`tuner.cli.read`); ``check`` tries a
recommendation as production would (:mod:`tuner.cli.check`)."""

from __future__ import annotations

import click

from tuner.cli import check, measure, read
from tuner.cli.errors import OneLineErrors
from tuner.cli.options import CONTEXT


@click.group(cls=OneLineErrors, context_settings=CONTEXT)
@click.version_option(package_name="tuner")
def main() -> None:
    """Find the torch.compile settings that pay off for your model on your hardware.

    \b
    tuner search --model resnet18 --batch-sizes 1,32     # measure, overnight if you like
    tuner show studies/resnet18-cuda                     # the Pareto-optimal settings
    tuner recommend studies/resnet18-cuda --batch-size 32 --format python
    tuner show studies/resnet18-cuda --importance        # which knobs matter
    tuner plot studies/resnet18-cuda                     # PNGs: fronts and importances
    tuner check studies/resnet18-cuda --batch-size 32    # does it warm-start here?
    """


for _command in (measure.search, measure.worker, measure.confirm, read.show, read.recommend,
                 read.compare, read.plot, check.check):
    main.add_command(_command)


if __name__ == "__main__":  # python -m tuner.cli.app, as python -m tuner
    main()
