"""The process of ``tuner check`` (``python -m tuner.check REQUEST.json``): production's warm
start, tried in a fresh process on empty compile caches. It chooses the recommendation with
``tuner.recommend``, builds the study's model as a trial builds it (:mod:`tuner.trial.build`),
calls ``apply`` and the compiled model, and writes one :class:`tuner.use.check.CheckRecord`.
:func:`tuner.use.check.check` starts it and reads what it wrote; nothing imports it."""
