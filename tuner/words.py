"""Counts in the sentences the tuner writes, for every layer (data, study, render, cli)."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an s unless ``n`` is 1: ``1 trial``, ``0 trials``, ``2 trials``."""
    return f"{n} {word}{'' if n == 1 else 's'}"
