"""What the trial process and production code both do to torch, so that loading a
recommendation does not import the trial process's package: :mod:`~tuner.runtime.knobs` sets the
workload's global knobs, :mod:`~tuner.runtime.artifacts` saves and loads compile artifacts,
:mod:`~tuner.runtime.fingerprint` says what machine this is."""
