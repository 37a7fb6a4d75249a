"""The study: its Optuna storage (:mod:`~tuner.study.storage`), one Optuna study per batch
size (:mod:`~tuner.study.fronts`) and their sampler (:mod:`~tuner.study.sampler`), the workers
that share it (:mod:`~tuner.study.claims`, :mod:`~tuner.study.fleet`), the ask/tell loop
(:mod:`~tuner.study.search`), the finalists measured again (:mod:`~tuner.study.finalists`,
:mod:`~tuner.study.finalist_rounds`, :mod:`~tuner.study.remeasurements`) and the Parquet files
written from it (:mod:`~tuner.study.export`)."""
