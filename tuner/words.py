"""Counts and durations in the sentences the tuner writes, for every layer (data, study,
render, cli)."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an s unless ``n`` is 1: ``1 trial``, ``0 trials``, ``2 trials``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def fmt_s(seconds: float) -> str:
    """``42 s``, ``7 min``, ``1.5 h``."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
