"""``python -m tuner``: the command line."""

from tuner.cli import main

main()
