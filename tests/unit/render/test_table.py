"""Tables and sentences that fit the terminal (tuner.render.table)."""

from __future__ import annotations

import io
import os
import shutil
import sys

from tuner.render import table
from tuner.render.table import Column, grid, terminal_width, wrap


def test_the_width_is_columns_else_the_terminals_else_120(monkeypatch):
    monkeypatch.setenv("COLUMNS", "93")
    assert terminal_width() == 93
    monkeypatch.setenv("COLUMNS", "wide")  # not a number: as if unset
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # piped: no terminal
    assert terminal_width() == 120
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() == table.PIPED_WIDTH == 120

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(shutil, "get_terminal_size",
                        lambda fallback: os.terminal_size((77, 30)))
    assert terminal_width() == 77


def test_a_sentence_wraps_at_spaces_and_keeps_a_command_whole():
    text = ("batch size 1: default is 1.25x faster than eager; `tuner confirm studies/a-study "
            "--repeats 3` measures both again in more processes.")
    lines = wrap(text, 60).splitlines()
    assert max(map(len, lines)) <= 60 and all(line.startswith("  ") for line in lines[1:])
    assert any("`tuner confirm studies/a-study --repeats 3`" in line for line in lines)
    assert " ".join(" ".join(lines).split()) == text
    # A command longer than a line breaks at its own spaces; a word only where it is longer
    # than a line.
    long = wrap("run `tuner confirm studies/s --repeats 3 --redo --storage x` now", 40)
    assert long.splitlines() == ["run `tuner confirm studies/s --repeats 3", "  --redo --storage x` now"]
    path = "/very/long/path" * 5
    assert [len(line) for line in wrap(f"see {path}", 40).splitlines()] == [40, 40, 3]


def test_a_table_wraps_its_text_and_never_cuts_a_figure():
    columns = [Column("config", text=True), Column("median ms"), Column("memory")]
    rows = [["reduce-overhead +channels_last -epilogue_fusion", "0.630 (0.96x)",
             "0.20 GiB (1.05x)"], ["eager", "3.549", "0.11 GiB"]]
    natural = grid(columns, rows)
    assert natural.splitlines()[1].startswith("reduce-overhead +channels_last -epilogue_fusion  ")
    # Narrower: the name wraps in its column first, then the header, then a ratio goes under
    # its figure; no cell is cut.
    for width in (70, 50, 40, 30):
        text = grid(columns, rows, width)
        lines = text.splitlines()
        # at the narrowest, the longest word and the figures: 16 + 7 + 8 and the gaps
        assert max(map(len, lines)) <= max(width, 35), (width, text)
        flat = " ".join(text.split())
        for cell in ("0.630", "(0.96x)", "0.20 GiB", "(1.05x)", "3.549", "-epilogue_fusion"):
            assert cell in flat, (width, cell, text)
    assert "0.630 (0.96x)" in grid(columns, rows, 50)  # the ratio beside its figure, it fits
    assert "0.630 (0.96x)" not in grid(columns, rows, 30)
