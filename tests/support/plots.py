"""What a reader of a plot sees, measured on the drawn figure: the labels beside its points,
and which of them cover another label, a marker, or run out of their panel."""

from __future__ import annotations

from typing import Any


def panels(fig: Any) -> list[Any]:
    """The figure's visible axes, its subfigures' included."""
    return [ax for ax in fig.get_axes() if ax.get_visible()]


def labels(ax: Any) -> list[str]:
    """The texts written beside the points of a panel."""
    return [t.get_text() for t in ax.texts]


def collisions(fig: Any) -> list[str]:
    """Each label that overlaps another label or a marker of its panel, or reaches past the
    panel, said in a line (empty: every label is readable)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    found = []
    for ax in panels(fig):
        frame = ax.get_window_extent(renderer)
        # The text alone: an annotation's extent holds its line to the point too.
        boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in ax.texts]
        points = [tuple(xy) for c in ax.collections
                  for xy in ax.transData.transform(c.get_offsets())]
        for i, (text, box) in enumerate(boxes):
            if not (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                    and box.y1 <= frame.y1):
                found.append(f"{ax.get_title()!r} {text}: outside the panel")
            found += [f"{ax.get_title()!r} {text} covers {other}"
                      for other, b in boxes[i + 1:] if box.overlaps(b)]
            found += [f"{ax.get_title()!r} {text} covers a marker at {x:.0f},{y:.0f}"
                      for x, y in points if box.contains(x, y)]
    return found


def png_size(path: Any) -> tuple[int, int]:
    """A PNG file's width and height in pixels (it must be a PNG)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
