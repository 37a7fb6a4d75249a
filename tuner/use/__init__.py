"""Using a study: the recommended config, applied to a model in production
(:mod:`~tuner.use.recommend`), the machine it was measured on checked against this one
(:mod:`~tuner.use.environment`), and studies compared across GPUs (:mod:`~tuner.use.compare`)."""


