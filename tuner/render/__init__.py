"""Everything people read: the study report of ``tuner show`` (:mod:`~tuner.render.study`),
a recommendation and its code snippet (:mod:`~tuner.render.recommendation`), a comparison and
its plot (:mod:`~tuner.render.comparison`), search progress (:mod:`~tuner.render.progress`),
and the formatting they share (:mod:`~tuner.render.text`)."""


