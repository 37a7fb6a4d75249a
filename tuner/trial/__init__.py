"""The trial process, and nothing else: ``python -m tuner.trial REQUEST.json RESULT.json``.

The search process never imports torch for a trial; it starts this package's entry point
(:mod:`tuner.trial.__main__`) in a fresh process through :mod:`tuner.launch`. In here:

* :mod:`~tuner.trial.protocol` runs one trial, its steps in order; :mod:`~tuner.trial.eager`
  takes eager's reference output before the compile; :mod:`~tuner.trial.failures` turns what
  went wrong into the trial's record;
* :mod:`~tuner.trial.build` builds the workload; :mod:`~tuner.trial.device` times calls and reads
  memory; :mod:`~tuner.trial.stats` summarises samples; :mod:`~tuner.trial.checks` compares
  outputs with eager and counts FLOPs; :mod:`~tuner.trial.health` reads dynamo's counters;
  :mod:`~tuner.trial.replay` replays a shape schedule; :mod:`~tuner.trial.reference` keeps eager's FLOPs, time and float32 output for the next
  trials; :mod:`~tuner.trial.prebuild` builds the model in a pre-started process;
* what production code does to torch too (global knobs, compile artifacts, the machine's
  fingerprint) is :mod:`tuner.runtime`'s, which this package imports;
* :mod:`~tuner.trial.contract` holds what the parent and the trial agree on (exit codes,
  environment variables).
"""


