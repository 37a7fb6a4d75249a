"""``tuner search``'s progress: a live bar where stderr is a terminal, the plain lines where it
is not (a log, a pipe, CI: tests/unit/cli/test_app.py checks those lines)."""

from __future__ import annotations

import io
import os

import pytest

from tests.support.cli import invoke, search_args
from tests.support.terminal import screen
from tuner.cli import output

pytestmark = pytest.mark.usefixtures("fake_cli")


@pytest.fixture
def terminal(monkeypatch):
    """stderr taken for a terminal (CliRunner's is a buffer)."""
    monkeypatch.setattr(output, "on_terminal", lambda stream: True)


def test_search_on_a_terminal_draws_the_bar_with_the_trials_above_it(tmp_path, terminal):
    result = invoke(*search_args(tmp_path, "--confirm", "0"))
    assert result.exit_code == 0, result.output
    lines = [line for line in screen(result.stderr) if line]
    trials = [line for line in lines if line.startswith("[")]
    assert [line.split(" trial ")[0] for line in trials] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert all(" | best " not in line for line in trials)  # the bar shows the best
    at = next(i for i, line in enumerate(lines) if "4/4 trials · " in line)
    assert lines[at + 1].startswith("best so far bs=1: ")
    assert lines[at + 2].lstrip().startswith("bs=8: ")
    assert not any(line.startswith("  running ") for line in lines)
    assert lines[-1].startswith("stopped: every config in the search space is measured")
    assert "batch size 1: Pareto-optimal configs" in result.stdout  # the table, as ever


def test_quiet_on_a_terminal_draws_nothing(tmp_path, terminal):
    result = invoke(*search_args(tmp_path, "-q"))
    assert result.exit_code == 0 and result.stderr == ""


def test_a_terminal_is_a_tty_that_is_not_dumb(monkeypatch):
    main, other = os.openpty()
    with open(other, "w") as tty:
        monkeypatch.setenv("TERM", "xterm-256color")
        assert output.on_terminal(tty)
        monkeypatch.setenv("TERM", "dumb")  # emacs' shell, say: cannot redraw a line
        assert not output.on_terminal(tty)
    os.close(main)
    assert not output.on_terminal(io.StringIO())
