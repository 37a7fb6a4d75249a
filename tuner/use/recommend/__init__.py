"""From a study to production: pick the config that fits, and apply it to a model.

>>> import tuner
>>> rec = tuner.recommend("studies/resnet50", batch_size=32, objective="latency",
...                       max_vram_gb=20, max_compile_s=60)      # doctest: +SKIP
>>> model = rec.apply(model)                                      # doctest: +SKIP

Which rows may be recommended and which is best are :mod:`tuner.data.select`'s rules, the same
that ``tuner show`` and ``tuner compare`` apply: only trials that finished and matched eager
(``correct`` True), and a compiled config within noise of eager never beats eager.

The record and how it is applied (warm start included) are
:mod:`~tuner.use.recommend.recommendation`'s; the choice is :mod:`~tuner.use.recommend.choose`'s,
the sentence on why eager won :mod:`~tuner.use.recommend.why_eager`'s, and what ``recommend``
refuses with a message of its own :mod:`~tuner.use.recommend.errors`', and whether the first
call after ``apply`` started warm :mod:`~tuner.use.recommend.first_call`'s.
"""

from tuner.use.recommend.choose import recommend
from tuner.use.recommend.errors import BatchSizeNeeded, LimitsUnmet
from tuner.use.recommend.first_call import WarmStartMissed
from tuner.use.recommend.recommendation import Recommendation

__all__ = ["BatchSizeNeeded", "LimitsUnmet", "Recommendation", "WarmStartMissed", "recommend"]
