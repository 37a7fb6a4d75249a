"""What a terminal shows after a program wrote to it: the lines left on its screen, once the
cursor moves, line erasures and colours that a live display (rich) writes are played."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|([\r\n])")


def screen(written: str) -> list[str]:
    """The screen's lines (trailing blanks cut) after ``written`` was written to a terminal
    as wide as its longest line: colours dropped, ``ESC[nA`` (up), ``ESC[2K`` (erase the
    line), carriage returns and newlines played."""
    lines: list[str] = [""]
    row = col = 0
    at = 0
    for match in [*_CONTROL.finditer(written), None]:
        text = written[at:match.start() if match else len(written)]
        line = lines[row].ljust(col)
        lines[row] = line[:col] + text + line[col + len(text):]
        col += len(text)
        if match is None:
            break
        at = match.end()
        args, code, char = match.groups()
        if char == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif char == "\r":
            col = 0
        elif code == "A":
            row = max(0, row - int(args or 1))
        elif code == "K":
            lines[row] = ""
    return [line.rstrip() for line in lines]
