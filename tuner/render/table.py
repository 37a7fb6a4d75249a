"""Tables and paragraphs that fit the terminal: the width from ``COLUMNS`` or the terminal (a
fixed :data:`PIPED_WIDTH` when stdout is no terminal, so piped output and tests are stable),
tables laid out by rich (figures never wrapped, text wrapped in its column), sentences wrapped.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence

PIPED_WIDTH = 120  # stdout is no terminal and COLUMNS is unset
GAP = 2  # spaces between two columns
_MIN_TEXT = 30  # a text column is never narrower than its longest word, up to this
_HELD = "\x00"  # a space wrap() may not break at


def terminal_width() -> int:
    """The width output should fit: ``COLUMNS`` where set to a whole number, else the
    terminal's, else :data:`PIPED_WIDTH`."""
    given = os.environ.get("COLUMNS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced, or closed
        tty = False
    return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns if tty else PIPED_WIDTH


@dataclasses.dataclass(frozen=True)
class Column:
    """A column of :func:`grid`: a figure (right-aligned, never wrapped) or text (left-aligned,
    wrapped at spaces within the column where the table would not fit)."""

    header: str
    text: bool = False


def grid(columns: Sequence[Column], rows: Iterable[Sequence[str]],
         width: int | None = None) -> str:
    """``rows`` under the headers of ``columns``, within ``width`` characters where the figures
    and the longest word of each text column fit in it (else as narrow as they allow); None:
    each column as wide as its widest cell."""
    from rich.console import Console
    from rich.table import Table

    body = [list(row) for row in rows]
    widths = _widths(columns, body, width)
    table = Table(box=None, pad_edge=False, padding=(0, GAP // 2), header_style="none")
    for c, w in zip(columns, widths):
        header = c.header if c.text else textwrap.fill(c.header, w, break_long_words=False)
        table.add_column(header, justify="left" if c.text else "right", no_wrap=not c.text,
                         overflow="fold", width=w)
    for row in body:
        table.add_row(*(x if c.text or len(x) <= w else "\n".join(_pieces(x))
                        for x, c, w in zip(row, columns, widths)))
    out = io.StringIO()
    Console(file=out, width=sum(widths) + GAP * len(widths), color_system=None,
            force_terminal=False, highlight=False, emoji=False, markup=False,
            legacy_windows=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _widths(columns: Sequence[Column], body: list[list[str]], width: int | None) -> list[int]:
    """Each column's width. A figure's is its widest cell or header, or where the table would
    not fit otherwise, its widest cell or header word (the header then wraps), or its widest
    figure or ratio (a ratio then goes under its figure). Text columns
    share what is left of ``width``, each at least its longest word (at most
    :data:`_MIN_TEXT`) and at most its widest cell, the one that wants least served first."""
    cells = [[c.header, *(r[i] for r in body)] for i, c in enumerate(columns)]
    natural = [max(map(len, column)) for column in cells]
    if width is None:
        return natural
    least = [min(_MIN_TEXT, max(map(_longest_word, column))) for column in cells]
    out = [least[i] if c.text else natural[i] for i, c in enumerate(columns)]
    room = width - sum(out) - GAP * (len(out) - 1)
    # Where the table would not fit: figure headers wrap, those that save most first; then
    # ratios go under their figures.
    for tight in (lambda column: max(_longest_word(column[0]), *map(len, column[1:])),
                  lambda column: max(_longest_word(column[0]),
                                     *(len(p) for x in column[1:] for p in _pieces(x)))):
        narrower = {i: tight(cells[i]) for i, c in enumerate(columns) if not c.text}
        for i in sorted(narrower, key=lambda i: narrower[i] - out[i]):
            if room >= 0:
                break
            new = max(narrower[i], out[i] + room)  # no narrower than the table needs
            room += out[i] - new
            out[i] = new
    # The text column that wants least gets what it wants first (a notes column, whole), the
    # rest share what is left.
    for i in sorted((i for i, c in enumerate(columns) if c.text),
                    key=lambda i: natural[i] - least[i]):
        more = max(0, min(natural[i] - out[i], room))
        out[i] += more
        room -= more
    return out


def _pieces(cell: str) -> list[str]:
    """A figure's parts that stay on one line: the figure, and a ratio after it (``(0.96x)``)
    where the column is too narrow for both."""
    return re.split(r" (?=\()", cell)


def _longest_word(cell: str) -> int:
    return max((len(w) for w in cell.split()), default=0)


def wrap(text: str, width: int | None = None, hang: int = 2) -> str:
    """``text`` wrapped to ``width`` (None: :func:`terminal_width`) at spaces, each line after
    the first indented ``hang`` more than the first. A command in backticks stays on one line
    where it fits one, so that it pastes as it is; a word (a path) is split only where it is
    longer than a line."""
    width = terminal_width() if width is None else width
    if not text.strip():
        return text
    lead = text[:len(text) - len(text.lstrip(" "))]
    # A space within backticks is no place to break (held as another character meanwhile),
    # unless the command is longer than a line.
    line = max(width, 20) - len(lead) - hang - 2
    held = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", _HELD)
                  if len(m.group(0)) <= line else m.group(0), text.strip())
    return textwrap.fill(held, width=max(width, 20), initial_indent=lead,
                         subsequent_indent=lead + " " * hang, break_on_hyphens=False
                         ).replace(_HELD, " ")
