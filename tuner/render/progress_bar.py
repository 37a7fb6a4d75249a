"""A search's progress on a terminal: a live bar (rich) under the lines of the trials done,
with the trials done of those planned, the time elapsed and the budget left, the best p50 so far
per batch size, what runs now, and the ETA, counted down between trials. Where stderr is no
terminal the CLI prints :func:`tuner.render.progress.progress_line` instead: logs stay
plain lines."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from tuner.domain.config import TrialConfig
from tuner.domain.records import TrialEvent
from tuner.render.progress import trial_outcome
from tuner.words import fmt_s


class SearchBar:
    """The live display, from the first trial started to :meth:`close` (a ``with`` block
    closes it): nothing is drawn for a run that starts no trial. Lines written to stderr
    meanwhile (the search's messages) go above it."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self._live: Live | None = None
        self._began = clock()
        # The last trial's event and when it came, together: the display's thread reads them.
        self._last: tuple[TrialEvent | None, float] = (None, 0.0)
        self._status = ""
        self._spinner = Spinner("dots", style="cyan")
        self._closed = False

    def __enter__(self) -> SearchBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def callbacks(self, say: Callable[[str], None]) -> dict[str, Callable[..., None]]:
        """The callbacks a Search takes (``on_trial``, ``on_message``, ``on_start``); ``say``
        prints a message."""
        return {"on_trial": self.trial, "on_message": lambda text: self.message(text, say),
                "on_start": self.start}

    def start(self, number: int, config: TrialConfig, name: str) -> None:
        """Trial ``number`` of ``config`` (named ``name``) starts."""
        self._open()
        self._status = f"running trial {number}: {name} bs={config.batch_size}"
        self._refresh()

    def trial(self, event: TrialEvent) -> None:
        """A trial ended: its line above the bar, the bar and the best so far updated."""
        self._open()
        self._last = (event, self.clock())
        self._status = ""
        self.console.print(trial_outcome(event), markup=False, highlight=False,
                           overflow="fold")
        self._refresh()

    def message(self, text: str, say: Callable[[str], None]) -> None:
        """A message of the search: printed (above the bar), and the bar's status line until
        the next trial starts (confirming the finalists, say)."""
        say(text)
        if self._live is not None:
            self._status = text.splitlines()[0] if text else ""
            self._refresh()

    def close(self) -> None:
        """Stop drawing, the bar's last state left on the terminal."""
        if self._live is not None:
            self._closed = True  # the last frame, left on the screen, has no spinner
            self._live.stop()
            self._live = None

    def _open(self) -> None:
        if self._live is None:
            self._live = Live(console=self.console, get_renderable=self.render,
                              refresh_per_second=4, redirect_stdout=False,
                              redirect_stderr=True, transient=False)
            self._live.start()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def render(self) -> RenderableType:
        """The display now: the bar and its figures, the best so far (a batch size a line),
        what runs."""
        (event, at), now = self._last, self.clock()
        bar = Table.grid(padding=(0, 1))
        bar.add_column(width=1)
        bar.add_column(width=min(30, max(10, self.console.width // 4)))
        bar.add_column(overflow="fold")
        done, planned = (event.number, event.target) if event else (0, None)
        bar.add_row("" if self._closed else self._spinner,
                    ProgressBar(total=planned, completed=done),
                    Text(" · ".join(self._counts(event, now - at, now))))
        lines: list[RenderableType] = [bar]
        if event is not None and event.best:
            best = Table.grid(padding=(0, 1))
            best.add_column(no_wrap=True)
            best.add_column(no_wrap=True, justify="right")
            best.add_column(overflow="fold")
            for i, (bs, (name, ms)) in enumerate(sorted(event.best.items())):
                best.add_row("best so far" if i == 0 else "", f"bs={bs}:",
                             Text(f"{name} {ms:.3f} ms"))
            lines.append(best)
        if self._status:
            lines.append(Text(self._status, style="dim", overflow="ellipsis", no_wrap=True))
        return Group(*lines)

    def _counts(self, event: TrialEvent | None, since: float, now: float) -> list[str]:
        """The bar's figures: trials done of those planned, time elapsed, and the budget left and
        ETA as ``event`` said them ``since`` seconds ago."""
        parts = [f"{event.number}/{event.target or '?'} trials" if event else "first trial",
                 f"{fmt_s(now - self._began)} elapsed"]
        if event is None:
            return parts
        if event.budget_left_s is not None:
            parts.append(f"budget left {fmt_s(max(0.0, event.budget_left_s - since))}")
        if event.eta_s is not None:
            left = max(0.0, event.eta_s - since)
            parts.append(f"ETA {'at least ' if event.eta_at_least else ''}{fmt_s(left)}")
        return parts
