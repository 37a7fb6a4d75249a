"""The product's data: the Parquet schema (:mod:`~tuner.data.schema`), rows made from trial
records (:mod:`~tuner.data.rows`), the columns derived from them (:mod:`~tuner.data.derive`),
the files (:mod:`~tuner.data.files`), and what may be compared and recommended: eligibility,
the Pareto set, objectives, constraints and ranks (:mod:`~tuner.data.select`), intervals and
the within-noise rule (:mod:`~tuner.data.noise`). Each is defined once, here."""


