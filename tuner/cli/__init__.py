"""The command line. :mod:`tuner.cli.app` holds the ``tuner`` group, the commands register on it
from :mod:`tuner.cli.measure` and :mod:`tuner.cli.read`; they share their options
(:mod:`tuner.cli.options`), the translation of errors (:mod:`tuner.cli.errors`) and what they
print (:mod:`tuner.cli.output`). The work is the library's: a search is built and checked in
:mod:`tuner.study.new_search`, a worker or confirm run joins its study in
:mod:`tuner.study.joined`, and each runs in :mod:`tuner.study.foreground`.

This file imports nothing: a fleet's worker (:mod:`tuner.cli.fleet_worker`) starts its trials'
template process before it imports the commands and the rest of the tuner (0.5-0.8 s)."""
