"""The command line. :mod:`tuner.cli.app` holds the ``tuner`` group, the commands register on it
from :mod:`tuner.cli.measure` and :mod:`tuner.cli.read`.

This file imports nothing: a fleet's worker (:mod:`tuner.cli.fleet_worker`) starts its trials'
template process before it imports the commands and the rest of the tuner (0.5-0.8 s)."""
