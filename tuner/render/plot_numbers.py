"""Short labels (a config's number) beside the markers of a plot, placed where they overlap no
other label or marker and stay inside the panel, and the key that names what each number
stands for. Long config names go in the key, never beside the points: written there they ran
over each other and out of the figure."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

# Where a label may go, around its point: unit directions (right first: the eye reads on),
# tried at growing distances; the first that is free wins.
_DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1))
_RINGS = (1.5, 8.0, 16.0)  # gaps between a marker's edge and its label, points
_CHAR_W = 0.66  # a character's width, in font sizes (DejaVu Sans: a digit 0.64, # 0.84)
_LINE_H = 1.2  # a line's height, in font sizes


@dataclasses.dataclass(frozen=True)
class Mark:
    """A point to label: where it is (data coordinates), the text, its colour, and its
    marker's width in points (the square root of a scatter's ``s``)."""

    x: float
    y: float
    text: str
    colour: str
    size: float = 7.0


@dataclasses.dataclass(frozen=True)
class Numbered:
    """A panel's points to number once its figure is laid out: ``marks`` get a label;
    ``others`` (points) and ``lines`` (polylines of horizontal and vertical segments), in data
    coordinates, are only kept clear of the labels where there is room."""

    ax: Any
    marks: list[Mark]
    others: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    lines: list[list[tuple[float, float]]] = dataclasses.field(default_factory=list)

    def place(self) -> list[Any]:
        """The labels, placed by :func:`label_points`."""
        return label_points(self.ax, self.marks, self.others, self.lines)


@dataclasses.dataclass(frozen=True)
class _Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: _Box) -> float:
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def outside(self, frame: _Box) -> float:
        """The area of this box outside ``frame``."""
        return (self.x1 - self.x0) * (self.y1 - self.y0) - self.overlap(frame)


def label_points(ax: Any, marks: Sequence[Mark], others: Sequence[tuple[float, float]] = (),
                 lines: Sequence[Sequence[tuple[float, float]]] = (),
                 fontsize: float = 8.0) -> list[Any]:
    """Write each mark's text beside its point, in its colour, where it overlaps no marker
    (``marks``' and ``others``', in data coordinates), no label placed before and, where it
    can, no line (``lines``: polylines of horizontal and vertical segments); a label moved
    away from its point gets a thin line to it. Call it once the figure's layout is done
    (``Figure.draw_without_rendering``): places are measured on the panel as drawn. The labels
    are left out of the layout, so the panels stay where they were measured. Returns the
    annotations made."""
    to_pt = 72.0 / ax.figure.dpi
    frame = _box(ax.get_window_extent(), to_pt)
    points = [_point(ax, m.x, m.y, to_pt) for m in marks]
    # A marker's box has a point of room around it: a label just clear of it looked joined.
    taken = [_Box(x - size / 2 - 1, y - size / 2 - 1, x + size / 2 + 1, y + size / 2 + 1)
             for (x, y), size in [*zip(points, (m.size for m in marks)),
                                  *((_point(ax, x, y, to_pt), 7.0) for x, y in others)]
             if math.isfinite(x) and math.isfinite(y)]
    crossed = [box for line in lines for box in _segments(ax, line, to_pt)]
    made = []
    for mark, (x, y) in zip(marks, points):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        half = mark.size / 2
        dx, dy, box, far = _place(x, y, mark.text, fontsize, half, taken, crossed, frame)
        taken.append(box)
        annotation = ax.annotate(
            mark.text, (mark.x, mark.y), xytext=(dx, dy), textcoords="offset points",
            ha="center", va="center", fontsize=fontsize, color=mark.colour, zorder=4,
            annotation_clip=False,
            arrowprops=dict(arrowstyle="-", color=mark.colour, lw=0.6, alpha=0.7,
                            shrinkA=0, shrinkB=half) if far else None)
        annotation.set_in_layout(False)
        made.append(annotation)
    return made


def _place(x: float, y: float, text: str, fontsize: float, half: float, taken: list[_Box],
           crossed: list[_Box], frame: _Box) -> tuple[float, float, _Box, bool]:
    """The offset (points) of the label's centre from its point, the label's box, and whether
    it is away from its point (past the nearest ring): the first free place, else the one
    that overlaps least (a line crossed costs less than a marker or label covered: a number
    over a line is still read)."""
    w, h = _CHAR_W * fontsize * len(text) + 2, _LINE_H * fontsize
    best: tuple[float, float, _Box, bool] | None = None
    least = math.inf
    for ring in _RINGS:
        # Beside, above or below: the label's nearest edge ``gap`` from the point; on a
        # diagonal, its nearest corner.
        gap = half + ring
        corner = gap / math.sqrt(2)
        for ux, uy in _DIRECTIONS:
            dx = ux * ((corner if uy else gap) + w / 2)
            dy = uy * ((corner if ux else gap) + h / 2)
            box = _Box(x + dx - w / 2, y + dy - h / 2, x + dx + w / 2, y + dy + h / 2)
            cost = sum(box.overlap(t) for t in taken) + 100 * box.outside(frame) + \
                0.2 * sum(box.overlap(c) for c in crossed)
            if cost == 0:
                return dx, dy, box, ring != _RINGS[0]
            if cost < least:
                best, least = (dx, dy, box, ring != _RINGS[0]), cost
    assert best is not None
    return best


def _point(ax: Any, x: float, y: float, to_pt: float) -> tuple[float, float]:
    if not (math.isfinite(x) and math.isfinite(y)):
        return math.nan, math.nan
    px, py = ax.transData.transform((x, y))
    return float(px) * to_pt, float(py) * to_pt


def _segments(ax: Any, line: Sequence[tuple[float, float]], to_pt: float) -> list[_Box]:
    """The segments of a polyline as boxes a point wide (horizontal and vertical segments:
    a staircase)."""
    ends = [_point(ax, x, y, to_pt) for x, y in line]
    return [_Box(min(a[0], b[0]) - 0.5, min(a[1], b[1]) - 0.5,
                 max(a[0], b[0]) + 0.5, max(a[1], b[1]) + 0.5)
            for a, b in zip(ends, ends[1:]) if all(map(math.isfinite, (*a, *b)))]


def _box(extent: Any, to_pt: float) -> _Box:
    return _Box(extent.x0 * to_pt, extent.y0 * to_pt, extent.x1 * to_pt, extent.y1 * to_pt)


def key_columns(entries: Sequence[str], width_in: float, fontsize: float) -> int:
    """How many columns of the key fit a figure ``width_in`` inches wide (1 to 3)."""
    longest = max(map(len, entries), default=0) * _CHAR_W * fontsize / 72 + 0.5
    return max(1, min(3, int(width_in * 0.95 // max(longest, 0.1))))


def key_height_in(entries: Sequence[str], columns: int, fontsize: float) -> float:
    """The key's height in inches, its title included."""
    lines = -(-len(entries) // columns) + 1
    return lines * fontsize * 1.45 / 72 + 0.15


def add_key(fig: Any, entries: Sequence[str], title: str, columns: int,
            fontsize: float = 8.0, handles: Sequence[Any] | None = None) -> Any:
    """The key below the panels: one text line per entry (``"3  inductor:default ..."``), in
    ``columns`` columns, under ``title``; each after its marker where ``handles`` are given."""
    from matplotlib.lines import Line2D

    shown = list(handles or [Line2D([], [], linestyle="none") for _ in entries])
    space = dict(handlelength=1.5, handletextpad=0.6) if handles else \
        dict(handlelength=0, handletextpad=0)
    return fig.legend(shown, list(entries), loc="outside lower center", ncols=columns,
                      fontsize=fontsize, frameon=False, **space,
                      columnspacing=2.0, title=title, title_fontsize=fontsize + 1,
                      alignment="left")
