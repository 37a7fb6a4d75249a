"""The gain over the best plain mode (:mod:`tuner.data.plain`) in words, for ``tuner show``,
``tuner recommend`` and ``tuner compare``."""

from __future__ import annotations

from tuner.data.plain import NONE, SAME, UNDECIDED, PlainGain

# What plain means, in a few words (docs/cli.md has the whole definition).
PLAIN = "torch's default, reduce-overhead or max-autotune with torch's settings"


def describe(g: PlainGain) -> str:
    """The pick against the best plain mode, as a clause: ``1.08x faster than the best plain
    mode, reduce-overhead (0.617 vs 0.667 ms), beyond noise``."""
    if g.noise == NONE:
        return f"no plain mode measured at batch size {g.batch_size} ({PLAIN})"
    if g.noise == SAME:
        return "the best plain mode itself: no gain over plain"
    s = g.speedup_vs_plain
    ratio = "?" if s is None else f"{s:.2f}x faster" if s >= 1 else f"{1 / s:.2f}x slower"
    figures = ("" if g.latency_ms_p50_median is None or g.plain_latency_ms_p50_median is None
               else f" ({g.latency_ms_p50_median:.3f} vs {g.plain_latency_ms_p50_median:.3f} ms)")
    return f"{ratio} than the best plain mode, {g.plain_name or g.plain_label}{figures}, {_noise(g)}"


def cell(g: PlainGain | None) -> str:
    """A table cell: ``1.08x beyond noise``, ``1.00x within noise``, ``plain`` (the pick is the
    best plain mode), ``none measured``."""
    if g is None or g.noise == NONE:
        return "none measured"
    if g.noise == SAME or g.speedup_vs_plain is None:
        return "plain"
    return f"{g.speedup_vs_plain:.2f}x {g.noise}"


def line(g: PlainGain) -> str:
    """The line under a batch size's verdict in ``tuner show``."""
    if g.noise == NONE:
        return f"batch size {g.batch_size} over plain torch.compile: {describe(g)}."
    return (f"batch size {g.batch_size} over plain torch.compile: {g.name or g.label} is "
            f"{describe(g)}.")


def _noise(g: PlainGain) -> str:
    if g.noise != UNDECIDED:
        return g.noise
    if min(g.processes) < 2:
        return ("undecided: measured in one process" if max(g.processes) < 2 else
                "undecided: one of them measured in one process")
    if g.processes_to_decide:
        return f"undecided: {g.processes_to_decide} processes each would decide"
    return "undecided: too few processes to tell"
