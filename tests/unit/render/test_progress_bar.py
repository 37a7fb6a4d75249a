"""A search's progress on a terminal: the live bar with the trials done of those planned, the
best p50 so far per batch size and the ETA; elsewhere the plain lines (tests/unit/cli)."""

from __future__ import annotations

import dataclasses
import io

from rich.console import Console

from tests.support.terminal import screen
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialEvent, TrialResult
from tuner.render.progress_bar import SearchBar


class Clock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def event(number: int, trial: int, eta_s: float | None, budget_left_s: float | None = None,
          ) -> TrialEvent:
    result = TrialResult(Status.OK, latency_ms_p50=12.0, compile_s_cold=9.0, warmup_s=1.0)
    return TrialEvent(number=number, target=8, config=TrialConfig("inductor", 8, "default", False),
                      result=result, trial_number=trial, eta_s=eta_s,
                      best={1: ("eager", 6.25), 8: ("default", 12.0)},
                      budget_left_s=budget_left_s)


def shown(out: io.StringIO) -> list[str]:
    """The terminal's lines once the display stopped: the trials' lines, then its last frame."""
    return [line for line in screen(out.getvalue()) if line]


def test_the_bar_shows_trials_done_the_best_per_batch_size_and_the_eta_counted_down():
    out, clock = io.StringIO(), Clock()
    said: list[str] = []
    with SearchBar(Console(file=out, force_terminal=True, width=100), clock=clock) as bar:
        on = bar.callbacks(said.append)
        on["on_start"](5, TrialConfig("inductor", 8, "default", False), "default")
        clock.now += 40
        on["on_trial"](event(3, 5, eta_s=100.0, budget_left_s=900.0))
        clock.now += 30  # the ETA and the budget count down between trials
        on["on_message"]("confirming 2 finalists")
    lines = shown(out)
    assert "[3/8] trial 5 default bs=8: p50 12.000 ms, warm-up 10.0 s" in lines
    bar_line = [line for line in lines if "trials" in line][-1]
    assert bar_line.endswith("3/8 trials · 1 min elapsed · budget left 14 min · ETA 1 min")
    at = lines.index(bar_line)
    assert lines[at + 1:at + 4] == ["best so far bs=1: eager 6.250 ms",
                                    "            bs=8: default 12.000 ms",
                                    "confirming 2 finalists"]
    assert said == ["confirming 2 finalists"]  # the message itself, printed by the CLI


def test_an_eta_that_is_a_floor_says_at_least_and_none_shows_no_eta():
    out, clock = io.StringIO(), Clock()
    with SearchBar(Console(file=out, force_terminal=True, width=100), clock=clock) as bar:
        bar.trial(dataclasses.replace(event(1, 0, eta_s=42.0), eta_at_least=True))
    assert [line for line in shown(out) if "trials" in line][-1].endswith(
        "1/8 trials · 0 s elapsed · ETA at least 42 s")
    out = io.StringIO()
    with SearchBar(Console(file=out, force_terminal=True, width=100), clock=clock) as bar:
        bar.trial(event(8, 7, eta_s=None))
    assert [line for line in shown(out) if "trials" in line][-1].endswith("8/8 trials · 0 s elapsed")


def test_a_run_that_starts_no_trial_draws_nothing():
    out = io.StringIO()
    with SearchBar(Console(file=out, force_terminal=True, width=100)) as bar:
        bar.callbacks(lambda text: None)["on_message"]("waiting for 2 trials")
    assert out.getvalue() == ""

