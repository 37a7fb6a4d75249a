"""``tuner compare --plot``: the studies' Pareto fronts, one panel per batch size, latency
against memory. Each study has its colour and marker and its latency/memory front drawn as a
staircase; each config has a number, the same in every panel and study, and the key below the
panels names it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tuner.data.comparison import Comparison, Point, StudyRef
from tuner.data.select import GIB
from tuner.errors import UserError
from tuner.render.comparison import where
from tuner.render.plot_numbers import Mark, Numbered, add_key, key_columns, key_height_in
from tuner.render.plots import need_matplotlib, save

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_PANEL_IN = (6.0, 4.6)  # a panel's width and height, inches
_KEY_FONT = 8.0


def plot(comparison: Comparison, path: str | Path) -> Path:
    """Write a PNG (or the format ``path``'s extension names, as matplotlib does: .svg, .pdf):
    per batch size a panel with each study's Pareto-optimal configs, latency against memory,
    and each study's latency/memory front; each config numbered, a key below naming the
    numbers. Returns the path written: a path without an extension gets .png, as matplotlib
    would add it."""
    need_matplotlib("tuner compare --plot")
    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    return save(figure(comparison), path)


def figure(comparison: Comparison) -> Any:
    """The figure :func:`plot` writes (a matplotlib ``Figure``)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fronts = {s.tag: {bs: [p for p in points if p.peak_memory_bytes]
                      for bs, points in comparison.fronts[s.tag].items()}
              for s in comparison.studies}
    sizes = [bs for bs in comparison.batch_sizes
             if any(fronts[s.tag].get(bs) for s in comparison.studies)]
    if not sizes:
        raise UserError("nothing to plot: no study has a verified config")
    numbers = _numbers(fronts, sizes)
    entries = [f"{n}  {name}" for name, n in numbers.items()]
    columns = min(len(sizes), 3)
    rows = -(-len(sizes) // columns)
    width = max(_PANEL_IN[0] * columns, 7.5)
    key_cols = key_columns(entries, width, _KEY_FONT)
    fig = Figure(figsize=(width, _PANEL_IN[1] * rows + 0.9 + 0.22 * len(comparison.studies)
                          + key_height_in(entries, key_cols, _KEY_FONT)),
                 layout="constrained")
    axes = list(fig.subplots(rows, columns, squeeze=False).flat)
    memory = _memory_label(comparison.studies)
    places = []
    for ax, bs in zip(axes, sizes):
        places.append(_panel(ax, bs, comparison.studies, fronts, numbers, memory))
    for ax in axes[len(sizes):]:
        ax.set_visible(False)
    studies = [Line2D([], [], color=COLOURS[i % len(COLOURS)], marker=MARKERS[i % len(MARKERS)],
                      markersize=7) for i, _ in enumerate(comparison.studies)]
    # The title heads the studies' legend: a suptitle and a legend above the panels overlap.
    fig.legend(studies, [f"{s.tag}  {s.name}: {where(s).split(', host')[0]}"
                         for s in comparison.studies],
               loc="outside upper center", fontsize=9, frameon=False, handlelength=2.5,
               title="Pareto-optimal configs per batch size (over latency, memory and warm-up); "
                     "lines: each study's latency/memory front",
               title_fontsize=10)
    add_key(fig, entries, "configs: number beside a point, config", key_cols, _KEY_FONT)
    fig.draw_without_rendering()  # the layout, on which the numbers are placed
    for panel in places:
        panel.place()
    return fig


def _numbers(fronts: dict[str, dict[int, list[Point]]], sizes: list[int]) -> dict[str, int]:
    """A number per config name, from 1, in the order they come: by batch size, then by
    latency; a config keeps its number in every panel and study."""
    numbers: dict[str, int] = {}
    for bs in sizes:
        points = [p for by_bs in fronts.values() for p in by_bs.get(bs, [])]
        for p in sorted(points, key=lambda p: p.latency_ms_p50_median):
            numbers.setdefault(p.name or p.label, len(numbers) + 1)
    return numbers


def _panel(ax: Any, bs: int, studies: list[StudyRef], fronts: dict[str, dict[int, list[Point]]],
           numbers: dict[str, int], memory: str) -> Numbered:
    """One batch size's panel: each study's points and front; returns what to number."""
    marks, lines = [], []
    every = [p for s in studies for p in fronts[s.tag].get(bs, [])]
    for i, s in enumerate(studies):
        points = fronts[s.tag].get(bs, [])
        if not points:
            continue
        colour, marker = COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)]
        ax.scatter([p.latency_ms_p50_median for p in points], [_gib(p) for p in points],
                   color=colour, marker=marker, s=40, zorder=3, edgecolors="white",
                   linewidths=0.5)
        stair = _front_2d(points)
        ax.step([p.latency_ms_p50_median for p in stair], [_gib(p) for p in stair],
                where="post", color=colour, alpha=0.6, zorder=2)
        lines.append([corner for a, b in zip(stair, stair[1:])
                      for corner in ((a.latency_ms_p50_median, _gib(a)),
                                     (b.latency_ms_p50_median, _gib(a)))] +
                     [(stair[-1].latency_ms_p50_median, _gib(stair[-1]))])
        marks += [Mark(p.latency_ms_p50_median, _gib(p), str(numbers[p.name or p.label]), colour)
                  for p in points]
    latencies = [p.latency_ms_p50_median for p in every]
    if max(latencies) / max(min(latencies), 1e-9) > 20:
        ax.set_xscale("log")
    ax.margins(x=0.08, y=0.1)  # room for the numbers of the outer points
    ax.set_title(f"batch size {bs}", fontsize=11)
    ax.set_xlabel("median latency per call (ms), lower is better")
    ax.set_ylabel(memory)
    ax.grid(True, alpha=0.3)
    return Numbered(ax, marks, lines=lines)


def _memory_label(studies: list[StudyRef]) -> str:
    """The memory axis's title; where the studies measured different kinds of memory, it says
    so rather than calling them one quantity."""
    kinds = {s.memory_kind for s in studies} - {None}
    if len(kinds) < 2:
        return "memory while serving (GiB), lower is better"
    each = ", ".join(f"{s.tag} {s.memory_kind}" for s in studies if s.memory_kind)
    return f"memory while serving (GiB), lower is better\nnot one quantity: {each}"


def _gib(p: Point) -> float:
    """The peak memory of a plotted point (the plot keeps only points that have one), GiB."""
    return float(p.peak_memory_bytes or math.nan) / GIB


def _front_2d(points: list[Point]) -> list[Point]:
    """The latency/memory non-dominated points, by latency: the staircase drawn per study."""
    out: list[Point] = []
    for p in sorted(points, key=lambda p: (p.latency_ms_p50_median, _gib(p))):
        if not out or _gib(p) < _gib(out[-1]):
            out.append(p)
    return out
