"""``python -m tuner``: the command line."""

from tuner.cli.app import main

main()
