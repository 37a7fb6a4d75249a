"""tuner: find the torch.compile settings that pay off for your model on your hardware."""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {"recommend": "tuner.recommendation", "Recommendation": "tuner.recommendation"}


def __getattr__(name: str):
    """``tuner.recommend`` and ``tuner.Recommendation``, imported on first use so that
    ``import tuner`` stays light (no pandas, no torch)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")
