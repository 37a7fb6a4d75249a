"""tuner: find the torch.compile settings that pay off for your model on your hardware.

The Python API, for production code::

    import tuner

    rec = tuner.recommend("studies/resnet50-cuda", batch_size=32, max_vram_gb=20)
    model = rec.apply(model)
    side_by_side = tuner.compare(["studies/resnet50-h200", "studies/resnet50-l4"])

``import tuner`` stays light (no pandas, no torch): the names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.errors import UserError
from tuner.version import __version__ as __version__

__all__ = ["Constraints", "MismatchWarning", "Recommendation", "UserError", "WarmStartMissed",
           "compare", "recommend"]

if TYPE_CHECKING:
    from tuner.data.select import Constraints
    from tuner.use.compare import compare
    from tuner.use.environment import MismatchWarning
    from tuner.use.recommend import Recommendation, WarmStartMissed, recommend

_LAZY = {"recommend": "tuner.use.recommend", "Recommendation": "tuner.use.recommend",
         "Constraints": "tuner.data.select", "MismatchWarning": "tuner.use.environment",
         "compare": "tuner.use.compare", "WarmStartMissed": "tuner.use.recommend"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
