"""tuner: find the torch.compile settings that pay off for your model on your hardware."""

from __future__ import annotations

__version__ = "0.1.0"
